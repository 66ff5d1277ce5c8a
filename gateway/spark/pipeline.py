"""Records in, outcomes out: the compiled SQL path plus the Python stage, as one frame.

    stage = compile_stage(spark, catalog)    # once per job: broadcast tables, Arrow fn
    staged = stage.sql(lines)                # parse, screen, match, render: all SQL
    outcomes = stage.finish(staged)          # SQL rows + mapInArrow over the rest

`staged` is used twice (the rows SQL settled and the rows it routed to Python); the job
persists it per batch so the match runs once.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema

from gateway.spark.compiler import CompiledCatalog
from gateway.spark.fallback import arrow_stage
from gateway.spark.matching import candidate_table, match
from gateway.spark.outcome import outcome_type
from gateway.spark.records import PARSE_SCHEMA, address, family, sql_ok
from gateway.spark.render import event_json, render, render_table


@dataclass
class Stage:
    spark: SparkSession
    catalog: CompiledCatalog
    candidates: DataFrame
    renders: DataFrame
    explain_dead_letters: bool = True

    def sql(self, lines: DataFrame) -> DataFrame:
        """`lines` has a string column `record`; adds the compiled path's columns."""
        parsed = lines.select("record", F.from_json("record", PARSE_SCHEMA).alias("r"),
                              F.json_object_keys("record").alias("_keys"))
        parsed = parsed.select(
            "record", "r",
            sql_ok(F.col("record"), F.col("r"), F.col("_keys")).alias("_sql"),
            family(F.col("r.protocol")).alias("_fam"),
        ).withColumn("_addr", address(F.col("r"), F.col("_fam")))
        matched = match(parsed, self.catalog, self.candidates)
        rendered = render(matched, self.catalog, self.renders)
        route = ~F.col("_sql") | F.col("_route_py") | F.coalesce(F.col("_render_py"), F.lit(True))
        return rendered.withColumn("_py", route)

    def sql_outcomes(self, staged: DataFrame) -> DataFrame:
        return staged.filter(~F.col("_py")).select(
            "record", F.lit("event").alias("outcome"), F.col("_match").alias("match"),
            F.col("_context").alias("context"), F.col("_ce").alias("ce"),
            event_json(F.col("_ce")).alias("event"),
            F.lit(None).cast("string").alias("deadletter"),
            F.col("_match").alias("nearest"), F.lit("sql").alias("path"),
        )

    def python_outcomes(self, staged: DataFrame) -> DataFrame:
        schema = outcome_type(self.catalog)
        fn = arrow_stage(
            self.catalog.definitions, uuid.uuid4().hex, ambiguity=self.catalog.ambiguity,
            validate_schema=self.catalog.validate_schema, explain=self.explain_dead_letters,
            schema=to_arrow_schema(schema),
        )
        return staged.filter(F.col("_py")).select("record").mapInArrow(fn, schema)

    def finish(self, staged: DataFrame) -> DataFrame:
        return self.sql_outcomes(staged).unionByName(self.python_outcomes(staged))


def compile_stage(spark: SparkSession, catalog: CompiledCatalog, *,
                  explain_dead_letters: bool = True) -> Stage:
    return Stage(spark, catalog, candidate_table(spark, catalog),
                 render_table(spark, catalog), explain_dead_letters)
