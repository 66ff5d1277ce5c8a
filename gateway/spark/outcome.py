"""The outcome table: one row per input record, from either path, with one schema.

| column | meaning |
|---|---|
| `record` | the input record, as it arrived (JSON text) |
| `outcome` | `event`, or the dead-letter reason code (`gateway.deadletter.reasons`) |
| `match` | the matched definition's xid (also on render failures) |
| `context` | captured placeholder values |
| `ce` | the CloudEvent: one field per attribute, `data` (JSON text), `data_base64` |
| `event` | the CloudEvent in the structured JSON format (text) |
| `deadletter` | the dead-letter document: `xrgw match`'s result line plus `record` |
| `nearest` | the definition a dead letter is counted against in the conformance report |
| `path` | `sql` (compiled) or `python` (the core, via the Arrow UDF) |
"""

from __future__ import annotations

from pyspark.sql import types as T

from gateway.spark.compiler import CORE_ATTRIBUTES, CompiledCatalog

OUTCOME_COLUMNS = ("record", "outcome", "match", "context", "ce", "event", "deadletter",
                   "nearest", "path")
_SPARK = {"string": T.StringType(), "int": T.IntegerType(), "boolean": T.BooleanType()}


def ce_type(catalog: CompiledCatalog) -> T.StructType:
    fields = [T.StructField(n, T.StringType()) for n in CORE_ATTRIBUTES]
    fields += [T.StructField(n, _SPARK[t]) for n, t in sorted(catalog.extensions.items())]
    fields += [T.StructField("data", T.StringType()),
               T.StructField("data_base64", T.StringType())]
    return T.StructType(fields)


def outcome_type(catalog: CompiledCatalog) -> T.StructType:
    return T.StructType([
        T.StructField("record", T.StringType()),
        T.StructField("outcome", T.StringType()),
        T.StructField("match", T.StringType()),
        T.StructField("context", T.MapType(T.StringType(), T.StringType())),
        T.StructField("ce", ce_type(catalog)),
        T.StructField("event", T.StringType()),
        T.StructField("deadletter", T.StringType()),
        T.StructField("nearest", T.StringType()),
        T.StructField("path", T.StringType()),
    ])
