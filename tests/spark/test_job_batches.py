"""How a batch job runs one batch: interpreted when small, one pass when nothing needs
Python, the Python stage's events appended and its dead letters written otherwise."""

from __future__ import annotations

import json
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import types as T

from bench.bench_spark import definitions
from bench.bench_spark_job import record_line
from gateway.spark.files import read_records
from gateway.spark.job import (
    _FACTORY_MODE,
    _WHOLE_STAGE,
    PYTHON_BATCH_BYTES,
    SMALL_BATCH_BYTES,
    JobOptions,
    _job_codegen,
    choose_engine,
    input_bytes,
    run_job,
)
from gateway.spark.records import PARSE_SCHEMA, PARSE_TYPE


def _lines(path: Path) -> list[str]:
    return [line for part in sorted(path.glob("part-*")) for line in
            part.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_a_small_file_batch_runs_interpreted_and_the_settings_come_back(
        spark: SparkSession, tmp_path: Path) -> None:
    saved = spark.conf.get(_FACTORY_MODE, None)
    spark.conf.unset(_FACTORY_MODE)
    try:
        default = spark.conf.get(_FACTORY_MODE)
        (tmp_path / "in").mkdir()
        (tmp_path / "in" / "a.jsonl").write_text(record_line(1, 3) + "\n", encoding="utf-8")
        small = read_records(spark, str(tmp_path / "in"), "json", stream=False)
        size = input_bytes(small)
        assert size is not None and size <= SMALL_BATCH_BYTES
        with _job_codegen(spark, small):
            assert spark.conf.get(_FACTORY_MODE) == "NO_CODEGEN"
            assert spark.conf.get(_WHOLE_STAGE) == "false"
        assert spark.conf.get(_FACTORY_MODE) == default
        big = spark.range(10**9).selectExpr("cast(id as string) as record")
        assert (input_bytes(big) or 0) > SMALL_BATCH_BYTES
        with _job_codegen(spark, big):
            assert spark.conf.get(_FACTORY_MODE) == default  # compiled
    finally:
        if saved is not None:
            spark.conf.set(_FACTORY_MODE, saved)


def test_python_events_join_the_compiled_ones_and_a_clean_batch_clears_dead_letters(
        spark: SparkSession, tmp_path: Path) -> None:
    source = tmp_path / "in"
    source.mkdir()
    compiled = record_line(1, 3)
    # A JSON string body: the compiled path cannot splice it, the core renders it.
    python = record_line(2, 3).split(',"data":')[0] + ',"data":"hello"}'
    unmatched = record_line(4, 3).replace("line001", "nowhere")
    (source / "a.jsonl").write_text("\n".join([compiled, python, unmatched]) + "\n",
                                    encoding="utf-8")
    options = JobOptions(source=f"file:{source}", sink=f"file:{tmp_path / 'out'}",
                         deadletter=f"file:{tmp_path / 'dead'}", engine="compiled")
    result = run_job(spark, definitions(3), options)
    assert result.counts == {"event": 2, "unmatched": 1}
    events = [json.loads(line) for line in _lines(tmp_path / "out")]
    assert sorted(e["subject"] for e in events) == ["d1", "d2"]
    assert [e["data"] for e in events if e["subject"] == "d2"] == ["hello"]
    assert [json.loads(line)["reason"] for line in _lines(tmp_path / "dead")] == ["unmatched"]

    (source / "a.jsonl").write_text(compiled + "\n", encoding="utf-8")
    result = run_job(spark, definitions(3), options)
    assert result.counts == {"event": 1}
    assert len(_lines(tmp_path / "out")) == 1
    assert (tmp_path / "dead").is_dir() and _lines(tmp_path / "dead") == []


def test_the_parse_type_is_the_parse_schema(spark: SparkSession) -> None:
    # The pipeline parses with the type (no SQL parser in a fresh JVM), the docs and
    # benches name the DDL text: they must be one schema.
    assert T.StructType.fromDDL(PARSE_SCHEMA) == PARSE_TYPE


def test_auto_runs_a_batch_of_known_small_size_in_python_and_the_rest_compiled(
        spark: SparkSession, tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.jsonl").write_text(record_line(1, 3) + "\n", encoding="utf-8")
    small = read_records(spark, str(tmp_path / "in"), "json", stream=False)
    big = spark.range(10**9).selectExpr("cast(id as string) as record")
    assert (input_bytes(big) or 0) > PYTHON_BATCH_BYTES
    batch = JobOptions(source="file:/in", sink="file:/out")
    assert batch.engine == "auto"
    assert choose_engine(batch, small) == "python"
    assert choose_engine(batch, big) == "compiled"
    stream = JobOptions(source="file:/in", sink="file:/out", stream=True)
    assert choose_engine(stream, small) == "compiled"  # a long-lived JVM
    for asked in ("compiled", "python"):
        for frame in (small, big):
            assert choose_engine(JobOptions(source="file:/in", sink="file:/out",
                                            engine=asked), frame) == asked
    result = run_job(spark, definitions(3), JobOptions(
        source=f"file:{tmp_path / 'in'}", sink=f"file:{tmp_path / 'out'}"))
    assert result.engine == "python" and result.counts == {"event": 1}
