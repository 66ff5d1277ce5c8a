"""Run the fault scenarios (tests/integration/test_faults.py and test_faults_proxy.py,
marker `fault`) and print one table: scenario, messages sent, delivered, duplicates,
dead-lettered, lost, and what /readyz said during the fault.

Run from the repository root (`make fault` does):

    python -m scripts.fault_report                 # 100,000 messages per SIGKILL stream
    python -m scripts.fault_report -n 10000        # smaller
    python -m scripts.fault_report -- -k sigkill   # extra pytest arguments after --

Each scenario appends its row to a JSON Lines file ($XRGW_FAULT_REPORT,
`harness.faults.report`); the exit code is pytest's (non-zero when a scenario failed),
and a failed scenario has no row.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from harness.faults.report import FAULT_N_ENV, REPORT_ENV, read_rows, table

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=100_000,
                        help="messages per SIGKILL stream (default 100000)")
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="xrgw-fault-") as tmp:
        rows_file = Path(tmp) / "rows.jsonl"
        env = dict(os.environ, **{FAULT_N_ENV: str(args.n), REPORT_ENV: str(rows_file)})
        # Big runs take long: a generous per-test timeout instead of the default 300 s.
        timeout = str(max(300, args.n // 50 + 300))
        command = [sys.executable, "-m", "pytest", "-m", "fault", "-q", "-rA",
                   "-p", "no:cacheprovider", "--timeout", timeout,
                   "tests/integration/test_faults.py",
                   "tests/integration/test_faults_proxy.py", *args.pytest_args]
        print("$", " ".join(command), f"({FAULT_N_ENV}={args.n})", flush=True)
        code = subprocess.call(command, cwd=ROOT, env=env)
        rows = read_rows(rows_file)
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
