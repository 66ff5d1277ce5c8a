"""Kafka sources and sinks: Spark's connector when present, else the Python ones.

Source records become native KAFKA records (`gateway.record`) by the adapter's rules
(`adapters/kafka/record.py`), in SQL: UTF-8 key as `key` else `key_base64`, header
values as text (non-UTF-8 as base64), the body as `data` under a JSON content type or,
without one, when it is a JSON object or array; otherwise `data_base64`. `received_at`
is the Kafka timestamp, so a replay renders the same `time`. With `records="json"` the
value is taken to be a record's JSON form (an archive or transport topic).
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from gateway.deadletter.format import deadletter_record
from gateway.envelope.partitioning import PartitionKeys
from gateway.matching.matcher import Explanation
from gateway.protocols import KAFKA
from gateway.record import NativeMessage
from gateway.spark.kafka_source import NAME, KafkaDataSource
from gateway.spark.locations import Location
from gateway.spark.sqlfuncs import sql_lambda

_CONNECTOR = "org.apache.spark.sql.kafka010.KafkaSourceProvider"


def has_connector(spark: SparkSession) -> bool:
    """Whether Spark's Kafka connector jar is on the classpath (`spark.jars.packages`)."""
    try:
        jvm: Any = spark.sparkContext._jvm
        jvm.java.lang.Class.forName(_CONNECTOR, False, jvm.Thread.currentThread()
                                    .getContextClassLoader())
        return True
    except Exception:
        return False


def read_kafka(spark: SparkSession, where: Location, stream: bool) -> DataFrame:
    if has_connector(spark):
        reader: Any = spark.readStream if stream else spark.read
        frame: DataFrame = (reader.format("kafka").option("kafka.bootstrap.servers", where.servers)
                .option("subscribe", where.topic).option("startingOffsets", "earliest")
                .option("includeHeaders", "true").load())
        return frame
    spark.dataSource.register(KafkaDataSource)
    reader = spark.readStream if stream else spark.read
    frame = (reader.format(NAME).option("bootstrap.servers", where.servers)
             .option("topic", where.topic).load())
    return frame


# The connector's headers as the record's name/value entries, the value UTF-8 text or
# else base64 (the adapter's rule). SQL text, like every lambda here (`sql_lambda`).
_HEADERS_SQL = (
    "transform(coalesce(headers, array()), e -> named_struct('name', e.key, 'value',"
    " coalesce(CASE WHEN is_valid_utf8(e.value) THEN cast(e.value AS string)"
    " ELSE base64(e.value) END, '')))"
)


def native_record(rows: DataFrame) -> Column:
    """The native KAFKA record (JSON text) of a Kafka row (connector columns)."""
    headers = F.expr(_HEADERS_SQL)
    ctype = F.try_element_at(
        sql_lambda("filter", _HEADERS_SQL, "lower(e.name) = 'content-type'"), F.lit(1))["value"]
    essence = F.lower(F.trim(F.split(ctype, ";").getItem(0)))
    json_type = essence.isin("application/json", "text/json") | essence.endswith("+json")
    text = F.when(F.is_valid_utf8("value"), F.col("value").cast("string"))
    parsed = F.try_parse_json(text)
    starts = F.substring(F.ltrim(text), 1, 1).isin("{", "[")
    as_data = parsed.isNotNull() & F.when(ctype.isNull(), starts).otherwise(json_type)
    meta = F.to_json(F.struct(
        F.lit(KAFKA).alias("protocol"), "topic", "partition", "offset",
        (F.unix_micros("timestamp") / 1000).cast("long").alias("timestamp"),
        F.when(F.is_valid_utf8("key"), F.col("key").cast("string")).alias("key"),
        F.when(~F.is_valid_utf8("key"), F.base64("key")).alias("key_base64"),
        F.when(F.size(headers) > 0, headers).alias("headers"),
        F.date_format("timestamp", "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'").alias("received_at"),
    ))
    head = F.call_function("left", meta, F.length(meta) - 1)
    body = (F.when(F.col("value").isNull() | (F.length("value") == 0), F.lit(""))
            .when(as_data, F.concat(F.lit(',"data":'), F.to_json(parsed)))
            .otherwise(F.concat(F.lit(',"data_base64":"'), F.base64("value"), F.lit('"'))))
    return F.concat(head, body, F.lit("}"))


def read_records(spark: SparkSession, where: Location, *, stream: bool,
                 records: Literal["native", "json"] = "native") -> DataFrame:
    rows = read_kafka(spark, where, stream)
    if records == "json":
        return rows.select(F.col("value").cast("string").alias("record"))
    return rows.select(native_record(rows).alias("record"))


# -- sinks --------------------------------------------------------------------------------

def sink_key(keys: PartitionKeys, ce: Mapping[str, Any], record: str | None,
             context: Mapping[str, Any] | None) -> str | None:
    """The Kafka key of an event's record, as a route gives it (`gateway.envelope.partitioning`):
    the event's `partitionkey`, else the key policy's (by default the source's unit of
    order: MQTT topic, NATS subject, Kafka key, AMQP group or subject), else none."""
    key = ce.get("partitionkey")
    if key is not None:
        return str(key)
    if not keys.enabled:
        return None
    source: NativeMessage | None = None
    if keys.reads_source and record is not None:
        # Only the source policy needs the record: a template keys from the context, so
        # its rows are not parsed (nor left keyless when their record is unreadable).
        try:
            source = NativeMessage.from_line(record)
        except ValueError:
            return None
    return keys.key(source, dict(context or {}))


def _event_messages(events: Iterable[Row], mode: str,
                    keys: PartitionKeys) -> Iterable[tuple[Any, ...]]:
    """(key, value, headers) of each event, per the Kafka binding."""
    for row in events:
        ce: dict[str, Any] = row["ce"].asDict()
        key = sink_key(keys, ce, row["record"], row["context"])
        key_bytes = key.encode() if key is not None else None
        if mode == "structured":
            yield (key_bytes, row["event"].encode(),
                   [("content-type", b"application/cloudevents+json")])
            continue
        data, data_b64 = ce.pop("data", None), ce.pop("data_base64", None)
        headers = [(f"ce_{n}", _canonical(v).encode()) for n, v in ce.items()
                   if v is not None and n != "datacontenttype"]
        content_type = ce.get("datacontenttype") or ("application/json" if data else None)
        if content_type:
            headers.append(("content-type", content_type.encode()))
        value = data.encode() if data is not None else (
            base64.b64decode(data_b64) or None if data_b64 is not None else None)
        yield key_bytes, value, headers


def _canonical(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _deadletter_messages(rows: Iterable[Row]) -> Iterable[tuple[Any, ...]]:
    """The daemon's dead-letter form: original body, reason in `xrgw-*` headers."""
    for row in rows:
        document = json.loads(row["deadletter"])
        try:
            original = NativeMessage.from_line(row["record"])
        except ValueError:
            yield None, row["record"].encode(), [("xrgw-reason", b"invalid-record"),
                                                 ("xrgw-detail",
                                                  str(document.get("detail", "")).encode())]
            continue
        explain = [Explanation(e["definition"], e["failure"], e["passed"])
                   for e in document.get("explain", [])]
        dead = deadletter_record(original, protocol=KAFKA, reason=document["reason"],
                                 detail=document.get("detail", ""), explain=explain)
        headers = [(p[0], p[1].encode()) for p in dead.pairs("headers")]
        yield None, dead.body_bytes() if dead.has_body else None, headers


def _produce(servers: str, topic: str, messages: Iterable[tuple[Any, ...]]) -> None:
    from aiokafka import AIOKafkaProducer  # type: ignore[import-untyped]

    async def send() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=servers, acks="all")
        await producer.start()
        try:
            futures = [await producer.send(topic, value=v, key=k, headers=h)
                       for k, v, h in messages]
            for future in futures:
                await future
        finally:
            await producer.stop()

    asyncio.run(send())


def write_events(events: DataFrame, where: Location, mode: str,
                 partition_key: str = "source") -> None:
    """The events to a Kafka topic, each keyed as a route keys it (`sink_key`)."""
    spark = events.sparkSession
    keys = PartitionKeys(partition_key)
    if has_connector(spark) and mode == "structured":
        headers = F.array(F.struct(F.lit("content-type").alias("key"),
                                   F.encode(F.lit("application/cloudevents+json"), "UTF-8")
                                   .alias("value")))
        key_of = F.udf(lambda ce, record, context: sink_key(keys, ce.asDict(), record, context),
                       "string")
        key = F.encode(key_of("ce", "record", "context"), "UTF-8")
        (events.select(key.alias("key"), F.col("event").alias("value"),
                       headers.alias("headers"))
         .write.format("kafka").option("kafka.bootstrap.servers", where.servers)
         .option("topic", where.topic).save())
        return
    servers, topic = where.servers, where.topic
    events.select("ce", "event", "record", "context").foreachPartition(
        lambda rows: _produce(servers, topic, _event_messages(rows, mode, keys)))


def write_deadletters(dead: DataFrame, where: Location) -> None:
    servers, topic = where.servers, where.topic
    dead.select("record", "deadletter").foreachPartition(
        lambda rows: _produce(servers, topic, _deadletter_messages(rows)))
