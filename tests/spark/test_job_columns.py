"""What the job keeps per record: only the outcome columns its sinks read, SQL and a
parsed struct only for the protocols its compiled definitions can match, and the parsed
record only up to the projection that reads it."""

from __future__ import annotations

import re

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from bench.bench_spark import definitions
from gateway.protocols import RECORD_FIELDS
from gateway.spark.compiler import compile_catalog
from gateway.spark.job import JobOptions, sink_columns
from gateway.spark.pipeline import compile_stage
from gateway.spark.records import PARSE_TYPE, col, parse_type, parsing


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


def test_the_parse_type_has_the_compiled_protocols_fields_only() -> None:
    catalog = compile_catalog(definitions(3))  # MQTT/5.0 definitions
    names = {f.name for f in parse_type(catalog.sql_protocols).fields}
    mqtt = {*RECORD_FIELDS["MQTT/5.0"], *RECORD_FIELDS["MQTT/3.1.1"]}
    assert names == mqtt | {"protocol", "data", "data_base64", "received_at"}
    assert {f.name for f in parse_type().fields} == {f.name for f in PARSE_TYPE.fields}


def test_a_field_outside_the_parse_type_reads_as_null(spark: SparkSession) -> None:
    # Kafka's `headers` is not parsed for an MQTT catalog: reading it is a null, never an
    # analysis error (the screen already sends such a record to the Python stage).
    frame = spark.createDataFrame([('{"protocol": "MQTT/5.0", "headers": []}',)], "line string")
    with parsing({"MQTT/5.0"}) as parsed_as:
        record = F.from_json("line", parsed_as)
        row = frame.select(col(record, "headers").alias("h"),
                           col(record, "protocol").alias("p")).first()
    assert row is not None and row["h"] is None and row["p"] == "MQTT/5.0"


def test_only_the_read_projection_copies_the_parsed_record(spark: SparkSession) -> None:
    # One projection reads what every later phase needs from the parsed struct and drops
    # it: no projection of the match or the render copies it per row.
    stage = compile_stage(spark, compile_catalog(definitions(20)))
    lines = spark.createDataFrame([("{}",)], "record string")
    plan = str(stage.compiled(lines)._jdf.queryExecution().optimizedPlan().toString())
    projections = [line for line in plan.splitlines() if "Project [" in line]
    reading = [line for line in projections if re.search(r"(?<![\w.])r#\d+", line)]
    assert len(reading) == 2, reading  # the parse defines it, the read projection reads it
    assert len(projections) <= 9
