"""The CloudEvent columns of a matched record, built from literals and captures.

`gateway.envelope.render` is the rulebook; this stage implements its happy path in SQL
and flags (`_render_py`) every record where a rule would fail or needs Python (a value
that cannot be coerced, a content type that is not a media type ...), so the Python
stage produces the exact dead letter.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from gateway.protocols import AMQP, HTTP, KAFKA, MQTT5, NATS
from gateway.spark.compiler import CompiledCatalog
from gateway.spark.records import col, first_header, read_pairs
from gateway.spark.sqlfuncs import any_of, uuid5

_CONTROL = "[\\x00-\\x1f\\x7f-\\x9f]"
_ABSOLUTE_URI = r"(?U)^[A-Za-z][A-Za-z0-9+.\-]*:[^\s]*\z"
_URI_REFERENCE = r"(?U)^[^\s\x00-\x1f\x7f]+\z"
_MEDIA_TYPE = r"(?U)^[\w.+\-!#$&^]+/[\w.+\-!#$&^]+\s*(;[^\n]*)?\z"
_TRACEPARENT = r"^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$"
_INT32 = (-(2**31), 2**31 - 1)

CORE_COLUMNS = ("specversion", "id", "source", "type", "subject", "time",
                "datacontenttype", "dataschema", "traceparent", "tracestate")

_RENDER_TYPE = T.StructType([
    T.StructField("idx", T.IntegerType()),
    T.StructField("xid", T.StringType()),
    T.StructField("names", T.ArrayType(T.StringType())),
    T.StructField("fixed_names", T.ArrayType(T.StringType())),
    T.StructField("fixed_vals", T.ArrayType(T.StringType())),
    T.StructField("t_names", T.ArrayType(T.StringType())),
    T.StructField("t_types", T.ArrayType(T.StringType())),
    T.StructField("t_parts", T.ArrayType(T.ArrayType(T.StructType([
        T.StructField("lit", T.StringType()), T.StructField("slot", T.IntegerType()),
    ])))),
    T.StructField("tfr", T.BooleanType()),
    T.StructField("ctype", T.StringType()),
    T.StructField("dschema", T.StringType()),
])


def render_table(spark: SparkSession, catalog: CompiledCatalog) -> DataFrame:
    rows = []
    for plan in catalog.plans:
        if plan.key is None:
            continue
        rows.append((
            plan.index, plan.xid, plan.names, list(plan.fixed), list(plan.fixed.values()),
            [n for n, _, _ in plan.templated], [t for _, t, _ in plan.templated],
            [[(lit, slot) for lit, slot in parts] for _, _, parts in plan.templated],
            plan.time_from_receive, plan.content_type, plan.dataschema,
        ))
    return spark.createDataFrame(rows, _RENDER_TYPE)


def native_identity(r: Column) -> Column:
    """`gateway.envelope.ids.native_identity`."""
    protocol = col(r, "protocol")
    props = col(r, "properties")
    correlation = col(r, "correlation_data")
    key = first_header(r, "idempotency-key")
    return (
        F.when((protocol == KAFKA) & col(r, "topic").isNotNull()
               & col(r, "partition").isNotNull() & col(r, "offset").isNotNull(),
               F.concat_ws("", F.lit("kafka:"), col(r, "topic"), F.lit("/"),
                           col(r, "partition").cast("string"), F.lit("/"),
                           col(r, "offset").cast("string")))
        .when((protocol == AMQP) & F.try_element_at(props, F.lit("message-id")).isNotNull(),
              F.concat(F.lit("amqp:"), F.try_element_at(props, F.lit("message-id"))))
        .when((protocol == NATS) & col(r, "stream").isNotNull()
              & col(r, "sequence").isNotNull(),
              F.concat(F.lit("nats:"), col(r, "stream"), F.lit("/"),
                       col(r, "sequence").cast("string")))
        .when((protocol == MQTT5) & (F.length(correlation) > 0),
              F.concat(F.lit("mqtt:"), F.coalesce(col(r, "topic_name"), F.lit("")),
                       F.lit("/"), correlation))
        .when((protocol == HTTP) & (F.length(key) > 0), F.concat(F.lit("http:"), key))
    )


def native_content_type(r: Column) -> Column:
    """`NativeMessage.content_type`."""
    protocol = col(r, "protocol")
    return (
        F.when(protocol == MQTT5, col(r, "content_type"))
        .when(protocol == AMQP, F.try_element_at(col(r, "properties"), F.lit("content-type")))
        .when(protocol.isin(KAFKA, HTTP, NATS), first_header(r, "content-type"))
    )


def trace_header(r: Column, name: str) -> Column:
    """`gateway.envelope.render.trace_header`."""
    protocol = col(r, "protocol")
    return (
        F.when(protocol.isin(HTTP, KAFKA, NATS), first_header(r, name))
        .when(protocol == MQTT5,
              F.try_element_at(read_pairs(r, "user_properties", name, False), F.lit(1)))
        .when(protocol == AMQP,
              F.try_element_at(col(r, "application-properties"), F.lit(name)))
    )


def _coerce_fails(name: Column, typ: Column, value: Column) -> Column:
    """`render.coerce` + `_check_attribute` would reject this templated value."""
    number = value.try_cast("long")
    bad_type = (
        F.when(typ == "integer", ~(value.rlike(r"^-?\d+$") & number.between(*_INT32)))
        .when(typ == "boolean", ~value.isin("true", "false"))
        .otherwise(value.rlike(_CONTROL) | ((typ == "uri") & ~value.rlike(_ABSOLUTE_URI)))
    )
    bad_core = (
        ((name == "source") & ~value.rlike(_URI_REFERENCE))
        | ((name == "dataschema") & ~value.rlike(_ABSOLUTE_URI))
        | ((name == "datacontenttype") & ~value.rlike(_MEDIA_TYPE))
        | (name.isin("id", "type", "subject") & (F.length(value) == 0))
    )
    return F.coalesce(bad_type | bad_core, F.lit(True))


def _now_rfc3339() -> Column:
    text = F.date_format(F.current_timestamp(), "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX")
    return F.regexp_replace(F.regexp_replace(text, r"0+(?=Z|[+-]\d\d:\d\d$)", ""),
                            r"\.(?=Z|[+-])", "")


def render(df: DataFrame, catalog: CompiledCatalog, table: DataFrame) -> DataFrame:
    """Adds `_ce` (struct, one field per attribute + data + data_base64), `_context`,
    `_match` and `_render_py` to matched rows (`_best` expected)."""
    side = F.broadcast(table.select(F.struct(*table.columns).alias("_def")))
    out = df.join(side, df["_best.idx"] == side["_def.idx"], "left")
    d, r, caps = F.col("_def"), F.col("r"), F.col("_best.caps")
    t_values = F.transform(d["t_parts"], lambda parts: F.array_join(F.transform(
        parts, lambda p: F.coalesce(p["lit"], F.try_element_at(caps, p["slot"] + 1))), ""))
    # Intermediate columns, each projected once: the optimizer keeps a projection that is
    # referenced several times instead of inlining it (smaller generated code, no rework).
    out = out.withColumn("_tvals", t_values)
    t_values = F.col("_tvals")
    out = out.withColumn("_attrs", F.map_from_arrays(
        F.concat(d["fixed_names"], d["t_names"]), F.concat(d["fixed_vals"], t_values)))
    out = out.withColumn("_context", F.map_from_arrays(d["names"], caps))
    out = (out.withColumn("_nct", native_content_type(r))
           .withColumn("_ident", native_identity(r))
           .withColumn("_tp", trace_header(r, "traceparent"))
           .withColumn("_ts", trace_header(r, "tracestate")))
    attrs = F.col("_attrs")

    def attr(name: str) -> Column:
        return F.try_element_at(attrs, F.lit(name))

    has = F.map_contains_key
    native_ct = F.col("_nct")
    data, data_b64 = col(r, "data"), col(r, "data_base64")
    content_type = (
        F.when(has(attrs, "datacontenttype"), attr("datacontenttype"))
        .when(native_ct.isNotNull(), native_ct)
        .when(d["ctype"].isNotNull(), d["ctype"])
        .when(data.isNotNull(), F.lit("application/json"))
    )
    identity = F.col("_ident")
    traceparent = F.col("_tp")
    carry = ~has(attrs, "traceparent") & F.coalesce(traceparent.rlike(_TRACEPARENT), F.lit(False))
    tracestate = F.col("_ts")
    columns: dict[str, Column] = {
        "specversion": F.lit("1.0"),
        "id": F.when(has(attrs, "id"), attr("id"))
        .when(identity.isNotNull(), uuid5(identity)).otherwise(F.expr("uuid()")),
        "source": attr("source"),
        "type": attr("type"),
        "subject": attr("subject"),
        "time": F.when(d["tfr"], F.coalesce(col(r, "received_at"), _now_rfc3339()))
        .otherwise(attr("time")),
        "datacontenttype": content_type,
        "dataschema": F.coalesce(attr("dataschema"), d["dschema"]),
        "traceparent": F.when(carry, traceparent).otherwise(attr("traceparent")),
        "tracestate": F.when(carry & (F.length(tracestate) > 0), tracestate)
        .otherwise(attr("tracestate")),
    }
    for name, spark_type in sorted(catalog.extensions.items()):
        value = attr(name)
        columns[name] = value if spark_type == "string" else (
            value == "true" if spark_type == "boolean" else value.try_cast("int"))
    fields = [c.alias(n) for n, c in columns.items()]
    out = out.withColumn("_ce", F.struct(*fields, data.alias("data"),
                                         data_b64.alias("data_base64")))
    zipped = F.arrays_zip(d["t_names"].alias("n"), d["t_types"].alias("t"), t_values.alias("v"))
    bad_values = F.exists(zipped, lambda z: _coerce_fails(z["n"], z["t"], z["v"]))
    bad_native = (~has(attrs, "datacontenttype") & native_ct.isNotNull()
                  & ~F.coalesce(native_ct.rlike(_MEDIA_TYPE), F.lit(False)))
    render_py = any_of([bad_values, bad_native])
    return out.withColumn("_render_py", F.coalesce(render_py, F.lit(True))).withColumn(
        "_match", d["xid"]).drop("_def", "_attrs", "_tvals", "_nct", "_ident", "_tp", "_ts")


def event_json(ce: Column) -> Column:
    """The structured-mode JSON text: the attributes (nulls dropped) with the body spliced
    in as it arrived, never parsed and re-serialized."""
    attrs = F.to_json(ce.dropFields("data", "data_base64"))
    body = F.when(ce["data"].isNotNull(), F.concat(F.lit(',"data":'), ce["data"])).when(
        ce["data_base64"].isNotNull(),
        F.concat(F.lit(',"data_base64":"'), ce["data_base64"], F.lit('"'))).otherwise(F.lit(""))
    trimmed: Any = F.call_function("left", attrs, F.length(attrs) - 1)
    return F.concat(trimmed, body, F.lit("}"))
