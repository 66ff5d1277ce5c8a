"""Smoke tests: a real round trip through each broker with the client library the
gateway's adapter will use. They also pin down the client/broker behaviour the adapters
rely on (manual acks, redelivery, headers/properties, addresses, consumer groups).
"""

from __future__ import annotations

import asyncio
import queue
import uuid
from typing import Any

import aiomqtt
import nats
import paho.mqtt.client as paho
import pytest
from aiokafka import (  # type: ignore[import-untyped]  # no py.typed
    AIOKafkaConsumer,
    AIOKafkaProducer,
    TopicPartition,
)
from aiokafka.admin import AIOKafkaAdminClient, NewTopic  # type: ignore[import-untyped]
from nats.js.api import AckPolicy, ConsumerConfig, StreamConfig
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from proton import Message
from proton.utils import BlockingConnection
from support import asyncio_test

from harness.brokers import Mosquitto, NatsServer, RabbitMQ, Tansu

pytestmark = pytest.mark.integration

TIMEOUT = 10.0




def _mqtt_props(packet_type: int, **values: Any) -> Properties:
    """paho MQTT 5 properties, e.g. ``_mqtt_props(PacketTypes.PUBLISH, UserProperty=[...])``.

    (paho's Properties is untyped and sets its attributes dynamically.)
    """
    props = Properties(packet_type)  # type: ignore[no-untyped-call]
    for name, value in values.items():
        setattr(props, name, value)
    return props


def _uid() -> str:
    return uuid.uuid4().hex[:10]


# ====================================================================== MQTT


@asyncio_test
async def test_mqtt5_aiomqtt_qos1_user_properties(mosquitto: Mosquitto) -> None:
    topic = f"xrgw/smoke/{_uid()}"
    props = _mqtt_props(
        PacketTypes.PUBLISH,
        UserProperty=[("ce-type", "com.example.smoke"), ("trace", "1")],
        ContentType="application/json",
    )
    async with aiomqtt.Client(
        mosquitto.host,
        mosquitto.port,
        identifier=f"xrgw-aiomqtt-{_uid()}",
        protocol=aiomqtt.ProtocolVersion.V5,
    ) as client:
        await client.subscribe(topic, qos=1)
        await client.publish(topic, b'{"n": 1}', qos=1, properties=props)
        async with asyncio.timeout(TIMEOUT):
            message = await anext(aiter(client.messages))
    assert message.topic.matches(topic)
    assert message.qos == 1
    assert message.payload == b'{"n": 1}'
    assert message.properties is not None
    received = message.properties.json()  # type: ignore[no-untyped-call]  # {name: value}
    # User properties arrive as an ordered list of (name, value) pairs (names may repeat).
    assert received["UserProperty"] == [("ce-type", "com.example.smoke"), ("trace", "1")]
    assert received["ContentType"] == "application/json"


class _PahoSession:
    """A paho-mqtt 2 MQTT 5 client with a persistent session (manual acks by default).

    paho runs its network loop in its own thread (loop_start); callbacks push into a
    thread-safe queue that the test reads with a timeout.
    """

    def __init__(self, port: int, client_id: str, *, manual_ack: bool = True) -> None:
        self.port = port
        self.client = paho.Client(
            callback_api_version=CallbackAPIVersion.VERSION2,
            client_id=client_id,
            protocol=MQTTProtocolVersion.MQTTv5,
            manual_ack=manual_ack,  # True: PUBACK only when we call client.ack(mid, qos)
        )
        self.messages: queue.Queue[paho.MQTTMessage] = queue.Queue()
        self.connacks: queue.Queue[tuple[bool, int]] = queue.Queue()
        self.subacks: queue.Queue[list[int]] = queue.Queue()
        self.client.on_message = self._on_message
        self.client.on_connect = self._on_connect
        self.client.on_subscribe = self._on_subscribe

    def _on_message(self, client: paho.Client, userdata: Any, msg: paho.MQTTMessage) -> None:
        self.messages.put(msg)

    def _on_connect(
        self, client: paho.Client, userdata: Any, flags: Any, reason: Any, props: Any
    ) -> None:
        self.connacks.put((bool(flags.session_present), int(reason.value)))

    def _on_subscribe(
        self, client: paho.Client, userdata: Any, mid: int, reasons: Any, props: Any
    ) -> None:
        self.subacks.put([int(r.value) for r in reasons])

    def subscribe(self, topic: str) -> None:
        """Subscribe at QoS 1 and wait for the SUBACK."""
        result, _mid = self.client.subscribe(topic, qos=1)
        assert result == paho.MQTT_ERR_SUCCESS
        assert self.subacks.get(timeout=TIMEOUT) == [1]  # granted QoS 1

    def connect(self) -> bool:
        """Connect with clean_start=False + session expiry; return session_present."""
        props = _mqtt_props(PacketTypes.CONNECT, SessionExpiryInterval=300)
        self.client.connect(
            "127.0.0.1", self.port, keepalive=30, clean_start=False, properties=props
        )
        self.client.loop_start()
        session_present, reason = self.connacks.get(timeout=TIMEOUT)
        assert reason == 0, f"CONNACK reason {reason}"
        return session_present

    def disconnect(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()

    def next_message(self) -> paho.MQTTMessage:
        return self.messages.get(timeout=TIMEOUT)


def test_mqtt5_paho_manual_ack_redelivery_after_reconnect(mosquitto: Mosquitto) -> None:
    topic = f"xrgw/manual-ack/{_uid()}"
    client_id = f"xrgw-paho-{_uid()}"

    # A publisher on its own connection (auto ack is irrelevant for publishing).
    publisher = paho.Client(
        callback_api_version=CallbackAPIVersion.VERSION2,
        client_id=f"xrgw-pub-{_uid()}",
        protocol=MQTTProtocolVersion.MQTTv5,
    )
    publisher.connect("127.0.0.1", mosquitto.port)
    publisher.loop_start()

    def publish(payload: bytes) -> None:
        info = publisher.publish(topic, payload, qos=1)
        info.wait_for_publish(timeout=TIMEOUT)
        assert info.is_published()

    try:
        # 1st connection: new session (clean_start=False on an unknown client id).
        session = _PahoSession(mosquitto.port, client_id)
        assert session.connect() is False
        session.subscribe(topic)
        publish(b"one")
        first = session.next_message()
        assert (first.payload, first.qos, first.dup) == (b"one", 1, False)
        # ... and do NOT ack it; drop the connection.
        session.disconnect()

        # 2nd connection, same client id: the session is resumed and the broker resends
        # the un-acked QoS 1 PUBLISH with DUP set.
        session = _PahoSession(mosquitto.port, client_id)
        assert session.connect() is True
        again = session.next_message()
        assert (again.payload, again.qos, again.dup) == (b"one", 1, True)
        assert session.client.ack(again.mid, again.qos) == paho.MQTT_ERR_SUCCESS
        session.disconnect()

        # 3rd connection: acked means gone; the next message is a new one.
        session = _PahoSession(mosquitto.port, client_id)
        assert session.connect() is True
        publish(b"two")
        nxt = session.next_message()
        assert (nxt.payload, nxt.dup) == (b"two", False)
        session.client.ack(nxt.mid, nxt.qos)
        session.disconnect()
    finally:
        publisher.disconnect()
        publisher.loop_stop()


def test_mqtt_offline_queue_beyond_1000_survives_restart() -> None:
    """Own broker: >1000 QoS 1 messages queued for an offline persistent session survive
    a broker restart (needs ``max_queued_messages 0`` and persistence in the harness)."""
    count = 1500
    topic = "xrgw/offline"
    with Mosquitto() as broker:
        session = _PahoSession(broker.port, "xrgw-offline", manual_ack=False)
        session.connect()
        session.subscribe(topic)
        session.disconnect()

        publisher = paho.Client(
            callback_api_version=CallbackAPIVersion.VERSION2,
            client_id="xrgw-offline-pub",
            protocol=MQTTProtocolVersion.MQTTv5,
        )
        publisher.max_queued_messages_set(0)
        publisher.connect("127.0.0.1", broker.port)
        publisher.loop_start()
        infos = [publisher.publish(topic, str(i).encode(), qos=1) for i in range(count)]
        for info in infos:
            info.wait_for_publish(timeout=TIMEOUT)
        publisher.disconnect()
        publisher.loop_stop()

        broker.restart()  # SIGTERM -> mosquitto writes mosquitto.db; same port on start

        session = _PahoSession(broker.port, "xrgw-offline", manual_ack=False)
        assert session.connect() is True  # session survived the restart
        got = [int(session.next_message().payload) for _ in range(count)]
        session.disconnect()
        assert got == list(range(count))


# ====================================================================== NATS


@asyncio_test
async def test_nats_core_pubsub_headers(nats_server: NatsServer) -> None:
    nc = await nats.connect(nats_server.url)
    try:
        subject = f"xrgw.smoke.{_uid()}"
        sub = await nc.subscribe(subject)
        await nc.publish(subject, b"hello", headers={"ce-type": "com.example.smoke"})
        msg = await sub.next_msg(timeout=TIMEOUT)
        assert msg.data == b"hello"
        assert msg.headers == {"ce-type": "com.example.smoke"}
    finally:
        await nc.close()


@asyncio_test
async def test_nats_jetstream_durable_push_explicit_ack(nats_server: NatsServer) -> None:
    nc = await nats.connect(nats_server.url)
    try:
        js = nc.jetstream()
        stream = f"XRGW_{_uid()}"
        subject = f"{stream.lower()}.orders"
        await js.add_stream(StreamConfig(name=stream, subjects=[f"{stream.lower()}.>"]))
        ack = await js.publish(subject, b"order-1", headers={"ce-id": "1"})
        assert (ack.stream, ack.seq) == (stream, 1)

        sub = await js.subscribe(
            subject,
            durable="xrgw-durable",
            stream=stream,
            manual_ack=True,
            config=ConsumerConfig(ack_policy=AckPolicy.EXPLICIT, ack_wait=30),
        )
        msg = await sub.next_msg(timeout=TIMEOUT)
        assert msg.data == b"order-1"
        assert msg.headers == {"ce-id": "1"}
        assert msg.metadata.num_delivered == 1
        # NAK -> redelivered at once, delivery count 2; then ACK (double ack = confirmed).
        await msg.nak()
        msg = await sub.next_msg(timeout=TIMEOUT)
        assert msg.metadata.num_delivered == 2
        await msg.ack_sync(timeout=TIMEOUT)

        info = await js.consumer_info(stream, "xrgw-durable")
        assert info.num_ack_pending == 0
        assert info.delivered.stream_seq == 1
        await sub.unsubscribe()
    finally:
        await nc.close()


@asyncio_test
async def test_nats_jetstream_survives_restart() -> None:
    """Own server instance (restart must not disturb the shared one)."""
    with NatsServer() as server:
        nc = await nats.connect(server.url)
        js = nc.jetstream()
        await js.add_stream(StreamConfig(name="XRGW_RESTART", subjects=["restart.>"]))
        for i in range(3):
            await js.publish("restart.x", f"m{i}".encode())
        await nc.close()

        port_before = server.port
        await asyncio.to_thread(server.restart)
        assert server.port == port_before

        nc = await nats.connect(server.url)
        try:
            js = nc.jetstream()
            info = await js.stream_info("XRGW_RESTART")
            assert info.state.messages == 3
            sub = await js.pull_subscribe("restart.>", durable="after-restart")
            msgs = await sub.fetch(3, timeout=TIMEOUT)
            assert [m.data for m in msgs] == [b"m0", b"m1", b"m2"]
            for m in msgs:
                await m.ack()
        finally:
            await nc.close()


# ====================================================================== AMQP 1.0


def _amqp_round_trip(url: str, address: str, body: str, props: dict[str, Any]) -> Message:
    """Send one message to ``address`` and receive it back, all on this one thread.

    BlockingConnection drives its own proton Container on the calling thread, so every
    proton object here is created, used and closed on that same thread.
    """
    conn = BlockingConnection(url, timeout=TIMEOUT, allowed_mechs="PLAIN")
    try:
        sender = conn.create_sender(address)
        sender.send(Message(body=body, properties=props, durable=True, subject="smoke"))
        receiver = conn.create_receiver(address, credit=1)
        msg = receiver.receive(timeout=TIMEOUT)
        receiver.accept()
        return msg
    finally:
        conn.close()


@asyncio_test
async def test_amqp10_proton_send_receive_application_properties(rabbitmq: RabbitMQ) -> None:
    url = rabbitmq.login_url
    # RabbitMQ 3.x AMQP 1.0 plugin ("v1" addresses): /queue/<name> declares the queue
    # (durable) if missing, and works as both target and source.
    address = f"/queue/xrgw-smoke-{_uid()}"
    props = {"ce_type": "com.example.smoke", "count": 3}
    msg = await asyncio.to_thread(_amqp_round_trip, url, address, "hello amqp", props)
    assert msg.body == "hello amqp"
    app_props: object = msg.properties  # proton declares the attribute as None-typed
    assert app_props == props
    assert msg.subject == "smoke"


# ====================================================================== Kafka


@asyncio_test
async def test_kafka_aiokafka_headers_consumer_group_commit(tansu: Tansu) -> None:
    topic = f"xrgw-smoke-{_uid()}"
    group = f"xrgw-group-{_uid()}"
    admin = AIOKafkaAdminClient(bootstrap_servers=tansu.bootstrap_servers)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
    finally:
        await admin.close()

    producer = AIOKafkaProducer(bootstrap_servers=tansu.bootstrap_servers)
    await producer.start()
    try:
        for i in range(3):
            await producer.send_and_wait(
                topic, f"v{i}".encode(), key=b"k", headers=[("ce_type", b"com.example.smoke")]
            )
    finally:
        await producer.stop()

    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=tansu.bootstrap_servers,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        # Tansu answers the first JoinGroup only after session_timeout/2 (5 s with the
        # 10 s default); 3 s keeps the join at ~1.5 s.
        session_timeout_ms=3000,
        heartbeat_interval_ms=500,
    )
    await consumer.start()
    try:
        received: list[Any] = []  # aiokafka ConsumerRecord
        async with asyncio.timeout(TIMEOUT * 2):
            # Count arrivals; don't trust end offsets (Tansu 0.6 reports them one short).
            while len(received) < 3:
                received.append(await consumer.getone())
        assert [r.value for r in received] == [b"v0", b"v1", b"v2"]
        assert received[0].key == b"k"
        assert list(received[0].headers) == [("ce_type", b"com.example.smoke")]
        await consumer.commit()
        tp = TopicPartition(topic, 0)
        assert await consumer.committed(tp) == received[-1].offset + 1
    finally:
        await consumer.stop()
