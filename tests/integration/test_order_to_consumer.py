"""Order survives to the consumer of a partitioned Kafka output (issue 14): the gateway,
in process, moves 6 MQTT topics x 200 messages to a 4-partition Kafka topic. Keyless
records would spread each MQTT topic over the partitions and a consumer would read many
of them behind a later message of their topic; keyed by the source's unit of order (the
default `partitionkey: source`), each topic stays in one partition, in order. With
`partitionkey: none` the records are keyless: the test checks that path too, so the
ordered result above is the key's doing."""

from __future__ import annotations

import asyncio
import json
import shutil
import uuid
from collections import defaultdict
from pathlib import Path

import paho.mqtt.client as paho
import pytest
from aiokafka import AIOKafkaConsumer  # type: ignore[import-untyped]
from aiokafka.admin import AIOKafkaAdminClient, NewTopic  # type: ignore[import-untyped]
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from adapters.registry import REGISTRY
from gateway.config import load_config
from gateway.daemon import Gateway

ROOT = Path(__file__).resolve().parents[2]
TOPICS = [f"/store/12/cashierdesk/{desk}" for desk in range(6)]
PER_TOPIC = 200


def _config(tmp: Path, mosquitto, tansu, topic: str, policy: str, suffix: str) -> Path:
    store = json.loads((ROOT / "config/examples/store.xreg.json").read_text())
    store["endpoints"]["events-kafka"]["protocoloptions"]["topic"] = topic
    (tmp / "store.xreg.json").write_text(json.dumps(store))
    shutil.copy(ROOT / "config/examples/demo-endpoints.xreg.json", tmp)
    config = tmp / "gateway.yaml"
    config.write_text(f"""
definitions: [store.xreg.json, demo-endpoints.xreg.json]
routes:
  - from: store-mqtt
    to: [events-kafka]
    partitionkey: {policy}
deadletter: log
admin: {{listen: "127.0.0.1:0"}}
endpoints:
  store-mqtt: {{uri: "{mosquitto.url}", client_id: "xrgw-order-{suffix}"}}
  events-kafka: {{uri: "{tansu.url}"}}
""")
    return config


def _publish(url: str) -> None:
    host, port = url.removeprefix("mqtt://").split(":")
    client = paho.Client(CallbackAPIVersion.VERSION2, protocol=MQTTProtocolVersion.MQTTv5)
    client.connect(host, int(port))
    client.loop_start()
    properties = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
    properties.UserProperty = [("eventType", "com.example.sale")]
    properties.ContentType = "application/json"
    try:
        infos = [client.publish(topic, json.dumps({"n": n}), qos=1, properties=properties)
                 for n in range(PER_TOPIC) for topic in TOPICS]  # topics interleaved
        for info in infos:
            info.wait_for_publish(20)
    finally:
        client.loop_stop()
        client.disconnect()


async def _consume(bootstrap: str, topic: str, count: int) -> list:
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap,
                                group_id=f"check-{uuid.uuid4().hex[:6]}",
                                auto_offset_reset="earliest", session_timeout_ms=6000,
                                heartbeat_interval_ms=500)
    await consumer.start()
    out: list = []
    try:
        async with asyncio.timeout(60):
            while len(out) < count:
                # One partition after another, as a consumer with several partitions
                # may well read them: order is only promised within a partition.
                batch = await consumer.getmany(timeout_ms=500)
                for _, records in sorted(batch.items(), key=lambda kv: kv[0].partition):
                    out.extend(records)
    finally:
        await consumer.stop()
    return out


def _behind(records: list) -> tuple[int, dict[str, set[int]]]:
    """How many events arrive behind a later event of their MQTT topic, and the
    partitions each topic's events landed in."""
    last: dict[str, int] = {}
    late = 0
    partitions: dict[str, set[int]] = defaultdict(set)
    for record in records:
        headers = dict((k, v.decode()) for k, v in record.headers)
        desk = headers["ce_subject"]
        n = json.loads(record.value)["n"]
        partitions[desk].add(record.partition)
        if n < last.get(desk, -1):
            late += 1
        last[desk] = max(last.get(desk, -1), n)
    return late, partitions


@pytest.mark.parametrize("policy", ["source", "none"])
def test_each_mqtt_topic_stays_in_one_partition_in_order(tmp_path, mosquitto, tansu, policy):
    suffix = uuid.uuid4().hex[:8]
    topic = f"ordered-{suffix}"
    config, problems = load_config(_config(tmp_path, mosquitto, tansu, topic, policy, suffix))
    assert config is not None, [str(p) for p in problems]

    async def scenario() -> list:
        admin = AIOKafkaAdminClient(bootstrap_servers=tansu.bootstrap_servers)
        await admin.start()
        try:
            await admin.create_topics([NewTopic(topic, num_partitions=4, replication_factor=1)])
        finally:
            await admin.close()
        gateway = Gateway(config, REGISTRY)
        await gateway.start()
        try:
            for _ in range(200):
                if all(gateway.readiness().values()):
                    break
                await asyncio.sleep(0.05)
            await asyncio.to_thread(_publish, mosquitto.url)
            return await _consume(tansu.bootstrap_servers, topic, len(TOPICS) * PER_TOPIC)
        finally:
            await gateway.stop()

    records = asyncio.run(scenario())
    late, partitions = _behind(records)
    assert len({(dict(r.headers)["ce_subject"], json.loads(r.value)["n"])
                for r in records}) == len(TOPICS) * PER_TOPIC
    if policy == "source":
        assert late == 0
        assert all(len(p) == 1 for p in partitions.values()), partitions
        assert {r.key.decode() for r in records} == set(TOPICS)
    else:
        assert all(r.key is None for r in records)
        assert late > 0  # keyless: the consumer's view is out of order
