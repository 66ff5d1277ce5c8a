"""A 65,535-byte MQTT topic (the protocol's limit), sent with Debian's `mosquitto_pub`,
through the daemon (in process) on a route whose template has three placeholders in one
segment: `/plant/{site}-{line}-{machine}/temp` (issue 28).

Before the template matcher was made linear, one 1,500-character topic of dashes that
no definition accepts held the event loop for ~9 s (the dead letter's `explain` ran the
backtracking regex), so `/healthz` stopped answering; at 65,535 characters it would take
weeks. Here the gateway must dead-letter that topic as `unmatched`, convert the one
closed by the right literal and a normal one, and keep answering `/healthz` — all
waited for as conditions (the suite's per-test timeout is what an old build would hit).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import nats

from adapters.registry import REGISTRY
from gateway.config import load_config
from gateway.daemon import Gateway

TEMPLATE = "/plant/{site}-{line}-{machine}/temp"
LONGEST = 65_535


def _config(tmp: Path, sfx: str, mosquitto: Any, nats_server: Any) -> Path:
    (tmp / "plant.xreg.json").write_text(json.dumps({
        "endpoints": {
            "plant-mqtt": {"usage": ["consumer"], "protocol": "MQTT/5.0",
                           "protocoloptions": {"topicfilter": "/plant/#", "qos": 1},
                           "messagegroups": ["#/messagegroups/plant"]},
            "events": {"usage": ["producer"], "protocol": "NATS",
                       "protocoloptions": {"subject": f"plant.events.{sfx}"}},
            "dead": {"usage": ["producer"], "protocol": "NATS",
                     "protocoloptions": {"subject": f"plant.dead.{sfx}"}},
        },
        "messagegroups": {"plant": {"envelope": "CloudEvents/1.0", "messages": {"temp": {
            "protocol": "MQTT/5.0",
            "protocoloptions": {"topic_name": TEMPLATE},
            "envelopemetadata": {"type": {"value": "com.example.temp"},
                                 "source": {"value": "/plant/{site}"},
                                 "subject": {"value": "{line}"}}}}}},
    }))
    config = {
        "definitions": ["plant.xreg.json"],
        "routes": [{"from": "plant-mqtt", "to": ["events"], "mode": "binary"}],
        "deadletter": "dead",
        "admin": {"listen": "127.0.0.1:0"}, "log": {"level": "error"},
        "shutdown": {"grace": "5s"},
        "endpoints": {
            "plant-mqtt": {"uri": mosquitto.url, "client_id": f"xrgw-long-{sfx}"},
            "events": {"uri": nats_server.url},
            "dead": {"uri": nats_server.url},
        },
    }
    path = tmp / "gateway.yaml"
    path.write_text(json.dumps(config, indent=1))
    return path


def _mosquitto_pub(url: str, topic: str, body: str) -> None:
    host, port = url.removeprefix("mqtt://").split(":")
    subprocess.run(["mosquitto_pub", "-h", host, "-p", port, "-V", "mqttv5", "-q", "1",
                    "-t", topic, "-m", body], check=True, timeout=60)


def _get(url: str) -> int:
    with urllib.request.urlopen(url, timeout=60) as answer:
        return int(answer.status)


def test_a_65535_byte_topic_is_dead_lettered_and_the_daemon_keeps_answering(
        tmp_path: Path, mosquitto: Any, nats_server: Any) -> None:
    sfx = uuid.uuid4().hex[:8]
    config, problems = load_config(_config(tmp_path, sfx, mosquitto, nats_server))
    assert config is not None, [str(p) for p in problems]
    dashes = "-" * (LONGEST - len("/plant//tempx"))
    miss = f"/plant/{dashes}/tempx"  # no definition: unmatched, then explained
    hit = f"/plant/{dashes}x/temp"  # the template's split: site "-", line "-"
    assert len(miss.encode()) == len(hit.encode()) == LONGEST

    async def scenario() -> tuple[list[Any], list[Any], int]:
        gateway = Gateway(config, REGISTRY)
        nc = await nats.connect(nats_server.url)
        events: list[Any] = []
        dead: list[Any] = []

        async def on_event(message: Any) -> None:
            events.append(message)

        async def on_dead(message: Any) -> None:
            dead.append(message)

        subs = [await nc.subscribe(f"plant.events.{sfx}", cb=on_event),
                await nc.subscribe(f"plant.dead.{sfx}", cb=on_dead)]
        await gateway.start()
        try:
            async with asyncio.timeout(60):
                while not all(gateway.readiness().values()):
                    await asyncio.sleep(0.05)
            for topic, n in ((miss, 1), (hit, 2), ("/plant/p1-l2-m3/temp", 3)):
                await asyncio.to_thread(_mosquitto_pub, mosquitto.url, topic,
                                        json.dumps({"n": n}))
            healthz = f"http://127.0.0.1:{gateway.admin.port}/healthz"
            status = await asyncio.to_thread(_get, healthz)
            async with asyncio.timeout(120):
                while len(events) < 2 or not dead:
                    await asyncio.sleep(0.05)
            return events, dead, status
        finally:
            for sub in subs:
                await sub.unsubscribe()
            await nc.close()
            await gateway.stop()

    events, dead, status = asyncio.run(scenario())
    assert status == 200
    assert len(dead) == 1 and (dead[0].headers or {}).get("xrgw-reason") == "unmatched"
    assert json.loads(dead[0].data) == {"n": 1}
    by_body = {json.loads(m.data)["n"]: m.headers or {} for m in events}
    assert sorted(by_body) == [2, 3]
    assert by_body[2]["ce-source"] == "/plant/-" and by_body[2]["ce-subject"] == "-"
    assert by_body[3]["ce-source"] == "/plant/p1" and by_body[3]["ce-subject"] == "l2"
