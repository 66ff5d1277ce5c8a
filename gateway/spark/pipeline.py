"""Records in, outcomes out: the compiled SQL path plus the Python stage, in one pass.

    stage = compile_stage(spark, catalog)    # once per job: broadcast tables, Python fn
    outcomes = stage.convert(lines)          # parse, screen, match, render: all SQL

Rows the compiled path cannot settle exactly are flagged (`_py`) and their record goes
to a vectorized Python UDF in the same projection; every other row hands it a null. So
the records are read and matched once, with no cache and no second scan.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.functions import arrow_udf
from pyspark.sql.pandas.types import to_arrow_type

from gateway.spark.compiler import CompiledCatalog
from gateway.spark.fallback import python_stage
from gateway.spark.matching import candidate_tables, match, read_columns
from gateway.spark.outcome import OUTCOME_COLUMNS, outcome_type
from gateway.spark.records import RECORD, address, family, parsing, profiles, sql_ok
from gateway.spark.render import record_columns, render


@dataclass
class Stage:
    spark: SparkSession
    catalog: CompiledCatalog
    tables: dict[tuple[Any, ...], DataFrame]
    explain_dead_letters: bool = True
    # Random per stage: part of every generated event id (`sqlfuncs.random_id`).
    salt: str = field(default_factory=lambda: uuid.uuid4().hex)

    def sql(self, lines: DataFrame) -> DataFrame:
        """`lines` has a string column `record`; adds the compiled path's columns.

        The record is parsed with the fields of the compiled protocols only
        (`records.parse_type`), and one projection reads from it everything the later
        phases need (the screen's verdict, the address, the field readers, the render
        stage's inputs): the parsed struct goes no further, so the projections of the
        match and the render copy narrow rows."""
        _tune_codegen(self.spark)
        catalog = self.catalog
        protocols = catalog.sql_protocols
        with parsing(protocols) as parse_type:
            parsed = lines.select("record", F.from_json("record", parse_type).alias(RECORD),
                                  F.json_object_keys("record").alias("_keys"),
                                  self._trace_gate().alias("_lc"))
            r = F.col(RECORD)
            fam = family(r["protocol"])
            addr = address(r, fam, catalog.sql_families)
            read = parsed.select(
                "record",
                sql_ok(F.col("record"), r, F.col("_keys"), protocols).alias("_sql"),
                fam.alias("_fam"), addr.alias("_addr"), F.split(addr, "/", -1).alias("_segs"),
                *[c.alias(n) for n, c in read_columns(r, catalog.readers).items()],
                *[c.alias(n) for n, c in record_columns(r, F.col("_lc"), protocols).items()])
        rendered = render(match(read, catalog, self.tables), catalog, self.salt)
        route = ~F.col("_sql") | F.col("_route_py") | F.coalesce(F.col("_render_py"), F.lit(True))
        return rendered.select(*[c for c in rendered.columns
                                 if c not in ("_sql", "_route_py", "_render_py")],
                               route.alias("_py"))

    def _trace_gate(self) -> Column:
        """The line the render stage searches for `traceparent` / `tracestate` before it
        reads them: lowered when a protocol reads them case-insensitively (Kafka, NATS,
        HTTP headers), else as it is (MQTT user properties and AMQP application
        properties are read by their exact name): one copy of the line fewer per row."""
        if any(prof.metadata is not None and prof.metadata.ignore_case
               for prof in profiles(self.catalog.sql_protocols)):
            return F.lower("record")
        return F.col("record")

    def python(self, record: Column | None = None,
               columns: Sequence[str] | None = None) -> Column:
        """The Python stage as a column function of the record (null: nothing to do);
        by default the record of the rows `sql` flags (`_py`). `columns`: the outcome
        columns to make (default: all but the record); a job makes only those its sinks
        read, and the stage builds nothing else (no `ce` struct for a JSON Lines sink)."""
        schema = outcome_type(self.catalog)
        wanted = [f for f in schema.fields if f.name != "record"
                  and (columns is None or f.name in columns)]
        result = type(schema)(wanted)
        fn = python_stage(
            self.catalog.definitions, uuid.uuid4().hex, ambiguity=self.catalog.ambiguity,
            validate_schema=self.catalog.validate_schema, explain=self.explain_dead_letters,
            schema=self.catalog.schema,
            result=to_arrow_type(result),
        )
        # The stubs' overloads do not cover a struct return type (the runtime does).
        udf: Any = arrow_udf(fn, result)  # type: ignore[call-overload]
        if record is None:
            record = F.when(F.col("_py"), F.col("record"))
        column: Column = udf(record)
        return column

    def convert(self, lines: DataFrame) -> DataFrame:
        """One outcome row per record (`gateway.spark.outcome`)."""
        staged = self.sql(lines).withColumn("_out", self.python())
        py, out = F.col("_py"), F.col("_out")
        return staged.select("record", *[
            F.when(py, out[name]).otherwise(column).alias(name)
            for name, column in _sql_outcome().items()])

    def compiled(self, lines: DataFrame) -> DataFrame:
        """The compiled path alone: one outcome row per record plus `_py`, true where the
        Python stage must settle the row (its other outcome columns mean nothing then;
        `python_outcomes` converts those records).

        A batch job uses this pair instead of `convert`: the Python stage reads only the
        flagged records (`job._convert_persisted`), and a batch without any starts no
        Python worker at all (their start-up is seconds of a job's fixed cost) and has
        no Arrow round trip of nulls in its plan."""
        staged = self.sql(lines)
        return staged.select("record", *[column.alias(name)
                                         for name, column in _sql_outcome().items()],
                             F.coalesce(F.col("_py"), F.lit(True)).alias("_py"))

    def python_outcomes(self, records: DataFrame,
                        columns: Sequence[str] | None = None) -> DataFrame:
        """The Python stage alone: one outcome row per row of `records` (a `record`
        column), every one converted by the core; `columns`: only these outcome columns
        (with the record), in the outcome's order."""
        names = [name for name in OUTCOME_COLUMNS[1:] if columns is None or name in columns]
        out = F.col("_out")
        return records.select("record", self.python(F.col("record"), names).alias("_out")
                              ).select("record", *[out[name].alias(name) for name in names])


def _sql_outcome() -> dict[str, Column]:
    """The outcome columns of a row the compiled path settles (from `Stage.sql`)."""
    return {
        "outcome": F.lit("event"),
        "match": F.col("_match"),
        "context": F.col("_context"),
        "ce": F.col("_ce"),
        "event": F.col("_event"),
        "deadletter": F.lit(None).cast("string"),
        "nearest": F.col("_match"),
        "path": F.lit("sql"),
    }


# Spark stops generating code for a plan whose rows have more than this many fields,
# nested ones included (default 100); the parsed record alone has about 70.
_MAX_FIELDS = 2000
# HotSpot JIT-compiles a method over 8,000 bytes of bytecode only in a JVM started with
# `-XX:-DontCompileHugeMethods`, and even there late: a fused stage of this pipeline (19 to
# 33 KB) ran interpreted for most of a 300,000-record batch (JFR: `processNext`
# interpreted in 1,648 of 1,720 samples), and a batch job is one fresh JVM. So Spark gets
# this limit in every JVM: a bigger stage runs operator by operator, its expressions split
# into small methods that are compiled within seconds. Measured in one session (1,000
# definitions, 300,000 records, three runs): fused 141 / 48 / 21 s, split 115 / 15 / 16 s.
_METHOD_LIMIT = 8000


# Spark 4 lowercases strings with ICU by default (`lower`: the screen's header entries,
# case-insensitive header names). The first such call in a JVM initialises ICU's
# case-mapping tables (`CollationAwareUTF8String.<clinit>`): seconds of CPU in the first
# task of every job (JFR of a one-record `xrgw spark --batch`: 116 of the executor's 260
# samples), and a slower lowercase per row after. The JVM's own `String.toLowerCase`
# (ICU off) maps like Python's `str.lower`, which the core uses.
_ICU_CASE_MAPPINGS = "spark.sql.icu.caseMappings.enabled"


def _tune_codegen(spark: SparkSession) -> None:
    """Set the code generation limits above (runtime settings; a stricter value that is
    already set is kept), and the JVM's case mappings instead of ICU's."""
    spark.conf.set(_ICU_CASE_MAPPINGS, "false")
    fields = spark.conf.get("spark.sql.codegen.maxFields", None)
    if fields is None or int(fields) < _MAX_FIELDS:
        spark.conf.set("spark.sql.codegen.maxFields", str(_MAX_FIELDS))
    current = spark.conf.get("spark.sql.codegen.hugeMethodLimit", None)
    if current is None or int(current) > _METHOD_LIMIT:
        spark.conf.set("spark.sql.codegen.hugeMethodLimit", str(_METHOD_LIMIT))


def compile_stage(spark: SparkSession, catalog: CompiledCatalog, *,
                  explain_dead_letters: bool = True, tables: bool = True) -> Stage:
    """The stage of `catalog`; `tables=False`: without the compiled path's broadcast
    candidate tables (a job whose every record goes to the Python stage)."""
    return Stage(spark, catalog, candidate_tables(spark, catalog) if tables else {},
                 explain_dead_letters)
