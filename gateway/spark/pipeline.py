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
from gateway.spark.render import event_json, render
from gateway.spark.session import COMPILE_HUGE_METHODS, JVM_OPTION_KEYS


@dataclass
class Stage:
    spark: SparkSession
    catalog: CompiledCatalog
    tables: dict[tuple[Any, ...], DataFrame]
    explain_dead_letters: bool = True
    # Random per stage: part of every generated event id (`sqlfuncs.random_uuid`).
    salt: str = field(default_factory=lambda: uuid.uuid4().hex)

    def sql(self, lines: DataFrame) -> DataFrame:
        """`lines` has a string column `record`; adds the compiled path's columns."""
        _tune_codegen(self.spark)
        parsed = lines.select("record", F.from_json("record", PARSE_SCHEMA).alias(RECORD),
                              F.json_object_keys("record").alias("_keys"),
                              F.lower("record").alias("_lc"))
        parsed = parsed.select(
            "record", RECORD, "_lc",
            sql_ok(F.col("record"), F.col(RECORD), F.col("_keys")).alias("_sql"),
            family(F.col(f"{RECORD}.protocol")).alias("_fam"),
        ).withColumn("_addr", address(F.col(RECORD), F.col("_fam")))
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
            pick("event", event_json(F.col("_ce"))),
            pick("deadletter", F.lit(None).cast("string")),
            pick("nearest", F.col("_match")),
            F.when(py, F.lit("python")).otherwise(F.lit("sql")).alias("path"),
        )


_CODEGEN = {
    # Spark stops generating code for a plan whose rows have more than this many fields,
    # nested ones included (default 100); the parsed record alone has about 70.
    "spark.sql.codegen.maxFields": 2000,
    # HotSpot never JIT-compiles a method over 8,000 bytes of bytecode, and a fused stage
    # of this pipeline is bigger: interpreted, it ran 2.5x slower. Executors started with
    # `-XX:-DontCompileHugeMethods` (`session.get_session` does) compile it, which was
    # the fastest (13% over the next best); for any other JVM Spark gets this limit and
    # runs such a stage per operator, with its expressions split into small methods.
    "spark.sql.codegen.hugeMethodLimit": 8000,
}


def compiles_huge_methods(spark: SparkSession) -> bool:
    """Were the executors' JVMs told to JIT-compile huge methods? (In local mode the
    driver is the executor.)"""
    conf = spark.sparkContext.getConf()
    master = conf.get("spark.master") or ""
    key = JVM_OPTION_KEYS[0] if master.startswith("local") else JVM_OPTION_KEYS[1]
    return COMPILE_HUGE_METHODS in (conf.get(key) or "").split()


def _tune_codegen(spark: SparkSession) -> None:
    """Apply `_CODEGEN` to the session (runtime settings; a stricter value is kept)."""
    for key, wanted in _CODEGEN.items():
        current = spark.conf.get(key, None)
        if key.endswith("maxFields"):
            if current is None or int(current) < wanted:
                spark.conf.set(key, str(wanted))
        elif not compiles_huge_methods(spark) and (current is None or int(current) > wanted):
            spark.conf.set(key, str(wanted))


def compile_stage(spark: SparkSession, catalog: CompiledCatalog, *,
                  explain_dead_letters: bool = True) -> Stage:
    return Stage(spark, catalog, candidate_tables(spark, catalog), explain_dead_letters)
