"""Survival per package of the last `make mutate` run (mutmut's results in mutants/).

    python -m scripts.mutation_summary            # the table
    python -m scripts.mutation_summary --survivors  # and the names of the survivors

A mutant is *killed* when a test failed (or timed out) with it, *survived* when the fast
suite passed with it; *no tests* means no test of the fast suite runs its function at all
(counted as surviving: nothing would notice the change); *not checked* ones were not run
yet (an interrupted run). Survival = (survived + no tests) / checked.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

#: The packages `make mutate` covers (pyproject.toml [tool.mutmut] only_mutate).
PACKAGES = ("gateway.matching", "gateway.templates.template", "gateway.envelope", "gateway.runtime",
            "adapters.kafka.commits", "adapters.nats.acks")
KILLED = {1, 3, 24, -24, 36, 37, 152, 255}  # a failing test, a timeout, the type checker
SURVIVED = {0}
NO_TESTS = {5, 33}


def package_of(mutant: str) -> str:
    return next((p for p in PACKAGES if mutant.startswith(p + ".")), "other")


def collect(root: Path) -> tuple[dict[str, Counter[str]], list[str]]:
    counts: dict[str, Counter[str]] = {p: Counter() for p in PACKAGES}
    survivors: list[str] = []
    for meta in sorted(root.rglob("*.meta")):
        codes = json.loads(meta.read_text()).get("exit_code_by_key", {})
        for mutant, code in codes.items():
            package = package_of(mutant)
            if package not in counts:
                continue
            if code is None:
                kind = "not checked"
            elif code in KILLED:
                kind = "killed"
            elif code in SURVIVED:
                kind = "survived"
                survivors.append(mutant)
            elif code in NO_TESTS:
                kind = "no tests"
                survivors.append(mutant)
            else:
                kind = "suspicious"
            counts[package][kind] += 1
    return counts, survivors


def table(counts: dict[str, Counter[str]]) -> str:
    head = ("package", "mutants", "checked", "killed", "survived", "no tests", "survival")
    rows = [head]
    for package, c in counts.items():
        checked = c["killed"] + c["survived"] + c["no tests"] + c["suspicious"]
        alive = c["survived"] + c["no tests"]
        rate = f"{100 * alive / checked:.1f}%" if checked else "-"
        rows.append((package, str(sum(c.values())), str(checked), str(c["killed"]),
                     str(c["survived"]), str(c["no tests"]), rate))
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["| " + " | ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                               for i, (cell, w) in enumerate(zip(row, widths, strict=True)))
             + " |" for row in rows]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mutants", default="mutants", help="mutmut's working folder")
    parser.add_argument("--survivors", action="store_true", help="list the survivors")
    args = parser.parse_args()
    counts, survivors = collect(Path(args.mutants))
    print(table(counts))
    if args.survivors:
        print("\n".join(["", *survivors]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
