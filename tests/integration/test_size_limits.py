"""Messages over a real output's size limit (issue 28), end to end through real brokers.

Measured before: one 2 MB MQTT message on an MQTT -> NATS route (over nats-server's 1 MiB
`max_payload`, and over the NATS dead letter's too) held the dead letter for ever, later
messages were published but never settled, intake stopped at the window and `/readyz`
said 200; over HTTP the sender got 504 although an output had published the event.

Now: the message is dead-lettered as `too-large` before it is sent (to no output), the
dead letter -- itself over the limit -- is written without its body (size and SHA-256),
the route goes on, and an HTTP sender is answered 202 because the message was
dead-lettered.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import nats

from adapters.kafka import KafkaProducer
from adapters.mqtt import MqttProducer
from adapters.nats import NatsProducer
from adapters.registry import REGISTRY
from gateway.daemon import Gateway
from gateway.ports import EndpointSettings, Outcome, write
from gateway.record import NativeMessage
from harness.brokers import Mosquitto, free_port
from tests.integration.support import (
    collect,
    loaded,
    metric,
    mqtt_endpoint,
    nats_endpoint,
    publish_sales,
    readyz,
    started,
    until,
)

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 60.0
BIG = 2 * 1024 * 1024  # over nats-server's default max_payload of 1 MiB


def test_a_2mb_mqtt_message_on_an_mqtt_to_nats_route_is_dead_lettered_without_its_body(
        tmp_path: Path, mosquitto, nats_server) -> None:
    sfx = uuid.uuid4().hex[:8]
    shutil.copy(ROOT / "config/examples/store.xreg.json", tmp_path / "store.xreg.json")
    extra = {"endpoints": {"out-nats": nats_endpoint(nats_server.url, f"out.{sfx}"),
                           "dl-nats": nats_endpoint(nats_server.url, f"dl.{sfx}")}}
    (tmp_path / "extra.xreg.json").write_text(json.dumps(extra))
    (tmp_path / "gw.yaml").write_text(f"""
definitions: [store.xreg.json, extra.xreg.json]
routes:
  - from: store-mqtt
    to: [out-nats]
    inflight: 64
deadletter: dl-nats
admin: {{listen: "127.0.0.1:0"}}
endpoints:
  store-mqtt: {{uri: "{mosquitto.url}", client_id: "xrgw-size-{sfx}"}}
  out-nats: {{uri: "{nats_server.url}"}}
  dl-nats: {{uri: "{nats_server.url}"}}
""")
    config = loaded(tmp_path / "gw.yaml")
    topic = f"/store/{sfx}/cashierdesk/1"
    big = json.dumps({"amount": 1, "pad": "x" * BIG}).encode()
    small = [json.dumps({"amount": n}).encode() for n in range(2, 12)]

    async def scenario() -> None:
        nc = await nats.connect(nats_server.url, max_reconnect_attempts=-1)
        out = await collect(nc, f"out.{sfx}")
        dead = await collect(nc, f"dl.{sfx}")
        await nc.flush()
        gateway = Gateway(config, REGISTRY)
        await started(gateway)
        try:
            # The big one first, then ten ordinary ones behind it.
            await asyncio.to_thread(publish_sales, mosquitto.url,
                                    [(topic, big)] + [(topic, body) for body in small])
            await until(lambda: len(out) == 10 and len(dead) == 1,
                         "10 published and 1 dead letter")
            assert [json.loads(m.data)["amount"] for m in out] == list(range(2, 12))
            [letter] = dead
            headers = letter.headers or {}
            assert headers["xrgw-reason"] == "too-large"
            assert headers["xrgw-body-size"] == str(len(big))
            assert headers["xrgw-body-sha256"] == hashlib.sha256(big).hexdigest()
            assert "over the output's limit of 1048576 bytes" in headers["xrgw-detail"]
            assert letter.data == b""  # the body is left out: the dead letter cannot take it
            assert json.loads(headers["xrgw-record"])["topic_name"] == topic
            await until(lambda: gateway.routes[0].inflight == 0, "every message settled")
            assert metric(gateway, "xrgw_messages_deadlettered_total", reason="too-large") == 1
            assert gateway.admin is not None
            status, body = await asyncio.to_thread(readyz, gateway.admin.port)
            assert status == 200 and body["stalled"] == {}
            for cause in ("deadletter-held", "no-progress", "output-unavailable"):
                assert metric(gateway, "xrgw_route_stalled", route=gateway.routes[0].name,
                               cause=cause) == 0
        finally:
            await gateway.stop()
            await nc.close()

    asyncio.run(scenario())


def test_an_http_sender_of_a_message_too_large_for_an_output_is_answered_202_dead_lettered(
        tmp_path: Path, mosquitto, nats_server) -> None:
    """HTTP -> [MQTT, NATS]: the MQTT output would take 2 MB, the NATS one cannot. Before,
    MQTT published it, the NATS dead letter held it, and the sender got 504 after 30 s
    (and sent it again). Now it goes to no output, the dead letter takes it without its
    body, and the sender gets 202 at once: the message was dead-lettered."""
    sfx = uuid.uuid4().hex[:8]
    doc = json.loads((ROOT / "config/examples/http-webhooks.xreg.json").read_text())
    doc["endpoints"]["out-mqtt"] = mqtt_endpoint(mosquitto.url, f"out/{sfx}")
    doc["endpoints"]["out-nats"] = nats_endpoint(nats_server.url, f"out.{sfx}")
    doc["endpoints"]["dl-nats"] = nats_endpoint(nats_server.url, f"dl.{sfx}")
    (tmp_path / "hooks.xreg.json").write_text(json.dumps(doc))
    port = free_port()
    (tmp_path / "gw.yaml").write_text(f"""
definitions: [hooks.xreg.json]
routes:
  - from: webhooks-http
    to: [out-mqtt, out-nats]
deadletter: dl-nats
admin: {{listen: "127.0.0.1:0"}}
endpoints:
  webhooks-http:
    uri: "http://127.0.0.1:{port}"
    options: {{max_body_bytes: 8388608}}
  out-mqtt: {{uri: "{mosquitto.url}"}}
  out-nats: {{uri: "{nats_server.url}"}}
  dl-nats: {{uri: "{nats_server.url}"}}
""")
    config = loaded(tmp_path / "gw.yaml")
    big = json.dumps({"env": "prod", "pad": "y" * BIG}).encode()

    async def scenario() -> None:
        nc = await nats.connect(nats_server.url)
        dead = await collect(nc, f"dl.{sfx}")
        published = await collect(nc, f"out.{sfx}")
        await nc.flush()
        gateway = Gateway(config, REGISTRY)
        await started(gateway)
        url = f"http://127.0.0.1:{port}/hooks/acme/deployments/prod"
        try:
            async with aiohttp.ClientSession() as session:
                async with session.post(url, data=big, headers={
                        "Content-Type": "application/json"}) as response:
                    big_status = response.status
                async with session.post(url, json={"env": "prod"}) as response:
                    small_status = response.status
            assert big_status == 202  # dead-lettered: a 2xx, and the sender does not retry
            assert small_status == 202
            # The same with curl, the client webhook senders' scripts use.
            body_file = tmp_path / "big.json"
            body_file.write_bytes(big)
            curl = await asyncio.create_subprocess_exec(
                "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST",
                "-H", "Content-Type: application/json", "--data-binary", f"@{body_file}",
                url, stdout=asyncio.subprocess.PIPE)
            stdout, _ = await curl.communicate()
            assert stdout == b"202"
            await until(lambda: len(dead) == 2 and len(published) == 1,
                         "the dead letters and the small event")
            headers = dead[0].headers or {}
            assert headers["xrgw-reason"] == "too-large"
            assert headers["xrgw-detail"].startswith("out-nats: body of ")
            # An HTTP request's dead letter is its event as a structured CloudEvent (a
            # request may carry a batch): its size and digest are of that body.
            assert int(headers["xrgw-body-size"]) > len(big)
            assert len(headers["xrgw-body-sha256"]) == 64 and dead[0].data == b""
            assert metric(gateway, "xrgw_messages_published_total", endpoint="out-mqtt") == 1
        finally:
            await gateway.stop()
            await nc.close()

    asyncio.run(scenario())


# -- each adapter learns its sink's limit and refuses a larger message as too large ----------

class SmallPacketMosquitto(Mosquitto):
    """A mosquitto that announces a Maximum Packet Size of 100,000 bytes (MQTT 5 CONNACK)."""

    def prepare(self) -> None:
        super().prepare()
        with self.config_path.open("a") as config:
            config.write("max_packet_size 100000\n")


def _record(protocol: str, fields: dict[str, Any], size: int) -> NativeMessage:
    return NativeMessage(protocol, fields, payload=b"z" * size)


def test_the_mqtt_producer_reads_the_brokers_maximum_packet_size() -> None:
    broker = SmallPacketMosquitto()
    broker.start()

    async def scenario() -> list[Outcome]:
        producer = MqttProducer(EndpointSettings(broker.url, options={"topic": "size/t"}))
        await producer.connect()
        try:
            assert producer.max_message_bytes == 100_000
            return await write(producer, [
                _record("MQTT/5.0", {"topic_name": "size/t"}, 1000),
                _record("MQTT/5.0", {"topic_name": "size/t"}, 99_990),  # + headers: over
                _record("MQTT/5.0", {"topic_name": "size/t"}, 200_000)])
        finally:
            await producer.aclose()

    try:
        small, near, large = asyncio.run(scenario())
    finally:
        broker.close()
    assert small.delivered
    assert near.too_large and not near.retryable  # the packet, not just the payload, counts
    assert large.too_large and "over the limit of 100000 bytes" in (large.reason or "")


def test_the_nats_producer_reads_max_payload_from_the_servers_info(nats_server) -> None:
    async def scenario() -> list[Outcome]:
        producer = NatsProducer(EndpointSettings(nats_server.url, options={"subject": "s.t"}))
        await producer.connect()
        try:
            assert producer.max_message_bytes == 1024 * 1024
            return await write(producer, [
                _record("NATS", {"subject": "s.t"}, 1000),
                _record("NATS", {"subject": "s.t", "headers": [
                    {"name": "h", "value": "v" * 2000}]}, 1024 * 1024 - 1000),
                _record("NATS", {"subject": "s.t"}, BIG)])
        finally:
            await producer.aclose()

    small, near, large = asyncio.run(scenario())
    assert small.delivered
    assert near.too_large  # headers count against max_payload too
    assert large.too_large and not large.retryable


def test_the_kafka_producer_refuses_a_record_over_max_request_size(tansu) -> None:
    async def scenario() -> list[Outcome]:
        producer = KafkaProducer(EndpointSettings(tansu.url, options={
            "topic": f"size-{uuid.uuid4().hex[:6]}"}))
        await producer.connect()
        try:
            assert producer.max_message_bytes == 1024 * 1024
            return await write(producer, [_record("KAFKA", {}, BIG)])
        finally:
            await producer.aclose()

    [large] = asyncio.run(scenario())
    assert large.too_large and not large.retryable
