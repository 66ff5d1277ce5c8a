#!/usr/bin/env python3
"""Run the fault scenarios (tests/integration/test_faults.py, marker `fault`) and print
one table: scenario, messages sent, delivered, duplicates, dead-lettered, lost.

    scripts/fault_report.py                 # 100,000 messages per SIGKILL stream
    scripts/fault_report.py -n 10000        # smaller
    scripts/fault_report.py -- -k sigkill   # extra pytest arguments after --

Each scenario appends its row to a JSON Lines file ($XRGW_FAULT_REPORT); the exit code
is pytest's (non-zero when a scenario failed), and a failed scenario has no row.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COLUMNS = ("scenario", "sent", "delivered", "duplicates", "dead-lettered", "lost")


def table(rows: list[dict[str, str]]) -> str:
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=100_000,
                        help="messages per SIGKILL stream (default 100000)")
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="xrgw-fault-") as tmp:
        rows_file = Path(tmp) / "rows.jsonl"
        env = dict(os.environ, XRGW_FAULT_N=str(args.n), XRGW_FAULT_REPORT=str(rows_file))
        # Big runs take long: a generous per-test timeout instead of the default 300 s.
        timeout = str(max(300, args.n // 50 + 300))
        command = [sys.executable, "-m", "pytest", "-m", "fault", "-q", "-rA",
                   "-p", "no:cacheprovider", "--timeout", timeout,
                   "tests/integration/test_faults.py", *args.pytest_args]
        print("$", " ".join(command), f"(XRGW_FAULT_N={args.n})", flush=True)
        code = subprocess.call(command, cwd=ROOT, env=env)
        rows = ([json.loads(line) for line in rows_file.read_text().splitlines() if line]
                if rows_file.exists() else [])
    print()
    print(f"Fault scenarios (SIGKILL streams: {args.n:,} messages each)")
    print(table(rows))
    notes = [f"- {r['scenario']}: {r['note']}" for r in rows if r.get("note")]
    if notes:
        print("\n".join(["", *notes]))
    if code != 0:
        print(f"\npytest exit code {code}: at least one scenario FAILED (no row above)")
    return code


if __name__ == "__main__":
    sys.exit(main())
