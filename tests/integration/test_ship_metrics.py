"""Every metric the Helm chart's Grafana dashboard and PrometheusRule use exists in a
real scrape of running gateways (no panel or alert on a metric that does not exist),
with the labels the queries aggregate by; and every metric ops were promised (process,
interpreter, build, bytes, backlog, window, renamed ones under both names) is in it,
without `_created` series.

Three gateways run in process (`gateway.daemon.Gateway`, real adapters):
  1. MQTT in (Mosquitto) -> NATS out, and HTTP ingress -> an HTTP output that refuses
     connections (publish errors, then `undeliverable`); dead letter on NATS; one reload.
  2. HTTP ingress with `deadletter: log`, the only mode where messages are dropped.
  3. Kafka in (Tansu) and JetStream in (a durable on a stream) -> NATS out: the backlog
     gauges (partition lag, pending messages), polled fast for the test.
Messages are pushed through all so that the labelled series exist, then GET /metrics.
"""

from __future__ import annotations

import asyncio
import json
import re
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import helm_python as helm
import nats
import paho.mqtt.client as paho
import pytest
import yaml
from aiokafka.admin import AIOKafkaAdminClient, NewTopic  # type: ignore[import-untyped]
from nats.js.api import StreamConfig
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion
from prometheus_client.parser import text_string_to_metric_families

from adapters.registry import REGISTRY
from gateway.config import load_config
from gateway.daemon import Gateway
from gateway.runtime import backlog
from harness.brokers import free_port

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "xrgw"
#: Labels Prometheus adds to every scraped series (target labels), and histogram `le`.
TARGET_LABELS = {"namespace", "pod", "job", "instance", "service", "container", "le"}
METRIC = re.compile(r"\b((?:xrgw|process|python)_[a-z_]+)\b")
BY_CLAUSE = re.compile(r"by \(([^)]*)\)\s*\((?:\w+\()?((?:xrgw|process|python)_[a-z_]+)")
SELECTOR = re.compile(r"((?:xrgw|process|python)_[a-z_]+)\{([^}]*)\}")
#: What ops were promised, sample name -> the labels each must carry.
PROMISED = {
    "process_resident_memory_bytes": set(), "process_cpu_seconds_total": set(),
    "process_open_fds": set(), "python_info": {"version"},
    "python_gc_collections_total": {"generation"},
    "xrgw_build_info": {"version", "revision"},
    "xrgw_processing_seconds_bucket": {"route", "le"},
    "xrgw_received_bytes_total": {"xrgw_endpoint", "endpoint", "protocol"},
    "xrgw_published_bytes_total": {"xrgw_endpoint", "endpoint"},
    "xrgw_messages_received_total": {"xrgw_endpoint", "endpoint", "protocol"},
    "xrgw_endpoint_connected": {"xrgw_endpoint", "endpoint"},
    "xrgw_config_last_reload_successful": set(), "xrgw_deadletter_bytes_total": set(),
    "xrgw_messages_inflight": {"route"}, "xrgw_messages_inflight_limit": {"route"},
    "xrgw_messages_deadlettered_total": {"reason"},
    "xrgw_consumer_lag": {"xrgw_endpoint", "endpoint", "topic", "partition"},
    "xrgw_consumer_pending": {"xrgw_endpoint", "endpoint", "stream", "consumer"},
    # the old names, until 0.3.0
    "xrgw_deadletter_total": {"reason"}, "xrgw_inflight": {"route"},
}


def _chart_expressions() -> list[str]:
    values = yaml.safe_load((CHART / "ci" / "bridge-values.yaml").read_text())
    with helm.Chart.load(CHART) as chart:
        manifests = chart.render(values, name="gw", namespace="ops")
    docs = [d for path, text in manifests.items() if path.endswith(".yaml")
            for d in yaml.safe_load_all(text) if isinstance(d, dict)]
    dashboard = json.loads(next(d["data"]["xrgw.json"] for d in docs
                                if d["kind"] == "ConfigMap" and "xrgw.json" in d["data"]))
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    exprs += [v["query"]["query"] for v in dashboard["templating"]["list"]
              if v["type"] == "query"]
    rule = next(d for d in docs if d["kind"] == "PrometheusRule")
    exprs += [r["expr"] for g in rule["spec"]["groups"] for r in g["rules"]]
    return exprs


def _document(sfx: str) -> dict[str, Any]:
    return {
        "$schema": "https://cloudevents.io/schemas/registry", "specversion": "1.0-rc4",
        "endpoints": {
            "in-mqtt": {"usage": ["consumer"], "protocol": "MQTT/5.0",
                        "protocoloptions": {"qos": 1, "topicfilter": f"/ship/{sfx}/#"},
                        "messagegroups": ["#/messagegroups/m"]},
            "in-http": {"usage": ["consumer"], "protocol": "HTTP", "protocoloptions": {},
                        "messagegroups": ["#/messagegroups/h"]},
            "out-nats": {"usage": ["producer"], "protocol": "NATS",
                         "protocoloptions": {"subject": f"ship.out.{sfx}"}},
            "out-broken": {"usage": ["producer"], "protocol": "HTTP", "protocoloptions": {}},
            "dead-nats": {"usage": ["producer"], "protocol": "NATS",
                          "protocoloptions": {"subject": f"ship.dead.{sfx}"}},
        },
        "messagegroups": {
            "m": {"envelope": "CloudEvents/1.0", "messages": {"reading": {
                "protocol": "MQTT/5.0",
                "protocoloptions": {"topic_name": f"/ship/{sfx}/{{device}}"},
                "envelope": "CloudEvents/1.0",
                "envelopemetadata": {"type": {"value": "com.example.ship.reading"},
                                     "source": {"type": "uritemplate",
                                                "value": "/devices/{device}"}}}}},
            "h": {"envelope": "CloudEvents/1.0", "messages": {"hook": {
                "protocol": "HTTP",
                "protocoloptions": {"method": "POST", "path": "/ship/{device}"},
                "envelope": "CloudEvents/1.0",
                "envelopemetadata": {"type": {"value": "com.example.ship.hook"},
                                     "source": {"type": "uritemplate",
                                                "value": "/hooks/{device}"}}}}},
        },
    }


def _configs(tmp: Path, sfx: str, mosquitto: Any, nats_server: Any) -> tuple[Path, Path, int,
                                                                              int]:
    (tmp / "ship.xreg.json").write_text(json.dumps(_document(sfx)))
    http_in, http_in_log, refused = free_port(), free_port(), free_port()
    main = {
        "definitions": ["ship.xreg.json"],
        "routes": [
            {"from": "in-mqtt", "to": ["out-nats"]},
            {"from": "in-http", "to": ["out-broken"],
             "retry": {"attempts": 2, "initial_backoff": "10ms", "max_backoff": "20ms"}},
        ],
        "deadletter": "dead-nats",
        "admin": {"listen": "127.0.0.1:0"}, "log": {"level": "warning"},
        "shutdown": {"grace": "2s"},
        "endpoints": {
            "in-mqtt": {"uri": mosquitto.url, "client_id": f"xrgw-ship-{sfx}"},
            "in-http": {"uri": f"http://127.0.0.1:{http_in}"},
            "out-nats": {"uri": nats_server.url},
            "dead-nats": {"uri": nats_server.url},
            "out-broken": {"uri": f"http://127.0.0.1:{refused}/nowhere",
                           "options": {"timeout": 1}},
        },
    }
    drop = {
        "definitions": ["ship.xreg.json"],
        "routes": [{"from": "in-http", "to": ["out-nats"]}],
        "deadletter": "log",
        "admin": {"listen": "127.0.0.1:0"}, "log": {"level": "error"},
        "shutdown": {"grace": "2s"},
        "endpoints": {"in-http": {"uri": f"http://127.0.0.1:{http_in_log}"},
                      "out-nats": {"uri": nats_server.url}},
    }
    (tmp / "main.yaml").write_text(json.dumps(main))
    (tmp / "drop.yaml").write_text(json.dumps(drop))
    return tmp / "main.yaml", tmp / "drop.yaml", http_in, http_in_log


def _backlog_document(sfx: str) -> dict[str, Any]:
    return {
        "$schema": "https://cloudevents.io/schemas/registry", "specversion": "1.0-rc4",
        "endpoints": {
            "in-kafka": {"usage": ["consumer"], "protocol": "KAFKA", "protocoloptions": {},
                         "messagegroups": ["#/messagegroups/k"]},
            "in-js": {"usage": ["consumer"], "protocol": "NATS", "protocoloptions": {},
                      "messagegroups": ["#/messagegroups/j"]},
            "out-nats": {"usage": ["producer"], "protocol": "NATS",
                         "protocoloptions": {"subject": f"ship.backlog.{sfx}"}},
        },
        "messagegroups": {
            "k": {"envelope": "CloudEvents/1.0", "messages": {"order": {
                "protocol": "KAFKA", "protocoloptions": {"topic": f"ship-{sfx}"},
                "envelope": "CloudEvents/1.0",
                "envelopemetadata": {"type": {"value": "com.example.ship.order"},
                                     "source": {"value": "/orders"}}}}},
            "j": {"envelope": "CloudEvents/1.0", "messages": {"sensor": {
                "protocol": "NATS", "protocoloptions": {"subject": f"ship.js.{sfx}.{{id}}"},
                "envelope": "CloudEvents/1.0",
                "envelopemetadata": {"type": {"value": "com.example.ship.sensor"},
                                     "source": {"type": "uritemplate",
                                                "value": "/sensors/{id}"}}}}},
        },
    }


def _backlog_config(tmp: Path, sfx: str, tansu: Any, nats_server: Any) -> Path:
    (tmp / "backlog.xreg.json").write_text(json.dumps(_backlog_document(sfx)))
    config = {
        "definitions": ["backlog.xreg.json"],
        "routes": [{"from": "in-kafka", "to": ["out-nats"]},
                   {"from": "in-js", "to": ["out-nats"]}],
        "deadletter": "log",
        "admin": {"listen": "127.0.0.1:0"}, "log": {"level": "warning"},
        "shutdown": {"grace": "2s"},
        "endpoints": {
            "in-kafka": {"uri": tansu.url, "options": {
                "consumergroup": f"ship-{sfx}", "session_timeout_ms": 3000,
                "heartbeat_interval_ms": 500}},
            "in-js": {"uri": nats_server.url, "options": {
                "stream": f"SHIP{sfx}", "durable": f"ship-{sfx}"}},
            "out-nats": {"uri": nats_server.url},
        },
    }
    (tmp / "backlog.yaml").write_text(json.dumps(config))
    return tmp / "backlog.yaml"


def _mqtt_publish(url: str, topic: str, body: bytes) -> None:
    host, port = url.removeprefix("mqtt://").split(":")
    client = paho.Client(CallbackAPIVersion.VERSION2, protocol=MQTTProtocolVersion.MQTTv5)
    client.connect(host, int(port))
    client.loop_start()
    try:
        client.publish(topic, body, qos=1).wait_for_publish(10)
    finally:
        client.loop_stop()
        client.disconnect()


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text: str = response.read().decode()
        return text


def _samples(text: str) -> dict[str, set[str]]:
    """Sample name -> the label names seen on it."""
    out: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, set()).update(sample.labels)
    return out


async def _kafka_send(bootstrap: str, topic: str, value: bytes) -> None:
    from aiokafka import AIOKafkaProducer  # type: ignore[import-untyped]

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(topic, value, partition=0)
    finally:
        await producer.stop()


async def _until(check: Any, what: str, timeout: float = 30.0) -> None:
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.1)
    assert check(), what


def test_dashboard_and_alert_metrics_exist_in_a_real_scrape(
        tmp_path: Path, mosquitto: Any, nats_server: Any, tansu: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backlog, "POLL_SECONDS", 0.2)
    sfx = uuid.uuid4().hex[:8]
    main_path, drop_path, http_in, http_in_log = _configs(tmp_path, sfx, mosquitto, nats_server)
    main, problems = load_config(main_path)
    assert main is not None, [str(p) for p in problems]
    drop, problems = load_config(drop_path)
    assert drop is not None, [str(p) for p in problems]
    lagging, problems = load_config(_backlog_config(tmp_path, sfx, tansu, nats_server))
    assert lagging is not None, [str(p) for p in problems]

    async def scenario() -> tuple[str, str, str]:
        first, second = Gateway(main, REGISTRY), Gateway(drop, REGISTRY)
        third = Gateway(lagging, REGISTRY)
        nc = await nats.connect(nats_server.url)
        await nc.jetstream().add_stream(StreamConfig(name=f"SHIP{sfx}",
                                                     subjects=[f"ship.js.{sfx}.>"]))
        admin = AIOKafkaAdminClient(bootstrap_servers=tansu.bootstrap_servers)
        await admin.start()
        try:
            await admin.create_topics([NewTopic(f"ship-{sfx}", 2, 1)])
        finally:
            await admin.close()
        out: list[Any] = []
        dead: list[Any] = []

        async def keep_out(message: Any) -> None:
            out.append(message)

        async def keep_dead(message: Any) -> None:
            dead.append(message)

        await nc.subscribe(f"ship.out.{sfx}", cb=keep_out)
        await nc.subscribe(f"ship.dead.{sfx}", cb=keep_dead)
        await first.start()
        await second.start()
        await third.start()
        try:
            await _until(lambda: all(first.readiness().values())
                         and all(second.readiness().values())
                         and all(third.readiness().values()), "gateways ready", 60)
            await nc.jetstream().publish(f"ship.js.{sfx}.s1", b'{"t": 20}')
            await _kafka_send(tansu.bootstrap_servers, f"ship-{sfx}", b'{"id": 1}')

            async with asyncio.timeout(60):  # polled every 0.2 s once connected
                while True:
                    text = await asyncio.to_thread(_scrape, third.admin.port)
                    if ('xrgw_consumer_lag{endpoint="in-kafka"' in text
                            and 'xrgw_consumer_pending{consumer="ship-' in text):
                        break
                    await asyncio.sleep(0.2)
            await asyncio.to_thread(_mqtt_publish, mosquitto.url, f"/ship/{sfx}/d1", b'{"v":1}')
            await asyncio.to_thread(_mqtt_publish, mosquitto.url, f"/ship/{sfx}/d1/x", b"{}")
            async with aiohttp.ClientSession() as session:
                # matched, then undeliverable (refused output) -> dead letter
                async with session.post(f"http://127.0.0.1:{http_in}/ship/d2",
                                        json={"v": 2}) as response:
                    assert response.status == 202, await response.text()
                # unmatched with `deadletter: log` -> dropped (answered 202: settled)
                async with session.post(f"http://127.0.0.1:{http_in_log}/ship/d3/extra",
                                        json={"v": 3}) as response:
                    assert response.status < 500, await response.text()
            await _until(lambda: len(out) >= 1 and len(dead) >= 2,
                         f"outputs and dead letters: {len(out)} out, {len(dead)} dead")
            assert await first.reload() is True  # xrgw_config_reloads_total{result="ok"}
            texts = (await asyncio.to_thread(_scrape, first.admin.port),
                     await asyncio.to_thread(_scrape, second.admin.port),
                     await asyncio.to_thread(_scrape, third.admin.port))
        finally:
            await first.stop()
            await second.stop()
            await third.stop()
            await nc.close()
        return texts

    first_text, second_text, third_text = asyncio.run(scenario())
    scraped: dict[str, set[str]] = {}
    for text in (first_text, second_text, third_text):
        for name, labels in _samples(text).items():
            scraped.setdefault(name, set()).update(labels)

    exprs = _chart_expressions()
    used = {m for e in exprs for m in METRIC.findall(e)} - {"xrgw_endpoint"}  # a label
    assert len(used) >= 12, used
    missing = sorted(used - set(scraped))
    assert missing == [], f"dashboard/alerts use metrics the gateway does not expose: {missing}"
    for expr in exprs:
        for labels, metric in BY_CLAUSE.findall(expr):
            wanted = {label.strip() for label in labels.split(",")} - TARGET_LABELS
            assert wanted <= scraped[metric], f"{metric} has no label {wanted - scraped[metric]}"
        for metric, selector in SELECTOR.findall(expr):
            wanted = {m.group(1) for m in re.finditer(r"(\w+)\s*[=!~]", selector)}
            wanted -= TARGET_LABELS
            assert wanted <= scraped[metric], f"{metric} has no label {wanted - scraped[metric]}"
    assert 'xrgw_messages_dropped_total{reason="unmatched"}' in second_text
    assert re.search(r'xrgw_publish_errors_total\{endpoint="out-broken"', first_text)
    assert 'xrgw_deadletter_total{reason="undeliverable"} 1.0' in first_text
    assert 'xrgw_messages_deadlettered_total{reason="undeliverable"} 1.0' in first_text

    for name, labels in PROMISED.items():
        assert name in scraped, f"{name} is not in the scrape"
        assert labels <= scraped[name], f"{name} lacks {labels - scraped[name]}"
    for text in (first_text, second_text, third_text):
        assert "_created" not in text
    assert re.search(r'xrgw_messages_inflight_limit\{route="in-mqtt->out-nats"\} 4096\.0',
                     first_text)
    received = re.search(r'xrgw_received_bytes_total\{endpoint="in-http",protocol="HTTP",'
                         r'xrgw_endpoint="in-http"\} '
                         r'([0-9.e+]+)', first_text)
    assert received and float(received.group(1)) == len(b'{"v": 2}')  # aiohttp's json=
