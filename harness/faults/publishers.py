"""Numbered messages (`{"seq": N}`) into every source protocol, each publish confirmed by
the broker (PUBACK, acks=all, PubAck, accepted disposition, HTTP 202), spread over
LANES addresses so that the route's ordered lanes run in parallel."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

import aiohttp
import nats
import paho.mqtt.client as paho
from aiokafka import AIOKafkaProducer  # type: ignore[import-untyped]
from nats.js.api import PubAck
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion

from adapters.amqp import AmqpProducer
from gateway.ports import EndpointSettings, write
from gateway.protocols import AMQP
from gateway.record import NativeMessage
from harness.brokers import Mosquitto, Tansu

#: Seconds a test publisher waits for the broker to accept a message.
PUBLISHER_PATIENCE = 120

#: Addresses (MQTT topics, Kafka keys, NATS subjects, AMQP subjects, HTTP paths) the
#: messages are spread over: `seq % LANES`.
LANES = 32


def body(seq: int) -> bytes:
    return json.dumps({"seq": seq}).encode()


def publish(mqtt: Mosquitto, run: str, seqs: range,
            topic: Callable[[int], str] | None = None) -> float:
    """Publish `{"seq": N}` at QoS 1 on `topic(N)` (default `/faults/<run>/<N % LANES>`)
    with a window of 512 unacknowledged PUBLISHes; return when every PUBACK is in
    (seconds taken)."""
    began = time.monotonic()
    topic = topic or (lambda seq: f"/faults/{run}/{seq % LANES}")
    client = paho.Client(CallbackAPIVersion.VERSION2, client_id=f"faults-pub-{uuid.uuid4().hex}",
                         protocol=MQTTProtocolVersion.MQTTv311)
    client.max_inflight_messages_set(512)
    client.max_queued_messages_set(0)  # unlimited: publish() queues beyond the window
    client.connect(mqtt.host, mqtt.port, keepalive=30)
    client.loop_start()
    try:
        deadline = time.monotonic() + 10
        while not client.is_connected():
            if time.monotonic() > deadline:
                raise AssertionError("publisher: no CONNACK")
            time.sleep(0.01)
        # In chunks: paho refuses (ERR_QUEUE_SIZE) to hold more than 65,535 messages.
        for start in range(0, len(seqs), 20_000):
            infos = [client.publish(topic(seq), body(seq), qos=1)
                     for seq in seqs[start:start + 20_000]]
            for info in infos:
                info.wait_for_publish(60)
                assert info.is_published(), "publisher: no PUBACK"
    finally:
        client.disconnect()
        client.loop_stop()
    return time.monotonic() - began


async def publish_kafka(tansu: Tansu, topic: str, run: str, seqs: range, *,
                        chunk: int = 1000, pause: float = 0.0) -> None:
    """`{"seq": N}` keyed by lane (spread over the topic's partitions), acks=all;
    `chunk` at a time, `pause` seconds after each (a stream that spans a fault)."""
    producer = AIOKafkaProducer(bootstrap_servers=tansu.bootstrap_servers, acks="all",
                                linger_ms=5)
    await producer.start()
    try:
        pending: list[asyncio.Future[object]] = []
        for seq in seqs:
            pending.append(await producer.send(topic, body(seq),
                                               key=str(seq % LANES).encode()))
            if len(pending) >= chunk:
                await asyncio.gather(*pending)
                pending.clear()
                if pause:
                    await asyncio.sleep(pause)
        await asyncio.gather(*pending)
    finally:
        await producer.stop()


async def publish_jetstream(url: str, run: str, seqs: range) -> None:
    """`{"seq": N}` on `faults.in.<run>.<lane>`, each confirmed by a PubAck."""
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        pending: list[asyncio.Future[PubAck]] = []
        for seq in seqs:
            pending.append(await js.publish_async(f"faults.in.{run}.{seq % LANES}", body(seq)))
            if len(pending) >= 1000:
                await asyncio.gather(*pending)
                pending.clear()
        await asyncio.gather(*pending)
    finally:
        await nc.close()


async def publish_amqp(url: str, node: str, run: str, seqs: range) -> None:
    """`{"seq": N}` with subject `/faults/<run>/<lane>`, each accepted by RabbitMQ. The
    producer waits as long as RabbitMQ needs (its defaults, 10 s for a connection or a
    disposition, are a gateway's; a loaded machine with the gateway just killed beside
    it can take longer, and a test publisher that gives up fails the scenario)."""
    producer = AmqpProducer(EndpointSettings(url, options={
        "node": node, "connect_timeout": PUBLISHER_PATIENCE,
        "publish_timeout": PUBLISHER_PATIENCE}))
    await producer.connect()
    try:
        for start in range(seqs.start, seqs.stop, 500):
            batch = [NativeMessage(AMQP, {"properties": {"subject": f"/faults/{run}/{s % LANES}"}},
                                   {"seq": s})
                     for s in range(start, min(start + 500, seqs.stop))]
            outcomes = await write(producer, batch)
            assert all(o.delivered for o in outcomes), [o.reason for o in outcomes][:3]
    finally:
        await producer.aclose()


@dataclass
class HttpStats:
    accepted: int = 0  # 202s, one per sequence number in the end
    retried: int = 0  # 503s, 504s and connection errors, each followed by a retry
    rejected: list[str] = field(default_factory=list)  # anything else: a failure


async def post_http(base: str, run: str, seqs: range, stats: HttpStats,
                    concurrency: int = 32) -> None:
    """POST `{"seq": N}` to `<base>/faults/<run>/<lane>`, `concurrency` at a time, each
    until the gateway answers 202 (503, 504 and connection errors are retried, as a
    webhook sender does); anything else is recorded in `stats.rejected`."""
    todo = iter(seqs)
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(timeout=timeout) as session:

        async def worker() -> None:
            for seq in todo:
                while True:
                    try:
                        async with session.post(
                                f"{base}/faults/{run}/{seq % LANES}", data=body(seq),
                                headers={"Content-Type": "application/json",
                                         "Idempotency-Key": f"{run}-{seq}"}) as response:
                            status = response.status
                            await response.read()
                    except (aiohttp.ClientError, TimeoutError):
                        status = 0
                    if status == 202:
                        stats.accepted += 1
                        break
                    if status in (0, 503, 504):
                        stats.retried += 1
                        await asyncio.sleep(0.05)
                        continue
                    stats.rejected.append(f"seq {seq}: HTTP {status}")
                    break

        await asyncio.gather(*(worker() for _ in range(concurrency)))
