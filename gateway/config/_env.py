"""`${VAR}` and `${VAR:-default}` substitution in the string values of a raw config tree.

Done before parsing, so every key can come from the environment, and the parser sees the
final values. Keys are left alone: an id that changes with the environment would make the
config's meaning depend on where it runs. `$${` writes a literal `${`. As in a shell,
`:-` also applies when the variable is set but empty. Values are never echoed in problems:
they may be secrets.

With `read_environment=False` (`xrgw validate --no-env`) no variable is read: a default
is used where one is written, and a reference without one is left as written, its path
recorded in `unresolved` so later checks leave that value alone (`${PORT}` is not an
integer, but the value it stands for may be).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from gateway.spec.problems import Problem, json_path

_TOKEN = re.compile(r"\$\$\{|\$\{([^}]*)\}|\$\{")
_EXPR = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(?::-(.*))?$", re.DOTALL)
Parts = tuple[str | int, ...]


class Substitution:
    def __init__(self, file: str, environ: Mapping[str, str] | None = None, *,
                 read_environment: bool = True) -> None:
        self.file = file
        self.environ: Mapping[str, str] | None = (
            None if not read_environment else os.environ if environ is None else environ)
        self.problems: list[Problem] = []
        self.substituted: set[str] = set()  # JSON paths whose value came from a variable
        # JSON paths whose value still holds a `${NAME}` (only without the environment).
        self.unresolved: set[str] = set()

    def apply(self, value: object, parts: Parts = ()) -> object:
        if isinstance(value, dict):
            return {k: self.apply(v, (*parts, str(k))) for k, v in value.items()}
        if isinstance(value, list):
            return [self.apply(v, (*parts, i)) for i, v in enumerate(value)]
        if isinstance(value, str) and "${" in value:
            return self._string(value, parts)
        return value

    def _string(self, text: str, parts: Parts) -> str:
        path = json_path(*parts)
        out: list[str] = []
        pos = 0
        for match in _TOKEN.finditer(text):
            out.append(text[pos:match.start()])
            pos = match.end()
            token = match.group(0)
            if token == "$${":
                out.append("${")
            elif match.group(1) is None:
                self._error(path, "'${' without a closing '}'",
                            "write ${NAME} or ${NAME:-default}, or $${ for a literal ${")
            else:
                out.append(self._variable(match.group(1), path))
        out.append(text[pos:])
        self.substituted.add(path)
        return "".join(out)

    def _variable(self, expr: str, path: str) -> str:
        parsed = _EXPR.match(expr)
        if parsed is None:
            self._error(path, f"'${{{expr}}}' is not a variable reference",
                        "write ${NAME} or ${NAME:-default}: NAME is letters, digits and _")
            return ""
        name, default = parsed.group(1), parsed.group(2)
        if self.environ is None:
            if default is not None:
                return default
            self.unresolved.add(path)
            return f"${{{expr}}}"
        value = self.environ.get(name)
        if value:
            return value
        if default is not None:
            return default
        if value is None:
            self._error(path, f"environment variable {name} is not set",
                        f"set {name}, or give a default: ${{{name}:-value}}")
        return ""

    def _error(self, path: str, message: str, fix: str) -> None:
        self.problems.append(Problem("error", self.file, path, message, fix))
