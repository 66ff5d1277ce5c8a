"""Every metric the Helm chart's Grafana dashboard and PrometheusRule use exists in a
real scrape of running gateways (no panel or alert on a metric that does not exist),
with the labels the queries aggregate by.

Two gateways run in process (`gateway.daemon.Gateway`, real adapters):
  1. MQTT in (Mosquitto) -> NATS out, and HTTP ingress -> an HTTP output that refuses
     connections (publish errors, then `undeliverable`); dead letter on NATS; one reload.
  2. HTTP ingress with `deadletter: log`, the only mode where messages are dropped.
Messages are pushed through both so that the labelled series exist, then GET /metrics.
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
import yaml
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion
from prometheus_client.parser import text_string_to_metric_families

from adapters.registry import REGISTRY
from gateway.config import load_config
from gateway.daemon import Gateway
from harness.brokers import free_port

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "xrgw"
#: Labels Prometheus adds to every scraped series (target labels), and histogram `le`.
TARGET_LABELS = {"namespace", "pod", "job", "instance", "service", "container", "le"}
METRIC = re.compile(r"\b(xrgw_[a-z_]+)\b")
BY_CLAUSE = re.compile(r"by \(([^)]*)\)\s*\((?:\w+\()?(xrgw_[a-z_]+)")
SELECTOR = re.compile(r"(xrgw_[a-z_]+)\{([^}]*)\}")


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


async def _until(check: Any, what: str, timeout: float = 30.0) -> None:
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.1)
    assert check(), what


def test_dashboard_and_alert_metrics_exist_in_a_real_scrape(tmp_path: Path, mosquitto: Any,
                                                           nats_server: Any) -> None:
    sfx = uuid.uuid4().hex[:8]
    main_path, drop_path, http_in, http_in_log = _configs(tmp_path, sfx, mosquitto, nats_server)
    main, problems = load_config(main_path)
    assert main is not None, [str(p) for p in problems]
    drop, problems = load_config(drop_path)
    assert drop is not None, [str(p) for p in problems]

    async def scenario() -> tuple[str, str]:
        first, second = Gateway(main, REGISTRY), Gateway(drop, REGISTRY)
        nc = await nats.connect(nats_server.url)
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
        try:
            await _until(lambda: all(first.readiness().values())
                         and all(second.readiness().values()), "gateways ready")
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
                     await asyncio.to_thread(_scrape, second.admin.port))
        finally:
            await first.stop()
            await second.stop()
            await nc.close()
        return texts

    first_text, second_text = asyncio.run(scenario())
    scraped: dict[str, set[str]] = {}
    for text in (first_text, second_text):
        for name, labels in _samples(text).items():
            scraped.setdefault(name, set()).update(labels)

    exprs = _chart_expressions()
    used = {m for e in exprs for m in METRIC.findall(e)}
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
