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
from dataclasses import dataclass, field, replace
from typing import Literal

from pyspark.sql import DataFrame, Observation, SparkSession
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
    # compiled: the SQL path, the Python stage for the rows it flags; python: the Python
    # stage for every row; auto: python for a batch job of a known size up to
    # `PYTHON_BATCH_BYTES`, else compiled (docs/spark.md, "Engines").
    engine: Literal["auto", "compiled", "python"] = "auto"


@dataclass
class JobResult:
    catalog: CompiledCatalog
    counts: dict[str, int] = field(default_factory=dict)  # batch: outcome -> records
    query: StreamingQuery | None = None  # stream: the running query
    engine: Literal["compiled", "python"] = "compiled"  # the one that ran

    def explain(self) -> list[str]:
        if self.engine == "python":
            return [f"{len(self.catalog.plans)} definition(s), every record through the "
                    "Python stage (--engine python)"]
        return self.catalog.explain()


def read_source(spark: SparkSession, where: Location, options: JobOptions) -> DataFrame:
    if where.kind == "file":
        return files.read_records(spark, where.path, options.format, options.stream)
    return kafka.read_records(spark, where, stream=options.stream,
                              records=options.kafka_records)


def _target(where: Location, batch_id: int | None) -> str:
    return where.path if batch_id is None else f"{where.path}/batch={batch_id:09d}"


def write_events(events: DataFrame, options: JobOptions, batch_id: int | None,
                 mode: str = "overwrite") -> None:
    """The CloudEvents sink (`events`: outcome rows that are events). A file sink is
    overwritten, or appended to with `mode="append"` (the Python stage's events after
    the compiled path's, in the same batch)."""
    sink = parse_location(options.sink)
    if sink.kind == "file":
        files.write_events(events, _target(sink, batch_id), options.format, mode)
    else:
        kafka.write_events(events, sink, options.kafka_mode, options.partition_key)


def write_deadletters(dead: DataFrame, options: JobOptions, batch_id: int | None) -> None:
    if not options.deadletter:
        return
    where = parse_location(options.deadletter)
    if where.kind == "file":
        files.write_deadletters(dead, _target(where, batch_id), options.format, "overwrite")
    else:
        kafka.write_deadletters(dead, where)


def write_report(outcomes: DataFrame, options: JobOptions, batch_id: int | None) -> None:
    if not options.report:
        return
    where = parse_location(options.report)
    if where.kind != "file":
        raise ValueError("--report takes file:DIR")
    files.write_report(conformance(outcomes, options.report_window),
                       _target(where, batch_id), options.format, "overwrite")


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

    Persisted: every sink reads the same converted rows (the generated ids of records
    without a native identity are random, so they must not be redone). The compiled
    path runs first and keeps the record only of the rows it leaves to the Python
    stage, which then converts just those, from the cache: a batch that needs no Python
    starts no Python worker."""
    if options.engine == "python":
        return _convert_in_python(stage, lines, options, batch_id)
    with _job_codegen(stage.spark, lines):
        return _convert_persisted(stage, lines, options, batch_id)


def _convert_in_python(stage: Stage, lines: DataFrame, options: JobOptions,
                       batch_id: int | None) -> dict[str, int]:
    """Every record through the Python stage (the core converter over Arrow batches).

    File sinks: the events are written in the first pass, which also counts the outcomes
    (an `Observation`). Only when some record did not become an event is the batch
    converted again, for its dead letters, which are kept while they are counted and
    written (one more conversion, not two). A dead letter carries no generated id, so
    the second conversion gives the same letters, and each event (whose id may be
    random) comes from the one pass that wrote it. A report or a Kafka sink reads the
    outcomes of one conversion, persisted."""
    columns = sink_columns(options)
    outcomes = stage.python_outcomes(lines, columns).select(*columns)
    is_event = F.col("outcome") == "event"
    cached = bool(options.report) or parse_location(options.sink).kind != "file"
    if cached:
        outcomes = outcomes.persist()
    try:
        counters = (F.count_if(is_event).alias("event"), F.count_if(~is_event).alias("other"))
        if cached:
            write_events(outcomes.filter(is_event), options, batch_id)
            totals = outcomes.agg(*counters).first()
            seen = {"event": 0, "other": 0} if totals is None else totals.asDict()
        else:
            observed = Observation()
            write_events(outcomes.observe(observed, *counters).filter(is_event), options,
                         batch_id)
            seen = observed.get
        counts: dict[str, int] = {"event": int(seen["event"])} if seen["event"] else {}
        dead = outcomes.filter(~is_event)
        if seen["other"]:
            dead = dead.persist()  # counted, then written: converted once more, not twice
            for row in dead.groupBy("outcome").count().collect():
                counts[row["outcome"]] = int(row["count"])
        else:
            dead = dead.filter(F.lit(False))  # empty: no second pass
        try:
            write_deadletters(dead, options, batch_id)
        finally:
            dead.unpersist()
        if options.report:
            write_report(outcomes, options, batch_id)
    finally:
        if cached:
            outcomes.unpersist()
    return counts


# The compiled path fuses into one stage whose generated method is far over the size the
# JIT compiles (`pipeline._METHOD_LIMIT`), so Spark compiles that stage's source, finds
# it too big and runs it operator by operator anyway: the whole-stage compile (1 to 2 s
# of Janino per job, `bench.bench_spark_job`) is thrown away. The job's own queries go
# straight to per-operator code; the session's settings are restored afterwards.
_WHOLE_STAGE = "spark.sql.codegen.wholeStage"
# A small batch is not worth compiling: Janino spends 3 to 4 s of CPU on the dozen
# per-operator projections of the compiled path before the first row moves (a one-record
# job, `bench.bench_spark_job`), more than interpreting a megabyte of records costs. So a
# batch whose input Spark knows to be small (file sources: the files' size; a Kafka
# batch's size is unknown, so it is compiled) runs Spark's interpreted expressions, the
# fallback its code generators already have (`spark.sql.codegen.factoryMode`).
_FACTORY_MODE = "spark.sql.codegen.factoryMode"
SMALL_BATCH_BYTES = 1 << 20


def input_bytes(lines: DataFrame) -> int | None:
    """The size Spark's optimizer estimates for `lines` (None: unknown)."""
    try:
        size = int(str(lines._jdf.queryExecution().optimizedPlan().stats().sizeInBytes()))
    except Exception:  # an estimate only: without one the batch is compiled
        return None
    return size if 0 <= size < (1 << 62) else None


@contextmanager
def _job_codegen(spark: SparkSession, lines: DataFrame) -> Iterator[None]:
    settings = {_WHOLE_STAGE: "false"}
    size = input_bytes(lines)
    if size is not None and size <= SMALL_BATCH_BYTES:
        settings[_FACTORY_MODE] = "NO_CODEGEN"
    previous: dict[str, str | None] = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, old in previous.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)


def _convert_persisted(stage: Stage, lines: DataFrame, options: JobOptions,
                       batch_id: int | None) -> dict[str, int]:
    """The compiled path's events are written straight from the first pass over the
    input, which also counts the rows flagged for Python (an `Observation`, no separate
    counting job); only when some are flagged does the Python stage run over those rows
    and append its events. The compiled path settles only events (every dead letter is
    the Python stage's), so the dead-letter sink reads the Python stage's rows alone
    (none: an empty write that clears the sink).

    The compiled rows are cached only where a second pass could not replay them: a
    batch read of Kafka (offsets resolved per read), a Kafka sink (counted from the
    cache) or a report (it reads every row again). Otherwise the Python stage's input is
    the flagged rows of a second pass, in which Spark prunes everything but the flag
    (no ids, no event text): the cache cost every batch 7 to 10 s per 100,000 records
    on this 2-core machine, the second pass costs a fraction of the first, and only
    when some row needs Python. The flag is a function of the record alone, so both
    passes flag the same rows, and each event is written once."""
    columns = sink_columns(options)
    py = F.col("_py")
    compiled = stage.compiled(lines).select(
        *columns, py, F.when(py, F.col("record")).alias("_record"))
    file_sink = parse_location(options.sink).kind == "file"
    replayable = options.stream or parse_location(options.source).kind == "file"
    if not (replayable and file_sink) or options.report:
        compiled = compiled.persist()
    python: DataFrame | None = None
    try:
        counters = (F.count_if(~py).alias("sql"), F.count_if(py).alias("python"))
        if file_sink:
            observed = Observation()
            write_events(compiled.observe(observed, *counters).filter(~py).select(*columns),
                         options, batch_id)
            seen = observed.get
        else:
            # A Kafka sink may write with `foreachPartition` (an RDD action: no query
            # execution reports observed metrics), so the cache is counted instead.
            write_events(compiled.filter(~py).select(*columns), options, batch_id)
            totals = compiled.agg(*counters).first()
            seen = {"sql": 0, "python": 0} if totals is None else totals.asDict()
        counts: dict[str, int] = {"event": int(seen["sql"])} if seen["sql"] else {}
        if seen["python"]:
            python = stage.python_outcomes(
                compiled.filter(py).select(F.col("_record").alias("record")), columns
            ).select(*columns).persist()
            for row in python.groupBy("outcome").count().collect():
                counts[row["outcome"]] = counts.get(row["outcome"], 0) + int(row["count"])
            if counts.get("event", 0) > seen["sql"]:
                write_events(python.filter(F.col("outcome") == "event"), options, batch_id,
                             "append")
            dead = python.filter(F.col("outcome") != "event")
        else:
            dead = compiled.filter(F.lit(False)).select(*columns)  # empty: no scan
        write_deadletters(dead, options, batch_id)
        if options.report:
            outcomes = compiled.filter(~py).select(*columns)
            write_report(outcomes if python is None else outcomes.unionByName(python),
                         options, batch_id)
    finally:
        compiled.unpersist()
        if python is not None:
            python.unpersist()
    return counts


# `--engine auto` runs a batch job whose input Spark knows to be at most this big in
# Python. Below it a fresh JVM's compiled plan is still running interpreted or
# C1-compiled code, and building it costs seconds of the driver; above it the compiled
# plan's warm speed wins (measured crossover, about 500 MB of records since the Python
# stage's per-record costs fell on 2026-11-30: docs/spark.md, "Engines").
PYTHON_BATCH_BYTES = 384 << 20


def choose_engine(options: JobOptions, source: DataFrame) -> Literal["compiled", "python"]:
    """The engine a job runs: the one asked for, or for `auto` the python engine for a
    batch job reading at most `PYTHON_BATCH_BYTES` (file sources; a Kafka batch's size
    is unknown) and the compiled one for everything else (streams run long)."""
    if options.engine != "auto":
        return options.engine
    if options.stream:
        return "compiled"
    size = input_bytes(source)
    return "python" if size is not None and size <= PYTHON_BATCH_BYTES else "compiled"


def run_job(
    spark: SparkSession, definitions: Iterable[MessageDefinition], options: JobOptions
) -> JobResult:
    catalog = compile_catalog(definitions, ambiguity=options.ambiguity,
                              validate_schema=options.validate_schema,
                              schema=options.schema)
    for text in (options.sink, options.deadletter, options.report):
        if text is not None:
            parse_location(text)  # fail before the job starts, not in the first batch
    source = read_source(spark, parse_location(options.source), options)
    engine = choose_engine(options, source)
    options = replace(options, engine=engine)
    stage = compile_stage(spark, catalog, explain_dead_letters=options.explain_dead_letters,
                          tables=engine == "compiled")
    if not options.stream:
        return JobResult(catalog, _convert_batch(stage, source, options, None), engine=engine)
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
    return JobResult(catalog, query=writer.start(), engine=engine)
