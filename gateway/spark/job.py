"""The Spark job: source -> compiled conversion -> CloudEvents, dead letters, report.

    from gateway.spark import JobOptions, run_job
    result = run_job(spark, definitions, JobOptions(source="file:/in", sink="file:/out"))

Batch mode processes what the source holds and returns counts. Streaming mode runs a
`foreachBatch` query: every micro-batch is converted once (persisted) and written to
each sink; file sinks write `batch=<id>` directories with overwrite, so a batch replayed
after a restart from the checkpoint replaces its own output: exactly once in the files.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from gateway.definitions.model import MessageDefinition
from gateway.spark import files, kafka
from gateway.spark.compiler import CompiledCatalog, compile_catalog
from gateway.spark.locations import Location, parse_location
from gateway.spark.outcome import OUTCOME_COLUMNS
from gateway.spark.pipeline import Stage, compile_stage
from gateway.spark.report import conformance


@dataclass
class JobOptions:
    source: str
    sink: str
    deadletter: str | None = None
    report: str | None = None
    checkpoint: str | None = None
    stream: bool = False
    format: files.Format = "json"
    kafka_mode: Literal["structured", "binary"] = "structured"
    kafka_records: Literal["native", "json"] = "native"
    # The key of Kafka sink records without a partitionkey (`gateway.envelope.partitioning`).
    partition_key: str = "source"
    ambiguity: str = "first"
    validate_schema: bool = False
    schema: str | None = None  # the route's policy; None: validate_schema decides
    explain_dead_letters: bool = True
    report_window: str = "1 minute"
    trigger: Literal["continuous", "available-now"] = "continuous"
    trigger_interval: str = "1 second"


@dataclass
class JobResult:
    catalog: CompiledCatalog
    counts: dict[str, int] = field(default_factory=dict)  # batch: outcome -> records
    query: StreamingQuery | None = None  # stream: the running query

    def explain(self) -> list[str]:
        return self.catalog.explain()


def read_source(spark: SparkSession, where: Location, options: JobOptions) -> DataFrame:
    if where.kind == "file":
        return files.read_records(spark, where.path, options.format, options.stream)
    return kafka.read_records(spark, where, stream=options.stream,
                              records=options.kafka_records)


def write_outcomes(outcomes: DataFrame, options: JobOptions, batch_id: int | None) -> None:
    """Every sink of one batch of outcomes (persisted by the caller)."""

    def target(where: Location) -> tuple[str, str]:
        if batch_id is None:
            return where.path, "overwrite"
        return f"{where.path}/batch={batch_id:09d}", "overwrite"

    sink = parse_location(options.sink)
    events = outcomes.filter(F.col("outcome") == "event")
    if sink.kind == "file":
        files.write_events(events, *_with_format(target(sink), options))
    else:
        kafka.write_events(events, sink, options.kafka_mode, options.partition_key)
    if options.deadletter:
        where = parse_location(options.deadletter)
        dead = outcomes.filter(F.col("outcome") != "event")
        if where.kind == "file":
            files.write_deadletters(dead, *_with_format(target(where), options))
        else:
            kafka.write_deadletters(dead, where)
    if options.report:
        where = parse_location(options.report)
        if where.kind != "file":
            raise ValueError("--report takes file:DIR")
        files.write_report(conformance(outcomes, options.report_window),
                           *_with_format(target(where), options))


def _with_format(target: tuple[str, str], options: JobOptions) -> tuple[
        str, files.Format, str]:
    return target[0], options.format, target[1]


def sink_columns(options: JobOptions) -> list[str]:
    """The outcome columns the configured sinks read (`outcome` always: the counts).

    Only these are converted and kept: a JSON Lines job never builds the `ce` struct or
    the context map, and the persisted rows hold two text columns, not the whole
    outcome (the cache is written and read once per sink)."""
    wanted = {"outcome"}
    sink = parse_location(options.sink)
    if sink.kind != "file":
        wanted |= {"ce", "event", "record", "context"}  # `kafka.write_events`
    else:
        wanted.add("event" if options.format == "json" else "ce")
    if options.deadletter:
        where = parse_location(options.deadletter)
        if where.kind != "file":
            wanted |= {"record", "deadletter"}
        elif options.format == "json":
            wanted.add("deadletter")
        else:
            wanted |= {"match", "record", "deadletter"}
    if options.report:
        wanted |= {"record", "nearest"}  # `report.conformance`
    return [name for name in OUTCOME_COLUMNS if name in wanted]


def _convert_batch(stage: Stage, lines: DataFrame, options: JobOptions,
                   batch_id: int | None) -> dict[str, int]:
    """Convert one batch once and write it to every sink.

    Persisted: the counts and every sink read the same converted rows (the generated ids
    of records without a native identity are random, so they must not be redone). The
    compiled path runs first and keeps the record only of the rows it leaves to the
    Python stage, which then converts just those, from the cache: a batch that needs
    no Python starts no Python worker."""
    with _operator_codegen(stage.spark):
        return _convert_persisted(stage, lines, options, batch_id)


# The compiled path fuses into one stage whose generated method is far over the size the
# JIT compiles (`pipeline._METHOD_LIMIT`), so Spark compiles that stage's source, finds
# it too big and runs it operator by operator anyway: the whole-stage compile (1 to 2 s
# of Janino per job, `bench.bench_spark_job`) is thrown away. The job's own queries go
# straight to per-operator code; the session's setting is restored afterwards.
_WHOLE_STAGE = "spark.sql.codegen.wholeStage"


@contextmanager
def _operator_codegen(spark: SparkSession) -> Iterator[None]:
    previous = spark.conf.get(_WHOLE_STAGE, None)
    spark.conf.set(_WHOLE_STAGE, "false")
    try:
        yield
    finally:
        if previous is None:
            spark.conf.unset(_WHOLE_STAGE)
        else:
            spark.conf.set(_WHOLE_STAGE, previous)


def _convert_persisted(stage: Stage, lines: DataFrame, options: JobOptions,
                       batch_id: int | None) -> dict[str, int]:
    columns = sink_columns(options)
    py = F.col("_py")
    compiled = stage.compiled(lines).select(
        *columns, py, F.when(py, F.col("record")).alias("_record")).persist()
    python: DataFrame | None = None
    try:
        counts: dict[str, int] = {}
        pending = 0
        for row in compiled.groupBy("_py", "outcome").count().collect():
            if row["_py"]:
                pending += int(row["count"])
            else:
                counts[row["outcome"]] = int(row["count"])
        outcomes = compiled.filter(~py).select(*columns)
        if pending:
            python = stage.python_outcomes(
                compiled.filter(py).select(F.col("_record").alias("record"))
            ).select(*columns).persist()
            for row in python.groupBy("outcome").count().collect():
                counts[row["outcome"]] = counts.get(row["outcome"], 0) + int(row["count"])
            outcomes = outcomes.unionByName(python)
        write_outcomes(outcomes, options, batch_id)
    finally:
        compiled.unpersist()
        if python is not None:
            python.unpersist()
    return counts


def run_job(
    spark: SparkSession, definitions: Iterable[MessageDefinition], options: JobOptions
) -> JobResult:
    catalog = compile_catalog(definitions, ambiguity=options.ambiguity,
                              validate_schema=options.validate_schema,
                              schema=options.schema)
    for text in (options.sink, options.deadletter, options.report):
        if text is not None:
            parse_location(text)  # fail before the job starts, not in the first batch
    stage = compile_stage(spark, catalog, explain_dead_letters=options.explain_dead_letters)
    source = read_source(spark, parse_location(options.source), options)
    if not options.stream:
        return JobResult(catalog, _convert_batch(stage, source, options, None))
    if not options.checkpoint:
        raise ValueError("--stream needs --checkpoint DIR (offsets survive restarts there)")

    def each_batch(batch: DataFrame, batch_id: int) -> None:
        _convert_batch(stage, batch, options, batch_id)

    writer = source.writeStream.foreachBatch(each_batch).option(
        "checkpointLocation", options.checkpoint)
    if options.trigger == "available-now":
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=options.trigger_interval)
    return JobResult(catalog, query=writer.start())
