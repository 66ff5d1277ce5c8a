"""Records in, outcomes out: the compiled SQL path plus the Python stage, in one pass.

    stage = compile_stage(spark, catalog)    # once per job: broadcast tables, Python fn
    outcomes = stage.convert(lines)          # parse, screen, match, render: all SQL

Rows the compiled path cannot settle exactly are flagged (`_py`) and their record goes
to a vectorized Python UDF in the same projection; every other row hands it a null. So
the records are read and matched once, with no cache and no second scan.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.functions import arrow_udf
from pyspark.sql.pandas.types import to_arrow_type

from gateway.spark.compiler import CompiledCatalog
from gateway.spark.fallback import python_stage
from gateway.spark.matching import candidate_tables, match
from gateway.spark.outcome import outcome_type
from gateway.spark.records import PARSE_SCHEMA, RECORD, address, family, sql_ok
from gateway.spark.render import render
from gateway.spark.session import COMPILE_HUGE_METHODS, JVM_OPTION_KEYS


@dataclass
class Stage:
    spark: SparkSession
    catalog: CompiledCatalog
    tables: dict[tuple[Any, ...], DataFrame]
    explain_dead_letters: bool = True
    # Random per stage: part of every generated event id (`sqlfuncs.random_digest`).
    salt: str = field(default_factory=lambda: uuid.uuid4().hex)

    def sql(self, lines: DataFrame) -> DataFrame:
        """`lines` has a string column `record`; adds the compiled path's columns."""
        _tune_codegen(self.spark)
        parsed = lines.select("record", F.from_json("record", PARSE_SCHEMA).alias(RECORD),
                              F.json_object_keys("record").alias("_keys"),
                              F.lower("record").alias("_lc"))
        protocols = self.catalog.sql_protocols
        parsed = parsed.select(
            "record", RECORD, "_lc",
            sql_ok(F.col("record"), F.col(RECORD), F.col("_keys"), protocols).alias("_sql"),
            family(F.col(f"{RECORD}.protocol")).alias("_fam"),
        ).withColumn("_addr", address(F.col(RECORD), F.col("_fam"),
                                      self.catalog.sql_families))
        matched = match(parsed, self.catalog, self.tables)
        rendered = render(matched, self.catalog, self.salt)
        route = ~F.col("_sql") | F.col("_route_py") | F.coalesce(F.col("_render_py"), F.lit(True))
        return rendered.withColumn("_py", route)

    def python(self) -> Column:
        """The Python stage as a column function of the record (null: nothing to do)."""
        schema = outcome_type(self.catalog)
        result = type(schema)([f for f in schema.fields if f.name != "record"])
        fn = python_stage(
            self.catalog.definitions, uuid.uuid4().hex, ambiguity=self.catalog.ambiguity,
            validate_schema=self.catalog.validate_schema, explain=self.explain_dead_letters,
            schema=self.catalog.schema,
            result=to_arrow_type(result),
        )
        # The stubs' overloads do not cover a struct return type (the runtime does).
        udf: Any = arrow_udf(fn, result)  # type: ignore[call-overload]
        column: Column = udf(F.when(F.col("_py"), F.col("record")))
        return column

    def convert(self, lines: DataFrame) -> DataFrame:
        """One outcome row per record (`gateway.spark.outcome`)."""
        staged = self.sql(lines).withColumn("_out", self.python())
        py, out = F.col("_py"), F.col("_out")

        def pick(name: str, sql: Column) -> Column:
            return F.when(py, out[name]).otherwise(sql).alias(name)

        return staged.select(
            "record",
            pick("outcome", F.lit("event")),
            pick("match", F.col("_match")),
            pick("context", F.col("_context")),
            pick("ce", F.col("_ce")),
            pick("event", F.col("_event")),
            pick("deadletter", F.lit(None).cast("string")),
            pick("nearest", F.col("_match")),
            F.when(py, F.lit("python")).otherwise(F.lit("sql")).alias("path"),
        )


# Spark stops generating code for a plan whose rows have more than this many fields,
# nested ones included (default 100); the parsed record alone has about 70.
_MAX_FIELDS = 2000
# HotSpot never JIT-compiles a method over 8,000 bytes of bytecode, and a fused stage of
# this pipeline is bigger: interpreted, it ran 2.5x slower. So for a JVM started without
# `-XX:-DontCompileHugeMethods` Spark gets this limit and runs a bigger stage per
# operator, with its expressions split into small methods.
_SPLIT_LIMIT = 8000
# With that option (`session.get_session` sets it) the fused stage is the fastest, but
# only while C2 manages to compile it: measured here, methods of 32,306 and 33,599 bytes
# compiled; one of 39,825 bytes was given up by both compilers ("out of nodes", "out of
# virtual registers") and ran interpreted, 2.5x slower. More definitions with different
# check signatures make bigger stages, so above this size Spark splits them as well.
_FUSED_LIMIT = 34000


def compiles_huge_methods(spark: SparkSession) -> bool:
    """Were the executors' JVMs told to JIT-compile huge methods? (In local mode the
    driver is the executor.)"""
    conf = spark.sparkContext.getConf()
    master = conf.get("spark.master") or ""
    key = JVM_OPTION_KEYS[0] if master.startswith("local") else JVM_OPTION_KEYS[1]
    return COMPILE_HUGE_METHODS in (conf.get(key) or "").split()


def _tune_codegen(spark: SparkSession) -> None:
    """Set the code generation limits above (runtime settings; a stricter value that is
    already set is kept)."""
    fields = spark.conf.get("spark.sql.codegen.maxFields", None)
    if fields is None or int(fields) < _MAX_FIELDS:
        spark.conf.set("spark.sql.codegen.maxFields", str(_MAX_FIELDS))
    limit = _FUSED_LIMIT if compiles_huge_methods(spark) else _SPLIT_LIMIT
    current = spark.conf.get("spark.sql.codegen.hugeMethodLimit", None)
    if current is None or int(current) > limit:
        spark.conf.set("spark.sql.codegen.hugeMethodLimit", str(limit))


def compile_stage(spark: SparkSession, catalog: CompiledCatalog, *,
                  explain_dead_letters: bool = True) -> Stage:
    return Stage(spark, catalog, candidate_tables(spark, catalog), explain_dead_letters)
