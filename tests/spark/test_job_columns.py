"""What the job keeps per record: only the outcome columns its sinks read, and SQL only
for the protocols its compiled definitions can match."""

from __future__ import annotations

from bench.bench_spark import definitions
from gateway.spark.compiler import compile_catalog
from gateway.spark.job import JobOptions, sink_columns


def test_a_json_lines_job_keeps_the_event_text_and_the_dead_letter_only() -> None:
    options = JobOptions(source="file:/in", sink="file:/out", deadletter="file:/dead")
    assert sink_columns(options) == ["outcome", "event", "deadletter"]
    assert sink_columns(JobOptions(source="file:/in", sink="file:/out")) == [
        "outcome", "event"]


def test_parquet_kafka_and_report_sinks_keep_what_they_write() -> None:
    parquet = JobOptions(source="file:/in", sink="file:/out", deadletter="file:/dead",
                         format="parquet")
    assert sink_columns(parquet) == ["record", "outcome", "match", "ce", "deadletter"]
    kafka = JobOptions(source="file:/in", sink="kafka://k:9092/events",
                       deadletter="kafka://k:9092/dead", report="file:/report")
    assert sink_columns(kafka) == ["record", "outcome", "context", "ce", "event",
                                   "deadletter", "nearest"]


def test_sql_reads_only_the_protocols_of_compiled_definitions() -> None:
    catalog = compile_catalog(definitions(3))  # MQTT/5.0 definitions
    assert catalog.sql_families == {"MQTT"}
    assert catalog.sql_protocols == {"MQTT/5.0", "MQTT/3.1.1"}
