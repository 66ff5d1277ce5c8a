"""Endpoint options that change behaviour, each shown against a real broker or server.

Every xRegistry endpoint option an adapter implements is proven here (or in the adapter's
own test module, where named below) by the difference it makes: with the option, the
broker or receiver sees something it does not see without it. The options reach the
adapters the way a deployment sets them: through a loaded config and the adapter factory,
so a spelling the config layer accepts but the adapter ignores fails here.

Already proven elsewhere: MQTT `topicfilter`, `sharedsubscriptiongroup`, `qos`,
`sessionexpiryinterval` (test_adapter_mqtt.py, test_faults.py); Kafka `topic`, `key`,
`consumergroup` (test_adapter_kafka.py, test_matrix.py); NATS `subject`, `subjectfilter`,
`queuegroup` (test_adapter_nats.py); AMQP `node`, `durable` (test_adapter_amqp.py).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaProducer  # type: ignore[import-untyped]
from aiokafka.admin import AIOKafkaAdminClient, NewTopic  # type: ignore[import-untyped]
from support import asyncio_test
from test_adapter_http import Receiver

from adapters.http import HttpProducer
from adapters.kafka import KafkaConsumer, KafkaProducer
from adapters.mqtt import MqttConsumer, MqttProducer
from adapters.registry import REGISTRY
from gateway.config import EndpointConfig, for_adapter, load_config_text
from gateway.ports import Delivery, EndpointSettings, read_one, write
from gateway.record import NativeMessage
from harness.brokers import Mosquitto, Tansu

TIMEOUT = 10.0


def _uid() -> str:
    return uuid.uuid4().hex[:10]


def _endpoint(tmp_path: Path, protocol: str, uri: str, document_options: dict[str, Any],
              usage: str = "consumer", override: dict[str, Any] | None = None
              ) -> EndpointConfig:
    """The endpoint as `xrgw run` resolves it: options written in an xRegistry document
    (xRegistry spelling) and, optionally, in the gateway config. The endpoint under test
    is the route's source (`usage` consumer) or its output (producer)."""
    tested = "src" if usage == "consumer" else "out"
    options = {tested: document_options, "src" if tested == "out" else "out": {}}
    document = {
        "messagegroups": {"g": {"messages": {"m": {
            "envelope": "CloudEvents/1.0",
            "envelopemetadata": {"type": {"value": "t"}, "source": {"value": "s"}}}}}},
        "endpoints": {
            eid: {"usage": [role], "protocol": protocol, "messagegroups": ["/messagegroups/g"],
                  "protocoloptions": {"endpoints": [{"uri": uri}], **options[eid]}}
            for eid, role in (("src", "consumer"), ("out", "producer"))
        },
    }
    (tmp_path / "defs.xreg.json").write_text(json.dumps(document))
    config: dict[str, Any] = {"definitions": ["defs.xreg.json"], "deadletter": "log",
                              "routes": [{"from": "src", "to": ["out"]}]}
    if override is not None:
        config["endpoints"] = {tested: {"options": override}}
    loaded, problems = load_config_text(json.dumps(config), "gw.yaml", tmp_path, environ={})
    assert loaded is not None, [str(p) for p in problems]
    return loaded.endpoints[tested]


async def _read(consumer: KafkaConsumer | MqttConsumer, timeout: float = TIMEOUT) -> Delivery:
    async with asyncio.timeout(timeout):
        return await read_one(consumer)


async def _nothing_arrives(consumer: KafkaConsumer | MqttConsumer, seconds: float) -> None:
    try:
        delivery = await _read(consumer, seconds)
    except TimeoutError:
        return
    raise AssertionError(f"expected nothing, got {delivery.message.to_line()}")


# ====================================================================== Kafka


async def _kafka_topic(tansu: Tansu) -> str:
    """A new one-partition topic (so that arrival order is send order)."""
    name = f"xrgw-opt-{_uid()}"
    admin = AIOKafkaAdminClient(bootstrap_servers=tansu.bootstrap_servers)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)])
    finally:
        await admin.close()
    return name


async def _kafka_backlog(tansu: Tansu, topic: str, values: list[bytes]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=tansu.bootstrap_servers)
    await producer.start()
    try:
        for value in values:
            await producer.send_and_wait(topic, value)
    finally:
        await producer.stop()


@asyncio_test
async def test_kafka_autooffsetreset_latest_skips_the_backlog(tansu: Tansu,
                                                              tmp_path: Path) -> None:
    topic = await _kafka_topic(tansu)
    await _kafka_backlog(tansu, topic, [b"old-1", b"old-2"])
    tuning = {"session_timeout_ms": 3000, "heartbeat_interval_ms": 500}
    runs = {}
    for reset in ("earliest", "latest"):
        endpoint = _endpoint(tmp_path, "KAFKA", tansu.url,
                             {"topic": topic, "consumergroup": f"g-{reset}-{_uid()}",
                              "autooffsetreset": reset}, override=tuning)
        assert endpoint.options["autooffsetreset"] == reset
        consumer = REGISTRY.consumer(for_adapter(endpoint))
        assert isinstance(consumer, KafkaConsumer)
        await consumer.connect()
        try:
            if reset == "latest":
                await _nothing_arrives(consumer, 2.0)
                await _kafka_backlog(tansu, topic, [b"new"])
            delivery = await _read(consumer)
            runs[reset] = delivery.message.body_bytes()
            await delivery.ack()
        finally:
            await consumer.aclose()
    assert runs == {"earliest": b"old-1", "latest": b"new"}


@asyncio_test
async def test_kafka_headers_added_to_every_record_own_header_wins(tansu: Tansu,
                                                                   tmp_path: Path) -> None:
    topic = await _kafka_topic(tansu)
    endpoint = _endpoint(tmp_path, "KAFKA", tansu.url,
                         {"topic": topic, "headers": {"x-site": "eu", "x-team": "ops"}},
                         usage="producer")
    producer = REGISTRY.producer(for_adapter(endpoint))
    assert isinstance(producer, KafkaProducer)
    await producer.connect()
    try:
        records = [NativeMessage("KAFKA", {"topic": topic}, payload=b"plain"),
                   NativeMessage("KAFKA", {"topic": topic,
                                           "headers": [{"name": "X-Site", "value": "us"}]},
                                 payload=b"own")]
        assert all(o.delivered for o in await write(producer, records))
    finally:
        await producer.aclose()
    consumer = KafkaConsumer(EndpointSettings(tansu.url, options={
        "topics": [topic], "consumergroup": f"g-{_uid()}", "session_timeout_ms": 3000,
        "heartbeat_interval_ms": 500}))
    await consumer.connect()
    try:
        seen = []
        for _ in records:
            delivery = await _read(consumer)
            seen.append(sorted((p["name"], p["value"])
                               for p in delivery.message.fields.get("headers", [])))
            await delivery.ack()
    finally:
        await consumer.aclose()
    assert seen == [[("x-site", "eu"), ("x-team", "ops")],
                    [("X-Site", "us"), ("x-team", "ops")]]


@asyncio_test
async def test_kafka_acks_reach_the_client(tansu: Tansu, tmp_path: Path) -> None:
    # acks=0 cannot be told apart on a healthy broker by what arrives; what differs is
    # the produce request the client sends, so the started client's setting is checked.
    for acks, expected in ((0, 0), (1, 1), ("all", -1), (-1, -1)):
        endpoint = _endpoint(tmp_path, "KAFKA", tansu.url, {"topic": "t", "acks": acks},
                             usage="producer")
        producer = REGISTRY.producer(for_adapter(endpoint))
        assert isinstance(producer, KafkaProducer)
        await producer.connect()
        try:
            client = producer._client
            assert client is not None
            assert client._sender._acks == expected
        finally:
            await producer.aclose()


def test_kafka_partition_and_key_are_record_defaults(tmp_path: Path) -> None:
    endpoint = _endpoint(tmp_path, "KAFKA", "kafka://127.0.0.1:9092",
                         {"topic": "t", "key": "k", "partition": 2}, usage="producer")
    assert REGISTRY.output_defaults(for_adapter(endpoint)) == {
        "topic": "t", "key": "k", "partition": 2}


# ====================================================================== MQTT


def _mqtt_consumer(url: str, topic: str, client_id: str, **options: Any) -> MqttConsumer:
    options.setdefault("topicfilter", [topic])
    return MqttConsumer(EndpointSettings(url, client_id=client_id, options=options))


async def _mqtt_send(url: str, *records: NativeMessage, **options: Any) -> None:
    producer = MqttProducer(EndpointSettings(url, options=options))
    await producer.connect()
    try:
        assert all(o.delivered for o in await write(producer, records))
    finally:
        await producer.aclose()


def _mqtt(topic: str, payload: bytes, **fields: Any) -> NativeMessage:
    return NativeMessage("MQTT/5.0", {"topic_name": topic, "qos": 1, **fields},
                         payload=payload)


@asyncio_test
async def test_mqtt_retain_option_retains_records_without_their_own_flag(
    mosquitto: Mosquitto, tmp_path: Path
) -> None:
    base = f"xrgw/opt/retain/{_uid()}"
    endpoint = _endpoint(tmp_path, "MQTT/5.0", mosquitto.url, {"retain": True},
                         usage="producer")
    producer = REGISTRY.producer(for_adapter(endpoint))
    await producer.connect()
    try:
        outcomes = await write(producer, [_mqtt(f"{base}/a", b"kept"),
                                         _mqtt(f"{base}/b", b"not kept", retain=False)])
        assert all(o.delivered for o in outcomes)
    finally:
        await producer.aclose()
    consumer = _mqtt_consumer(mosquitto.url, f"{base}/+", f"c-{_uid()}", cleanstart=True)
    await consumer.connect()
    try:
        delivery = await _read(consumer)
        assert delivery.message.fields["topic_name"] == f"{base}/a"
        await delivery.ack()
        await _nothing_arrives(consumer, 1.0)
    finally:
        await consumer.aclose()
    await _mqtt_send(mosquitto.url, _mqtt(f"{base}/a", b"", retain=True))  # clear it


@asyncio_test
async def test_mqtt_retainhandling_2_sends_no_retained_message_at_subscribe(
    mosquitto: Mosquitto,
) -> None:
    topic = f"xrgw/opt/rh/{_uid()}"
    await _mqtt_send(mosquitto.url, _mqtt(topic, b"retained", retain=True))
    try:
        got = {}
        for handling in (0, 2):
            consumer = _mqtt_consumer(mosquitto.url, topic, f"c-{_uid()}",
                                      retainhandling=handling, cleanstart=True)
            await consumer.connect()
            try:
                try:
                    delivery = await _read(consumer, 1.5)
                except TimeoutError:
                    got[handling] = None
                else:
                    got[handling] = delivery.message.body_bytes()
                    await delivery.ack()
            finally:
                await consumer.aclose()
        assert got == {0: b"retained", 2: None}
    finally:
        await _mqtt_send(mosquitto.url, _mqtt(topic, b"", retain=True))


@asyncio_test
async def test_mqtt_retainaspublished_keeps_the_retain_flag_of_live_messages(
    mosquitto: Mosquitto,
) -> None:
    topic = f"xrgw/opt/rap/{_uid()}"
    flags = {}
    try:
        for keep in (False, True):
            consumer = _mqtt_consumer(mosquitto.url, topic, f"c-{_uid()}",
                                      retainaspublished=keep, retainhandling=2,
                                      cleanstart=True)
            await consumer.connect()
            try:
                await _mqtt_send(mosquitto.url, _mqtt(topic, b"live", retain=True))
                delivery = await _read(consumer)
                flags[keep] = delivery.message.fields["retain"]
                await delivery.ack()
            finally:
                await consumer.aclose()
    finally:
        await _mqtt_send(mosquitto.url, _mqtt(topic, b"", retain=True))
    assert flags == {False: False, True: True}


@asyncio_test
async def test_mqtt_cleanstart_forgets_what_arrived_while_away(mosquitto: Mosquitto,
                                                               tmp_path: Path) -> None:
    kept = {}
    for clean in (False, True):
        topic = f"xrgw/opt/clean/{_uid()}"
        endpoint = _endpoint(tmp_path, "MQTT/5.0", mosquitto.url,
                             {"topicfilter": topic, "cleansession": clean})
        assert endpoint.options["cleanstart"] is clean  # the 3.1.1 spelling is the same
        client_id = f"c-{_uid()}"
        first = MqttConsumer(EndpointSettings(mosquitto.url, client_id=client_id,
                                              options=endpoint.options))
        await first.connect()
        await first.aclose()
        await _mqtt_send(mosquitto.url, _mqtt(topic, b"while away"))
        second = MqttConsumer(EndpointSettings(mosquitto.url, client_id=client_id,
                                               options=endpoint.options))
        await second.connect()
        try:
            try:
                delivery = await _read(second, 1.5)
            except TimeoutError:
                kept[clean] = None
            else:
                kept[clean] = delivery.message.body_bytes()
                await delivery.ack()
        finally:
            await second.aclose()
    assert kept == {False: b"while away", True: None}


# ====================================================================== HTTP


@asyncio_test
async def test_http_method_headers_and_query_options(tmp_path: Path) -> None:
    receiver = Receiver()
    await receiver.start()
    try:
        endpoint = _endpoint(
            tmp_path, "HTTP", f"{receiver.url}/hook",
            {"method": "PUT", "headers": [{"name": "X-Site", "value": "eu"}],
             "query": {"src": "xrgw", "mode": "a b"}},
            usage="producer")
        producer = REGISTRY.producer(for_adapter(endpoint))
        assert isinstance(producer, HttpProducer)
        await producer.connect()
        try:
            records = [
                NativeMessage("HTTP", {}, {"n": 1}),
                NativeMessage("HTTP", {"method": "PATCH", "query": {"src": "own"},
                                       "headers": [{"name": "x-site", "value": "us"}]},
                              {"n": 2}),
            ]
            assert all(o.delivered for o in await write(producer, records))
        finally:
            await producer.aclose()
        first, second = receiver.seen
        assert (first[0], first[1]) == ("PUT", "/hook?src=xrgw&mode=a%20b")
        assert dict(first[2])["X-Site"] == "eu"
        assert (second[0], second[1]) == ("PATCH", "/hook?src=own&mode=a%20b")
        assert [v for k, v in second[2] if k.lower() == "x-site"] == ["us"]
    finally:
        await receiver.stop()
