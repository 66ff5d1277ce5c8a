"""A fault scenario's result row (sent, delivered, duplicates, dead-lettered, lost), and
the environment through which `scripts/fault_report.py` sizes the scenarios and collects
their rows."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.faults.tally import Tally

#: Messages per SIGKILL stream (unset: each scenario's own size).
FAULT_N_ENV = "XRGW_FAULT_N"
#: A JSON Lines file each scenario appends its row to.
REPORT_ENV = "XRGW_FAULT_REPORT"
#: The row's columns; a row may also have a `note`. `readyz`: what /readyz said while
#: the fault lasted (scenarios that watched it).
COLUMNS = ("scenario", "sent", "delivered", "duplicates", "dead-lettered", "lost", "readyz")


def fault_n(default: int) -> int:
    """Messages per stream: `default` for `make test`, `$XRGW_FAULT_N` when set (`make
    fault` runs 100,000 per at-least-once route)."""
    return int(os.environ.get(FAULT_N_ENV) or default)


def table(rows: Sequence[Mapping[str, object]]) -> str:
    """`rows` as a Markdown table of COLUMNS, numbers right-aligned."""
    cells = [list(COLUMNS)] + [[str(r.get(c, "")) for c in COLUMNS] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(COLUMNS))]
    lines = []
    for n, row in enumerate(cells):
        lines.append("| " + " | ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))) + " |")
        if n == 0:
            lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def read_rows(path: Path) -> list[dict[str, str]]:
    """The rows the scenarios appended to `path` (none if it does not exist)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]


@dataclass(frozen=True)
class ScenarioRow:
    """A scenario's counted result. `record()` appends it to `$XRGW_FAULT_REPORT`: call
    it after the scenario's last assertion, so that a failed scenario has no row (a row
    written first stood in the report of a scenario that then failed)."""

    row: dict[str, str]
    note: str
    lost: int

    def record(self) -> None:
        target = os.environ.get(REPORT_ENV)
        if target:
            with open(target, "a", encoding="utf-8") as out:
                out.write(json.dumps({**self.row, "note": self.note}) + "\n")


def report(scenario: str, sent: range | Sequence[int], delivered: Tally, dead: Tally,
           extra: str = "", readyz: str = "") -> ScenarioRow:
    """Print the scenario's table and count how many were lost (neither out nor dead);
    the row goes to `scripts/fault_report.py`'s table once the scenario passed
    (`ScenarioRow.record`). `readyz`: what /readyz said during the fault, if watched."""
    lost = len([s for s in sent if s not in delivered.counts and s not in dead.counts])
    values = (scenario, len(sent), delivered.unique, delivered.duplicates,
              sum(dead.counts.values()), lost, readyz)
    row = {column: str(value) for column, value in zip(COLUMNS, values, strict=True)}
    print()
    print(table([row]))
    if extra:
        print(extra)
    return ScenarioRow(row, extra, lost)
