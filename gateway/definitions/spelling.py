"""A tally of older or non-spec spellings the reader accepted, reported once per document.

Catalogs in the wild mix every spec revision (notes section 1.10). Reading them is the
point of the lenient reader, so an older spelling is not an error; but an operator should
learn that a document uses them. One warning per (document, spelling) with a count keeps
that visible without burying real problems under hundreds of identical lines.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.definitions.located import Origin
from gateway.spec.problems import Problem


@dataclass
class _Use:
    first: Origin
    count: int = 1


class SpellingLog:
    def __init__(self) -> None:
        self._uses: dict[tuple[str, str, str], _Use] = {}

    def note(self, where: Origin, old: str, new: str) -> None:
        key = (where.file, old, new)
        use = self._uses.get(key)
        if use is None:
            self._uses[key] = _Use(where)
        else:
            use.count += 1

    def problems(self) -> list[Problem]:
        out: list[Problem] = []
        for (file, old, new), use in self._uses.items():
            places = f" ({use.count} places, first shown)" if use.count > 1 else ""
            out.append(Problem(
                "warning", file, use.first.path,
                f"older or non-spec spelling '{old}' read as '{new}'{places}",
                f"write '{new}' (xRegistry message definitions rc4 spelling)",
            ))
        return out
