"""`make demo` (`python -m scripts.demo` from the repository root): the store example
running for real, on loopback, then stopped.

Starts Mosquitto, NATS and the Kafka-compatible Tansu on ephemeral ports (the test
harness's broker classes, `harness.brokers`), runs the gateway with config/demo.yaml (MQTT
in -> Kafka and NATS out, Kafka dead letter), publishes a few cashier-desk messages, prints
the CloudEvents that arrive and the key metrics, and stops everything.
"""

from __future__ import annotations

import asyncio
import json
import os
import urllib.request
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
from harness.brokers import Mosquitto, NatsServer, Tansu

ROOT = Path(__file__).resolve().parents[1]

SALES = [
    ("/store/12/cashierdesk/3", {"amount": 12.5, "currency": "EUR"}, "com.example.sale"),
    ("/store/12/cashierdesk/4", {"amount": 3.2, "currency": "EUR"}, "com.example.sale"),
    ("/store/7/cashierdesk/1", {"drawer": "open"}, "com.example.drawer.opened"),
    ("/store/12/desk/9", {"amount": 1}, None),  # no definition: goes to the dead letter
]


def publish(url: str) -> None:
    host, port = url.removeprefix("mqtt://").split(":")
    client = paho.Client(CallbackAPIVersion.VERSION2, protocol=MQTTProtocolVersion.MQTTv5)
    client.connect(host, int(port))
    client.loop_start()
    for topic, body, event_type in SALES:
        props = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
        props.ContentType = "application/json"
        if event_type:
            props.UserProperty = [("eventType", event_type)]
        client.publish(topic, json.dumps(body), qos=1, properties=props).wait_for_publish(10)
        print(f"MQTT  -> {topic} {json.dumps(body)}")
    client.loop_stop()
    client.disconnect()


async def read_kafka(url: str, topic: str, count: int) -> list[tuple[dict[str, str], bytes]]:
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=url.removeprefix("kafka://"),
                                group_id="demo-reader", auto_offset_reset="earliest",
                                session_timeout_ms=6000, heartbeat_interval_ms=500)
    await consumer.start()
    out: list[tuple[dict[str, str], bytes]] = []
    try:
        async with asyncio.timeout(30):
            while len(out) < count:
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    out += [({k: v.decode() for k, v in r.headers}, r.value) for r in records]
    finally:
        await consumer.stop()
    return out


async def main() -> int:
    with Mosquitto() as mqtt, NatsServer() as nats_server, Tansu() as kafka:
        os.environ.update(XRGW_MQTT_URI=mqtt.url, XRGW_NATS_URI=nats_server.url,
                          XRGW_KAFKA_URI=kafka.url, XRGW_ADMIN_LISTEN="127.0.0.1:0")
        config, problems = load_config(ROOT / "config/demo.yaml")
        if config is None:
            for problem in problems:
                print(problem)
            return 1
        gateway = Gateway(config, REGISTRY)
        nc = await nats.connect(nats_server.url)
        seen: list[str] = []

        async def on_nats(msg: nats.aio.msg.Msg) -> None:
            seen.append(f"NATS  <- {msg.subject} ce-type={(msg.headers or {}).get('ce-type')}")

        await nc.subscribe("store.events", cb=on_nats)
        await gateway.start()
        for _ in range(100):
            if all(gateway.readiness().values()):
                break
            await asyncio.sleep(0.05)
        await asyncio.to_thread(publish, mqtt.url)
        print()
        for headers, value in await read_kafka(kafka.url, "store-events", 3):
            event = {k.removeprefix("ce_"): v for k, v in headers.items() if k.startswith("ce_")}
            print(f"KAFKA <- store-events CloudEvent {json.dumps(event)} data={value.decode()}")
        for headers, value in await read_kafka(kafka.url, "store-deadletter", 1):
            print(f"KAFKA <- store-deadletter reason={headers.get('xrgw-reason')} "
                  f"original={value.decode()}")
        await asyncio.sleep(0.3)
        print(*seen, sep="\n")
        assert gateway.admin is not None
        url = f"http://127.0.0.1:{gateway.admin.port}/metrics"
        text = await asyncio.to_thread(lambda: urllib.request.urlopen(url).read().decode())
        print("\nkey metrics:")
        for line in text.splitlines():
            # counters of known reasons start at 0; the demo shows what moved
            if line.startswith("xrgw_messages_") and line.endswith(" 0.0"):
                continue
            if line.startswith(("xrgw_messages_", "xrgw_endpoint_connected")):
                print(" ", line)
        await nc.close()
        await gateway.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
