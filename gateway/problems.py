"""Problems found in definitions, configuration or input, reported as values.

Loaders and validators never stop at the first problem: they collect every `Problem`
and return them together. Each one names the file, the JSON path inside it, what is
wrong and how to fix it, so an operator can act without reading our code.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Literal

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Problem:
    severity: Severity
    file: str
    path: str
    message: str
    fix: str = ""

    def __str__(self) -> str:
        where = f"{self.file}: {self.path}" if self.path else self.file
        text = f"{where}: {self.severity}: {self.message}"
        return f"{text} (fix: {self.fix})" if self.fix else text

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
