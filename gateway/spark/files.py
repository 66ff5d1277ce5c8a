"""File sources and sinks: JSON Lines (text) or Parquet, batch or streaming."""

from __future__ import annotations

from typing import Literal

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

Format = Literal["json", "parquet"]


def read_records(spark: SparkSession, path: str, fmt: Format, stream: bool) -> DataFrame:
    """Native message records as one string column `record` (their JSON form).

    JSON Lines are read as text: each line is kept byte for byte for the dead letter and
    parsed once by the pipeline. Parquet holds either a `record` column (what the
    dead-letter sink writes) or the record's fields as columns with `data` as JSON text.
    """
    if fmt == "json":
        reader = spark.readStream if stream else spark.read
        lines = reader.text(path)
        return lines.select(F.col("value").alias("record")).filter(F.trim("record") != "")
    table = (spark.readStream.schema(spark.read.parquet(path).schema).parquet(path)
             if stream else spark.read.parquet(path))
    if "record" in table.columns:
        return table.select("record")
    return table.select(record_from_columns(table).alias("record"))


def record_from_columns(table: DataFrame) -> Column:
    """The JSON form of a record stored as columns; `data` is spliced in as JSON text."""
    meta = F.to_json(F.struct(*[F.col(f"`{c}`") for c in table.columns if c != "data"]))
    if "data" not in table.columns:
        return meta
    head = F.call_function("left", meta, F.length(meta) - 1)
    return F.when(F.col("data").isNull(), meta).otherwise(
        F.concat(head, F.lit(',"data":'), F.col("data"), F.lit("}")))


def write_events(events: DataFrame, path: str, fmt: Format, mode: str) -> None:
    """CloudEvents: JSON Lines of the structured format, or Parquet with one column per
    attribute (`data` as JSON text, `data_base64`)."""
    if fmt == "json":
        events.select(F.col("event").alias("value")).write.mode(mode).text(path)
    else:
        events.select("ce.*").write.mode(mode).parquet(path)


def write_deadletters(dead: DataFrame, path: str, fmt: Format, mode: str) -> None:
    """Dead letters: `xrgw match`'s result (reason, detail, explain ...) plus `record`."""
    if fmt == "json":
        dead.select(F.col("deadletter").alias("value")).write.mode(mode).text(path)
    else:
        dead.select(F.col("outcome").alias("reason"), "match", "record", "deadletter") \
            .write.mode(mode).parquet(path)


def write_report(report: DataFrame, path: str, fmt: Format, mode: str) -> None:
    if fmt == "json":
        report.write.mode(mode).json(path)
    else:
        report.write.mode(mode).parquet(path)
