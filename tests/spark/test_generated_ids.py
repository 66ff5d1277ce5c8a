"""`sqlfuncs.random_id`: the id of an event whose record has no identity of its own."""

from __future__ import annotations

import uuid

from pyspark.sql import SparkSession

from gateway.spark.sqlfuncs import random_id


def _ids(spark: SparkSession, rows: int) -> tuple[list[str], str]:
    frame = spark.range(rows, numPartitions=1).select(random_id("salt").alias("id"))
    plan = frame._jdf.queryExecution().optimizedPlan().toString()
    return [row["id"] for row in frame.collect()], plan


def test_each_row_has_its_own_number_after_a_part_fixed_per_execution(
        spark: SparkSession) -> None:
    ids, plan = _ids(spark, 6)
    assert {uuid.UUID(i).version for i in ids} == {4}
    assert {uuid.UUID(i).variant for i in ids} == {uuid.RFC_4122}
    # the execution's part (up to the variant digit) is one constant the optimizer folded:
    # no hash per row
    assert len({i[:20] for i in ids}) == 1 and "md5" not in plan
    # the row's number: an id per number, none skipped
    assert [int(i[20:].replace("-", ""), 16) for i in ids] == list(range(6))
    again, _ = _ids(spark, 6)
    assert {i[:20] for i in again}.isdisjoint({i[:20] for i in ids})
