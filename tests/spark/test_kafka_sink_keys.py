"""The Spark job's Kafka sink keys its records as a route does (`gateway.envelope.partitioning`):
by default the source's unit of order, so that the events of one MQTT topic land on one
partition; `none` leaves them keyless, a template fills the key from the match context.
Against Tansu, read back with aiokafka (the job writes through its own producer here: the
Spark Kafka connector is not installed)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from gateway.definitions import load_catalog
from gateway.record import NativeMessage
from gateway.spark import JobOptions, run_job

EXAMPLES = Path(__file__).resolve().parents[2] / "config" / "examples"
TOPICS = ["/store/12/cashierdesk/3", "/store/12/cashierdesk/4", "/store/7/cashierdesk/1"]


def _sale(topic: str, n: int) -> NativeMessage:
    return NativeMessage("MQTT/5.0", {
        "topic_name": topic, "qos": 1,
        "user_properties": [{"name": "eventType", "value": "com.example.sale"}]},
        data={"n": n})


async def _keys(servers: str, topic: str, count: int) -> list[str | None]:
    import aiokafka

    consumer = aiokafka.AIOKafkaConsumer(topic, bootstrap_servers=servers,
                                         auto_offset_reset="earliest", enable_auto_commit=False)
    await consumer.start()
    try:
        keys: list[str | None] = []
        async with asyncio.timeout(60):
            while len(keys) < count:
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    keys += [None if r.key is None else r.key.decode() for r in records]
        return keys
    finally:
        await consumer.stop()


@pytest.mark.parametrize(("policy", "expected", "engine"), [
    ("source", TOPICS * 2, "compiled"),
    ("source", TOPICS * 2, "python"),
    ("none", [None] * 6, "auto"),
    ("{storeid}-{cdid}", ["12-3", "12-4", "7-1"] * 2, "auto"),
])
def test_kafka_sink_records_are_keyed_as_a_route_keys_them(
        tmp_path: Path, spark: SparkSession, policy: str, expected: list[str | None],
        engine: str) -> None:
    from harness.brokers import Tansu

    source = tmp_path / "in.jsonl"
    source.write_text("".join(_sale(topic, n).to_line() + "\n"
                              for n, topic in enumerate(TOPICS * 2)))
    definitions = list(load_catalog([str(EXAMPLES / "store.xreg.json")]).messages())
    with Tansu() as kafka:
        servers = kafka.bootstrap_servers
        options = JobOptions(source=f"file:{source}", sink=f"kafka://{servers}/events",
                             kafka_mode="binary", partition_key=policy,
                             engine=engine)
        result = run_job(spark, definitions, options)
        assert result.counts.get("event") == 6, result.counts
        keys = asyncio.run(_keys(servers, "events", 6))
    assert sorted(keys, key=str) == sorted(expected, key=str)


def test_a_template_key_comes_from_the_context_without_reading_the_record() -> None:
    from gateway.envelope.partitioning import PartitionKeys
    from gateway.spark.kafka import sink_key

    context = {"storeid": "12", "cdid": "3"}
    line = _sale(TOPICS[0], 1).to_line()
    # The template needs only the context: an unreadable record does not unkey the event.
    assert sink_key(PartitionKeys("{storeid}-{cdid}"), {}, "not a record", context) == "12-3"
    assert sink_key(PartitionKeys("{storeid}-{cdid}"), {}, None, context) == "12-3"
    # The source policy reads the record; without a readable one the event is keyless.
    assert sink_key(PartitionKeys("source"), {}, line, context) == TOPICS[0]
    assert sink_key(PartitionKeys("source"), {}, "not a record", context) is None
    assert sink_key(PartitionKeys("none"), {}, line, context) is None
    # The event's own partitionkey wins over every policy.
    assert sink_key(PartitionKeys("none"), {"partitionkey": 7}, line, context) == "7"
