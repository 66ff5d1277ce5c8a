"""The whole gateway, in process, against real brokers: the store example's deployment
(config/demo.yaml: MQTT in -> Kafka and NATS out, Kafka dead letter), plus metrics,
readiness and reload with a broken config."""

from __future__ import annotations

import asyncio
import json
import shutil
import urllib.request
import uuid
from pathlib import Path

import nats
import paho.mqtt.client as paho
from aiokafka import AIOKafkaConsumer  # type: ignore[import-untyped]
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from adapters.registry import REGISTRY
from gateway.config import load_config
from gateway.daemon import Gateway

ROOT = Path(__file__).resolve().parents[2]


def _config(tmp: Path, mosquitto, tansu, nats_server, suffix: str) -> Path:
    shutil.copy(ROOT / "config/examples/store.xreg.json", tmp / "store.xreg.json")
    doc = json.loads((ROOT / "config/examples/demo-endpoints.xreg.json").read_text())
    doc["endpoints"]["store-deadletter"]["protocoloptions"]["topic"] = f"dead-{suffix}"
    (tmp / "demo-endpoints.xreg.json").write_text(json.dumps(doc))
    store = json.loads((tmp / "store.xreg.json").read_text())
    store["endpoints"]["events-kafka"]["protocoloptions"]["topic"] = f"events-{suffix}"
    store["endpoints"]["events-nats"]["protocoloptions"]["subject"] = f"events.{suffix}"
    (tmp / "store.xreg.json").write_text(json.dumps(store))
    config = tmp / "gateway.yaml"
    config.write_text(f"""
definitions: [store.xreg.json, demo-endpoints.xreg.json]
routes:
  - from: store-mqtt
    to: [events-kafka, events-nats]
    mode: binary
    retry: {{attempts: 3, initial_backoff: 50ms, max_backoff: 200ms}}
deadletter: store-deadletter
admin: {{listen: "127.0.0.1:0"}}
endpoints:
  store-mqtt: {{uri: "{mosquitto.url}", client_id: "xrgw-e2e-{suffix}"}}
  events-kafka: {{uri: "{tansu.url}"}}
  events-nats: {{uri: "{nats_server.url}"}}
  store-deadletter: {{uri: "{tansu.url}"}}
""")
    return config


def _publish(url: str, messages: list[tuple[str, dict, list[tuple[str, str]]]]) -> None:
    host, port = url.removeprefix("mqtt://").split(":")
    client = paho.Client(CallbackAPIVersion.VERSION2, protocol=MQTTProtocolVersion.MQTTv5)
    client.connect(host, int(port))
    client.loop_start()
    try:
        for topic, body, props in messages:
            properties = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
            if props:
                properties.UserProperty = props
            properties.ContentType = "application/json"
            client.publish(topic, json.dumps(body), qos=1,
                           properties=properties).wait_for_publish(10)
    finally:
        client.loop_stop()
        client.disconnect()


async def _kafka(url: str, topic: str, count: int) -> list:
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=url.removeprefix("kafka://"),
                                group_id=f"check-{uuid.uuid4().hex[:6]}",
                                auto_offset_reset="earliest", session_timeout_ms=6000,
                                heartbeat_interval_ms=500)
    await consumer.start()
    out: list = []
    try:
        async with asyncio.timeout(30):
            while len(out) < count:
                batch = await consumer.getmany(timeout_ms=500)
                for records in batch.values():
                    out.extend(records)
    finally:
        await consumer.stop()
    return out


def test_store_deployment_end_to_end(tmp_path, mosquitto, tansu, nats_server):
    suffix = uuid.uuid4().hex[:8]
    config, problems = load_config(_config(tmp_path, mosquitto, tansu, nats_server, suffix))
    assert config is not None, [str(p) for p in problems]

    async def scenario() -> None:
        gateway = Gateway(config, REGISTRY)
        nc = await nats.connect(nats_server.url)
        seen: list = []

        async def collect(message) -> None:
            seen.append(message)

        sub = await nc.subscribe(f"events.{suffix}", cb=collect)
        await gateway.start()
        try:
            for _ in range(100):
                if all(gateway.readiness().values()):
                    break
                await asyncio.sleep(0.05)
            assert all(gateway.readiness().values())
            await asyncio.to_thread(_publish, mosquitto.url, [
                ("/store/12/cashierdesk/3", {"amount": 1},
                 [("eventType", "com.example.sale")]),
                ("/store/12/cashierdesk/4", {"amount": 2},
                 [("eventType", "com.example.sale")]),
                ("/store/12/desk/9", {"amount": 3}, []),  # unmatched -> dead letter
            ])
            kafka = await _kafka(tansu.url, f"events-{suffix}", 2)
            dead = await _kafka(tansu.url, f"dead-{suffix}", 1)
            async with asyncio.timeout(10):
                while len(seen) < 2:
                    await asyncio.sleep(0.05)
            headers = dict((k, v.decode()) for k, v in kafka[0].headers)
            assert headers["ce_type"] == "com.example.sale"
            assert headers["ce_source"] == "12" and headers["ce_specversion"] == "1.0"
            assert sorted(json.loads(r.value)["amount"] for r in kafka) == [1, 2]
            nats_headers = seen[0].headers or {}
            assert nats_headers.get("ce-type") == "com.example.sale"
            dead_headers = dict((k, v.decode()) for k, v in dead[0].headers)
            assert dead_headers["xrgw-reason"] == "unmatched"
            assert json.loads(dead[0].value) == {"amount": 3}  # original payload intact
            port = gateway.admin.port
            text = await asyncio.to_thread(
                lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read())
            metrics = text.decode()
            assert ('xrgw_messages_received_total{endpoint="store-mqtt",protocol="MQTT/5.0",'
                    'xrgw_endpoint="store-mqtt"} 3.0') in metrics
            assert ('xrgw_messages_published_total{endpoint="events-kafka",'
                    'xrgw_endpoint="events-kafka"} 2.0') in metrics
            # dead letters are not publishes of the dead-letter endpoint
            assert 'xrgw_messages_published_total{endpoint="store-deadletter"' not in metrics
            assert 'xrgw_messages_deadlettered_total{reason="unmatched"} 1.0' in metrics
            assert 'xrgw_deadletter_total{reason="unmatched"} 1.0' in metrics  # until 0.3.0
            # bytes: the three bodies in; the two events and the dead letter out
            assert ('xrgw_received_bytes_total{endpoint="store-mqtt",protocol="MQTT/5.0",'
                    'xrgw_endpoint="store-mqtt"}') in metrics
            assert f"xrgw_deadletter_bytes_total {float(len(dead[0].value))}" in metrics
            assert 'xrgw_config_last_reload_successful 1.0' in metrics
            ready = await asyncio.to_thread(
                lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz").status)
            assert ready == 200
            # a broken config is rejected and the old one keeps serving
            Path(config.file).write_text("routes: [\n")
            assert await gateway.reload() is False
            after = gateway.metrics.render().decode()
            assert 'xrgw_config_reloads_total{result="rejected"} 1.0' in after
            assert 'xrgw_config_last_reload_successful 0.0' in after
        finally:
            await sub.unsubscribe()
            await nc.close()
            await gateway.stop()

    asyncio.run(scenario())

