"""harness.faults.report: a scenario's row reaches the fault report only when the
scenario records it, after its last assertion (no broker needed)."""

import json

from harness.faults.report import REPORT_ENV, read_rows, report
from harness.faults.tally import Tally


def test_report_counts_but_writes_nothing_until_recorded(tmp_path, monkeypatch) -> None:
    rows = tmp_path / "rows.jsonl"
    monkeypatch.setenv(REPORT_ENV, str(rows))
    delivered, dead = Tally(), Tally()
    for offset, seq in enumerate((0, 1, 1)):  # 1 twice: a duplicate
        delivered.add(json.dumps({"seq": seq}).encode(), offset)
    dead.add(json.dumps({"seq": 3}).encode(), 0)
    result = report("scenario", range(4), delivered, dead, "a note")
    assert result.lost == 1  # 2 is neither delivered nor dead-lettered
    assert result.row["duplicates"] == "1"
    assert not rows.exists()  # a scenario failing after this line leaves no row
    result.record()
    [row] = read_rows(rows)
    assert row["scenario"] == "scenario" and row["lost"] == "1" and row["note"] == "a note"
