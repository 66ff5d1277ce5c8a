"""The Spark job against fixed expectations, not only against the core.

test_parity.py compares the Spark rows with the core's results for the same records, so a
bug both share passes it. Here the expected values come from outside the code: every case
of the example case files (config/examples/*.tests.yaml: match, context, CloudEvent
attributes or dead-letter reason, written by hand), and the literal CloudEvent ids of each
protocol's native identity (tests/unit/core/test_pinned_ids.py, worked out with
`uuid.uuid5`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from pyspark.sql import SparkSession

from gateway.definitions import load_catalog
from gateway.spark import compile_catalog, compile_stage
from tests.unit.core.test_pinned_ids import PINNED

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "config" / "examples"
CASE_FILES = sorted(EXAMPLES.glob("*.tests.yaml"))


def _rows(spark: SparkSession, documents: list[Path], records: list[dict[str, Any]]
          ) -> list[Any]:
    catalog = load_catalog(documents)
    assert not catalog.errors, catalog.errors
    stage = compile_stage(spark, compile_catalog(list(catalog.messages())))
    frame = spark.createDataFrame([(json.dumps(r),) for r in records], "record string")
    rows = stage.convert(frame).collect()
    assert len(rows) == len(records)
    by_record = {row["record"]: row for row in rows}
    return [by_record[json.dumps(r)] for r in records]


def _meets(row: Any, expect: dict[str, Any]) -> None:
    """The row meets a case's `expect` (only the keys the case names)."""
    if "match" in expect:
        assert row["match"] == expect["match"]
    if expect.get("match") is None and "reason" in expect:
        assert row["outcome"] == expect["reason"]
        return
    assert row["outcome"] == "event", row["deadletter"]
    if "context" in expect:
        assert dict(row["context"] or {}) == expect["context"]
    event = json.loads(row["event"])
    for name, value in (expect.get("cloudevent") or {}).items():
        assert event.get(name) == value, (name, event)


@pytest.mark.parametrize("case_file", CASE_FILES, ids=lambda p: p.name)
def test_spark_meets_the_example_cases(spark: SparkSession, case_file: Path) -> None:
    spec = yaml.safe_load(case_file.read_text())
    documents = [case_file.parent / d for d in spec["definitions"]]
    cases = spec["cases"]
    rows = _rows(spark, documents, [case["input"] for case in cases])
    assert cases
    for case, row in zip(cases, rows, strict=True):
        try:
            _meets(row, case["expect"])
        except AssertionError as exc:
            raise AssertionError(f"{case_file.name}: {case['name']}: {exc}") from exc


def test_spark_gives_the_pinned_id_of_each_native_identity(spark: SparkSession) -> None:
    for record, catalog, identity, expected in PINNED:
        [row] = _rows(spark, [EXAMPLES / f"{catalog}.xreg.json"], [record])
        assert row["outcome"] == "event", (identity, row["deadletter"])
        assert json.loads(row["event"])["id"] == expected, identity
