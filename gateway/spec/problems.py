"""Problems found in definitions, configuration or input, reported as values.

Loaders and validators never stop at the first problem: they collect every `Problem`
and return them together. Each one names the file, the JSON path inside it, what is
wrong and how to fix it, so an operator can act without reading our code. Where the
text of the file is known, a problem also carries its line and column, and prints in the
`FILE:LINE:COL: severity: message` form that editors and CI problem matchers read.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Literal

Severity = Literal["error", "warning"]
#: A place in a text: 1-based line and column.
Position = tuple[int, int]


@dataclass(frozen=True)
class Problem:
    severity: Severity
    file: str
    path: str
    message: str
    fix: str = ""
    # 1-based; None when the position is not known (a registry's export, a whole file).
    line: int | None = None
    column: int | None = None

    def __str__(self) -> str:
        """`FILE:LINE:COL: severity: message (JSON path) (fix: ...)`, the form of compiler
        diagnostics; without a known line `FILE: severity: ...`. The JSON path is kept
        in both: it is the one locator every problem has, also in the fallback form."""
        where = self.file
        if self.line is not None:
            where += f":{self.line}" + (f":{self.column}" if self.column is not None else "")
        text = f"{where}: {self.severity}: {self.message}"
        if self.path and self.path != "$":
            text += f" ({self.path})"
        return f"{text} (fix: {self.fix})" if self.fix else text

    def to_json(self) -> dict[str, object]:
        """The problem as `xrgw validate --format json` writes it."""
        return {"file": self.file, "line": self.line, "column": self.column,
                "severity": self.severity, "path": self.path, "message": self.message,
                "fix": self.fix}

    @property
    def is_error(self) -> bool:
        return self.severity == "error"


@dataclass
class Problems:
    """An append-only list of problems with helpers for the common cases."""

    items: list[Problem] = field(default_factory=list)

    def error(self, file: str, path: str, message: str, fix: str = "") -> None:
        self.items.append(Problem("error", file, path, message, fix))

    def warning(self, file: str, path: str, message: str, fix: str = "") -> None:
        self.items.append(Problem("warning", file, path, message, fix))

    def extend(self, problems: Iterable[Problem]) -> None:
        self.items.extend(problems)

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.items if p.is_error]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.items if not p.is_error]

    def __iter__(self) -> Iterator[Problem]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)


class DefinitionsError(Exception):
    """Raised by strict entry points when definitions have errors; carries all of them."""

    def __init__(self, problems: Iterable[Problem]) -> None:
        self.problems = list(problems)
        lines = "\n".join(f"  {p}" for p in self.problems)
        super().__init__(f"{len(self.problems)} problem(s) in definitions:\n{lines}")


_LAST_SEGMENT = re.compile(r'(\.[^.\[]+|\[\d+\]|\["[^"]*"\])$')


def parent_path(path: str) -> str | None:
    """`$.a.b[2]` -> `$.a.b`; None for `$` and for a path this cannot split."""
    if not path or path == "$":
        return None
    shorter = _LAST_SEGMENT.sub("", path)
    return None if shorter == path else shorter


def position_of(path: str, positions: Mapping[str, Position]) -> Position | None:
    """The position of `path`, else of its nearest parent that has one (a missing key is
    reported at the mapping it is missing from). The document root is not a position:
    a problem of the whole file stays without a line."""
    current: str | None = path
    while current is not None and current != "$":
        found = positions.get(current)
        if found is not None:
            return found
        current = parent_path(current)
    return None


def with_positions(problems: Iterable[Problem], file: str,
                   positions: Mapping[str, Position]) -> list[Problem]:
    """The problems, those of `file` without a line given the position of their path."""
    out: list[Problem] = []
    for problem in problems:
        found = (position_of(problem.path, positions)
                 if problem.file == file and problem.line is None else None)
        out.append(problem if found is None else
                   dataclasses.replace(problem, line=found[0], column=found[1]))
    return out


def json_path(*parts: str | int) -> str:
    """Render a JSON path like `$.messagegroups["a.b"].messages[0]`."""
    out = "$"
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part.isidentifier():
            out += f".{part}"
        else:
            out += f'["{part}"]'
    return out


def suggest(name: str, choices: Iterable[str]) -> str | None:
    """The choice `name` was most likely meant to be (a problem's "did you mean"), or None."""
    options = list(choices)
    by_lower = {c.lower(): c for c in options}
    close = difflib.get_close_matches(name.lower(), list(by_lower), n=1, cutoff=0.6)
    return by_lower[close[0]] if close else None
