"""Shadow mode (`routes[].observe`) against real brokers, one case per source kind: MQTT,
Kafka, NATS core, NATS JetStream and HTTP ingress.

Each case runs the gateway in process with an observing route from the source to a NATS
output, with a NATS dead letter, next to a *real* consumer of the same endpoint that
uses exactly the settings the endpoint's configuration names (the MQTT client id, the
Kafka consumer group, the NATS queue group, the JetStream durable): an observer that
reused them would take messages away from it. Then it checks that

- the real consumer still receives every message sent;
- the gateway published nothing (output and dead letter stay empty);
- `/conformance` counts exactly what was sent (received = matched = rendered, no dead
  letters), and the Prometheus metrics say the same.

Kafka observers start at the latest offset, so every case first sends probe messages
until the observer has seen one, then the counted ones; probes are counted on both sides.
"""

from __future__ import annotations

import asyncio
import json
import queue
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import nats
import paho.mqtt.client as paho
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer  # type: ignore[import-untyped]
from aiokafka.admin import AIOKafkaAdminClient, NewTopic  # type: ignore[import-untyped]
from nats.js.api import ConsumerConfig, StreamConfig
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion
from proton import Message, Terminus
from proton import Timeout as ProtonTimeout
from proton.reactor import Copy
from proton.utils import BlockingConnection

from adapters.registry import REGISTRY
from gateway.config import load_config
from gateway.daemon import Gateway
from harness.brokers import free_port

TIMEOUT = 30.0
COUNT = 25
PROTOCOL = {"mqtt": "MQTT/5.0", "kafka": "KAFKA", "nats": "NATS", "jetstream": "NATS",
            "http": "HTTP"}
XID = "/messagegroups/observed/messages/reading"


def _address(kind: str, sfx: str) -> dict[str, str]:
    return {"mqtt": {"topic_name": f"obs/{sfx}/{{device}}"},
            "kafka": {"topic": f"obs-{sfx}", "key": "{device}"},
            "nats": {"subject": f"obs.{sfx}.{{device}}"},
            "jetstream": {"subject": f"objs.{sfx}.{{device}}"},
            "http": {"path": f"/obs/{sfx}/{{device}}", "method": "POST"}}[kind]


def _config(tmp: Path, kind: str, sfx: str, brokers: dict[str, Any]) -> Path:
    doc = {
        "$schema": "https://cloudevents.io/schemas/registry", "specversion": "1.0-rc4",
        "endpoints": {
            "source": {"usage": ["consumer"], "protocol": PROTOCOL[kind],
                       "protocoloptions": {}, "messagegroups": ["#/messagegroups/observed"]},
            "out": {"usage": ["producer"], "protocol": "NATS",
                    "protocoloptions": {"subject": f"out.{sfx}"}},
            "dead": {"usage": ["producer"], "protocol": "NATS",
                     "protocoloptions": {"subject": f"dead.{sfx}"}},
        },
        "messagegroups": {"observed": {"envelope": "CloudEvents/1.0", "messages": {
            "reading": {
                "protocol": PROTOCOL[kind], "protocoloptions": _address(kind, sfx),
                "envelope": "CloudEvents/1.0",
                "envelopemetadata": {
                    "type": {"value": "com.example.reading"},
                    "source": {"type": "uritemplate", "value": "/dev/{device}"}}}}}},
    }
    (tmp / "observe.xreg.json").write_text(json.dumps(doc))
    # The real deployment's settings: the observer must not use them.
    source: dict[str, Any] = {
        "mqtt": {"uri": brokers["mqtt"], "client_id": f"real-{sfx}"},
        "kafka": {"uri": brokers["kafka"], "options": {
            "consumergroup": f"real-{sfx}", "session_timeout_ms": 3000,
            "heartbeat_interval_ms": 500}},
        "nats": {"uri": brokers["nats"], "options": {"queuegroup": f"real-{sfx}"}},
        "jetstream": {"uri": brokers["nats"], "options": {
            "stream": f"OBS{sfx}", "durable": f"real-{sfx}"}},
        "http": {"uri": f"http://127.0.0.1:{free_port()}"},
    }[kind]
    config = {"definitions": ["observe.xreg.json"],
              "routes": [{"from": "source", "to": ["out"], "observe": True}],
              "deadletter": "dead", "admin": {"listen": "127.0.0.1:0"},
              "log": {"level": "warning"}, "shutdown": {"grace": "1s"},
              "endpoints": {"source": source, "out": {"uri": brokers["nats"]},
                            "dead": {"uri": brokers["nats"]}}}
    path = tmp / "gateway.yaml"
    path.write_text(json.dumps(config))
    return path


# -- the real consumers ---------------------------------------------------------------------


class RealConsumer:
    """The endpoint's real consumer, with the endpoint's own settings."""

    received: int = 0

    async def start(self) -> None: ...

    async def count(self, expected: int) -> int:
        """Messages received once `expected` arrived or the timeout passed."""
        return self.received

    async def stop(self) -> None: ...


class MqttReal(RealConsumer):
    def __init__(self, port: int, sfx: str) -> None:
        self.got: queue.Queue[Any] = queue.Queue()
        self.client = paho.Client(CallbackAPIVersion.VERSION2, client_id=f"real-{sfx}",
                                  protocol=MQTTProtocolVersion.MQTTv5)
        self.client.on_message = lambda _c, _u, msg: self.got.put(msg)
        self.disconnects = 0
        self.client.on_disconnect = self._disconnected
        self.port, self.sfx = port, sfx

    def _disconnected(self, *args: Any) -> None:
        self.disconnects += 1

    async def start(self) -> None:
        self.client.connect("127.0.0.1", self.port)
        self.client.loop_start()
        self.client.subscribe(f"obs/{self.sfx}/+", qos=1)
        await asyncio.sleep(0.3)

    async def count(self, expected: int) -> int:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + TIMEOUT
        while self.got.qsize() < expected and loop.time() < deadline:
            await asyncio.sleep(0.05)
        assert self.disconnects == 0, "the observer took over the real consumer's client id"
        return self.got.qsize()

    async def stop(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


class KafkaReal(RealConsumer):
    def __init__(self, bootstrap: str, sfx: str) -> None:
        self.consumer = AIOKafkaConsumer(
            f"obs-{sfx}", bootstrap_servers=bootstrap, group_id=f"real-{sfx}",
            auto_offset_reset="earliest", session_timeout_ms=3000, heartbeat_interval_ms=500)

    async def start(self) -> None:
        await self.consumer.start()

    async def count(self, expected: int) -> int:
        out = 0
        loop = asyncio.get_running_loop()
        deadline = loop.time() + TIMEOUT
        while out < expected and loop.time() < deadline:
            for records in (await self.consumer.getmany(timeout_ms=300)).values():
                out += len(records)
        return out

    async def stop(self) -> None:
        await self.consumer.stop()


class NatsReal(RealConsumer):
    def __init__(self, url: str, sfx: str, jetstream: bool) -> None:
        self.url, self.sfx, self.jetstream = url, sfx, jetstream
        self.seen = 0
        self.nc: Any = None

    async def start(self) -> None:
        self.nc = await nats.connect(self.url)
        if self.jetstream:
            js = self.nc.jetstream()
            await js.add_stream(StreamConfig(name=f"OBS{self.sfx}",
                                             subjects=[f"objs.{self.sfx}.>"]))
            await js.add_consumer(f"OBS{self.sfx}", ConsumerConfig(
                durable_name=f"real-{self.sfx}", filter_subject=f"objs.{self.sfx}.>"))
            return

        async def seen(_msg: Any) -> None:
            self.seen += 1

        await self.nc.subscribe(f"obs.{self.sfx}.*", queue=f"real-{self.sfx}", cb=seen)
        await self.nc.flush()

    async def count(self, expected: int) -> int:
        if not self.jetstream:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + TIMEOUT
            while self.seen < expected and loop.time() < deadline:
                await asyncio.sleep(0.05)
            return self.seen
        js = self.nc.jetstream()
        sub = await js.pull_subscribe(f"objs.{self.sfx}.>", durable=f"real-{self.sfx}",
                                      stream=f"OBS{self.sfx}")
        got = 0
        while got < expected:
            try:
                msgs = await sub.fetch(expected - got, timeout=5)
            except TimeoutError:
                break
            for msg in msgs:
                await msg.ack()
            got += len(msgs)
        return got

    async def durables(self) -> list[str]:
        infos = await self.nc.jetstream().consumers_info(f"OBS{self.sfx}")
        return sorted(i.config.durable_name for i in infos if i.config.durable_name)

    async def stop(self) -> None:
        await self.nc.close()


# -- sending ------------------------------------------------------------------------------


class Sender:
    def __init__(self, kind: str, sfx: str, brokers: dict[str, Any], gateway: Gateway) -> None:
        self.kind, self.sfx, self.brokers, self.gateway = kind, sfx, brokers, gateway
        self.sent = 0

    async def send(self, count: int) -> None:
        bodies = [json.dumps({"n": self.sent + i}).encode() for i in range(count)]
        devices = [f"dev{(self.sent + i) % 3}" for i in range(count)]
        self.sent += count
        if self.kind == "mqtt":
            await asyncio.to_thread(self._mqtt, bodies, devices)
        elif self.kind == "kafka":
            producer = AIOKafkaProducer(bootstrap_servers=self.brokers["kafka_bootstrap"])
            await producer.start()
            try:
                for body, dev in zip(bodies, devices, strict=True):
                    await producer.send_and_wait(f"obs-{self.sfx}", body, key=dev.encode())
            finally:
                await producer.stop()
        elif self.kind in ("nats", "jetstream"):
            nc = await nats.connect(self.brokers["nats"])
            try:
                for body, dev in zip(bodies, devices, strict=True):
                    if self.kind == "nats":
                        await nc.publish(f"obs.{self.sfx}.{dev}", body)
                    else:
                        await nc.jetstream().publish(f"objs.{self.sfx}.{dev}", body)
                await nc.flush()
            finally:
                await nc.close()
        else:
            port = self.gateway.routes[0].consumer.port  # type: ignore[attr-defined]
            async with aiohttp.ClientSession() as http:
                for body, dev in zip(bodies, devices, strict=True):
                    async with http.post(f"http://127.0.0.1:{port}/obs/{self.sfx}/{dev}",
                                         data=body, headers={
                                             "Content-Type": "application/json"}) as answer:
                        assert answer.status == 202, await answer.text()

    def _mqtt(self, bodies: list[bytes], devices: list[str]) -> None:
        client = paho.Client(CallbackAPIVersion.VERSION2, client_id=f"pub-{uuid.uuid4().hex}",
                             protocol=MQTTProtocolVersion.MQTTv5)
        client.connect("127.0.0.1", self.brokers["mqtt_port"])
        client.loop_start()
        try:
            for body, dev in zip(bodies, devices, strict=True):
                client.publish(f"obs/{self.sfx}/{dev}", body, qos=1).wait_for_publish(10)
        finally:
            client.disconnect()
            client.loop_stop()


async def _report(port: int) -> dict[str, Any]:
    async with aiohttp.ClientSession() as http, http.get(
            f"http://127.0.0.1:{port}/conformance") as answer:
        assert answer.status == 200
        doc: dict[str, Any] = await answer.json()
        return doc


async def _received(gateway: Gateway) -> int:
    assert gateway.admin is not None
    routes = (await _report(gateway.admin.port))["routes"]
    return int(routes[0]["received"]) if routes else 0


KINDS = ("mqtt", "kafka", "nats", "jetstream", "http")


@pytest.mark.parametrize("kind", KINDS)
def test_observe_takes_nothing_and_counts_everything(
        kind: str, tmp_path: Path, mosquitto: Any, tansu: Any, nats_server: Any) -> None:
    sfx = uuid.uuid4().hex[:8]
    brokers = {"mqtt": mosquitto.url, "mqtt_port": mosquitto.port, "kafka": tansu.url,
               "kafka_bootstrap": tansu.bootstrap_servers, "nats": nats_server.url}
    config, problems = load_config(_config(tmp_path, kind, sfx, brokers))
    assert config is not None, [str(p) for p in problems]
    assert config.routes[0].observe

    async def scenario() -> None:
        real: RealConsumer | None = {
            "mqtt": lambda: MqttReal(mosquitto.port, sfx),
            "kafka": lambda: KafkaReal(tansu.bootstrap_servers, sfx),
            "nats": lambda: NatsReal(nats_server.url, sfx, jetstream=False),
            "jetstream": lambda: NatsReal(nats_server.url, sfx, jetstream=True),
            "http": lambda: None,
        }[kind]()
        if kind == "kafka":
            admin = AIOKafkaAdminClient(bootstrap_servers=tansu.bootstrap_servers)
            await admin.start()
            try:
                await admin.create_topics([NewTopic(f"obs-{sfx}", 1, 1)])
            finally:
                await admin.close()
        if real is not None:
            await real.start()
        published: list[Any] = []
        nc = await nats.connect(nats_server.url)

        async def publish_seen(msg: Any) -> None:
            published.append(msg)

        await nc.subscribe(f"out.{sfx}", cb=publish_seen)
        await nc.subscribe(f"dead.{sfx}", cb=publish_seen)
        gateway = Gateway(config, REGISTRY)
        await gateway.start()
        try:
            async with asyncio.timeout(TIMEOUT):
                while not (gateway.readiness() and all(gateway.readiness().values())):
                    await asyncio.sleep(0.05)
            sender = Sender(kind, sfx, brokers, gateway)
            # Probes until the observer sees traffic (a Kafka observer starts at the
            # latest offset once its partitions are assigned).
            async with asyncio.timeout(TIMEOUT):
                while await _received(gateway) == 0:
                    await sender.send(1)
                    await asyncio.sleep(0.5)
            await sender.send(COUNT)
            total = sender.sent
            async with asyncio.timeout(TIMEOUT):
                while await _received(gateway) < total:
                    await asyncio.sleep(0.1)
            if real is not None:
                assert await real.count(total) == total, "the real consumer lost messages"
            await asyncio.sleep(0.5)  # anything published would have arrived by now
            assert published == [], "an observing route published"
            assert gateway.admin is not None
            report = await _report(gateway.admin.port)
            route = report["routes"][0]
            assert route["observe"] is True
            assert (route["received"], route["matched"], route["rendered"]) == (
                total, total, total)
            assert route["deadletter"] == {}
            assert [(r["definition"], r["matched"], r["unmatched"], r["invalid"])
                    for r in report["rows"]] == [(XID, total, 0, 0)]
            metrics = gateway.metrics.render().decode()
            matched = (f'xrgw_conformance_messages_total{{definition="{XID}",'
                       f'outcome="matched",route="source->out"}} {total}.0')
            assert matched in metrics
            published_metric = [line for line in metrics.splitlines()
                                if line.startswith("xrgw_messages_published_total")]
            assert all(line.endswith(" 0.0") for line in published_metric), published_metric
            if isinstance(real, NatsReal) and real.jetstream:
                # The observer's consumer was ephemeral: the only durable is the real one.
                assert await real.durables() == [f"real-{sfx}"]
        finally:
            await gateway.stop()
            await nc.close()
            if real is not None:
                await real.stop()

    asyncio.run(scenario())


def test_amqp_copy_source_still_consumes(rabbitmq: Any) -> None:
    """Why observing AMQP is refused: RabbitMQ's AMQP 1.0 plugin accepts a receiver asking
    for a copy (non-destructive) source, says `copy` back, and still takes the message
    from the queue. Should a broker honour it, this fails: lift the refusal
    (`ProtocolProfile.observe` of AMQP) and attach observers with copy."""
    address = f"/queue/xrgw-copy-{uuid.uuid4().hex[:8]}"
    conn = BlockingConnection(rabbitmq.login_url, timeout=20, allowed_mechs="PLAIN")
    try:
        conn.create_sender(address).send(Message(body="one"))
        observer = conn.create_receiver(address, options=Copy(), credit=1, name="observer")
        assert observer.link.remote_source.distribution_mode == Terminus.DIST_MODE_COPY
        assert observer.receive(timeout=10).body == "one"
        observer.accept()
        real = conn.create_receiver(address, credit=1, name="real")
        with pytest.raises(ProtonTimeout):
            real.receive(timeout=3)  # gone: the "copy" consumed it
    finally:
        conn.close()


def test_observe_refused_on_amqp(tmp_path: Path) -> None:
    """RabbitMQ's AMQP 1.0 receivers consume: validate refuses observing an AMQP source
    and says why."""
    doc = {"$schema": "https://cloudevents.io/schemas/registry", "specversion": "1.0-rc4",
           "endpoints": {
               "orders": {"usage": ["consumer"], "protocol": "AMQP/1.0",
                          "protocoloptions": {"endpoints": [{"uri": "amqp://127.0.0.1:5672"}],
                                              "node": "/queue/orders"},
                          "messagegroups": ["#/messagegroups/g"]},
               "out": {"usage": ["producer"], "protocol": "NATS",
                       "protocoloptions": {"endpoints": [{"uri": "nats://127.0.0.1:4222"}],
                                           "subject": "out"}}},
           "messagegroups": {"g": {"envelope": "CloudEvents/1.0", "messages": {"m": {
               "protocol": "AMQP/1.0",
               "protocoloptions": {"properties": {"subject": {"value": "order"}}},
               "envelope": "CloudEvents/1.0",
               "envelopemetadata": {"type": {"value": "t"}, "source": {"value": "/s"}}}}}}}
    (tmp_path / "d.xreg.json").write_text(json.dumps(doc))
    path = tmp_path / "gateway.yaml"
    path.write_text(json.dumps({"definitions": ["d.xreg.json"], "deadletter": "log",
                                "routes": [{"from": "orders", "to": ["out"],
                                            "observe": True}]}))
    config, problems = load_config(path)
    assert config is None
    [problem] = [p for p in problems if p.is_error]
    assert problem.path == "$.routes[0].observe"
    assert "cannot be observed" in problem.message and "RabbitMQ" in problem.message
