"""`xrgw learn -c CONFIG --endpoint ID` against real brokers: MQTT (Mosquitto) stopping at
`--count`, NATS core stopping on SIGTERM during a long `--for`.

The command runs as a real `xrgw` process next to the endpoint's *real* consumer, which
uses the settings the configuration names (the MQTT client id, the NATS queue group): an
observer that reused them would take its messages (MQTT: the broker disconnects the older
client with the same id; NATS: a queue group member shares). Each case checks that the
real consumer received every message sent, that the command read every one of them, and
that the draft validates and matches the sent messages.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import nats
import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion

from gateway.cli import main
from gateway.record import NativeMessage

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 30.0
DEVICES = 5


def _config(tmp: Path, protocol: str, address: dict[str, str], source: dict[str, Any]) -> str:
    """A gateway config whose route reads `source`; its definition's address is what the
    observer subscribes to (as an observing route would), broader than what is learned."""
    doc = {
        "$schema": "https://cloudevents.io/schemas/registry", "specversion": "1.0-rc4",
        "endpoints": {
            "source": {"usage": ["consumer"], "protocol": protocol, "protocoloptions": {},
                       "messagegroups": ["#/messagegroups/plant"]},
            "out": {"usage": ["producer"], "protocol": "NATS",
                    "protocoloptions": {"subject": "learn.out"}},
        },
        "messagegroups": {"plant": {"envelope": "CloudEvents/1.0", "messages": {
            "anything": {"protocol": protocol, "protocoloptions": address,
                         "envelope": "CloudEvents/1.0",
                         "envelopemetadata": {"type": {"value": "com.example.any"}}}}}},
    }
    (tmp / "plant.xreg.json").write_text(json.dumps(doc))
    config = {"definitions": ["plant.xreg.json"],
              "routes": [{"from": "source", "to": ["out"]}], "deadletter": "log",
              "endpoints": {"source": source, "out": {"uri": "nats://127.0.0.1:1"}}}
    path = tmp / "gateway.yaml"
    path.write_text(json.dumps(config))
    return str(path)


def _start_learn(*args: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "gateway.cli", "learn", *args], cwd=ROOT, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.stderr is not None
    line = proc.stderr.readline()  # printed once the observing subscription is made
    assert "observing endpoint 'source'" in line, line + proc.stderr.read()
    return proc


def _finish(proc: subprocess.Popen[str]) -> tuple[dict[str, Any], str]:
    out, err = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0, err
    return json.loads(out), err


def _draft_matches(tmp: Path, draft: Path, sent: list[NativeMessage], capsys: Any) -> None:
    assert main(["validate", str(draft)]) == 0, capsys.readouterr()
    records = tmp / "sent.jsonl"
    records.write_text("".join(m.to_line() + "\n" for m in sent))
    capsys.readouterr()
    assert main(["match", "-d", str(draft), str(records), "--no-explain"]) == 0
    results = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(results) == len(sent)
    assert all(r["match"] for r in results), [r for r in results if not r["match"]][:3]


def test_learn_from_mqtt_until_count_leaves_every_message_to_the_real_consumer(
        tmp_path: Path, mosquitto: Any, capsys: Any) -> None:
    sfx = uuid.uuid4().hex[:8]
    config = _config(tmp_path, "MQTT/5.0", {"topic_name": f"plant/{sfx}/{{device}}/{{kind}}"},
                     {"uri": mosquitto.url, "client_id": f"real-{sfx}"})
    real: queue.Queue[Any] = queue.Queue()
    disconnects: list[Any] = []
    client = paho.Client(CallbackAPIVersion.VERSION2, client_id=f"real-{sfx}",
                         protocol=MQTTProtocolVersion.MQTTv5)
    client.on_message = lambda _c, _u, msg: real.put(msg)
    client.on_disconnect = lambda *a: disconnects.append(a)
    client.connect("127.0.0.1", mosquitto.port)
    client.loop_start()
    client.subscribe(f"plant/{sfx}/+/+", qos=1)
    draft = tmp_path / "draft.xreg.json"
    sent = [NativeMessage("MQTT/5.0", {"topic_name": f"plant/{sfx}/dev{n % DEVICES}/{kind}",
                                       "qos": 1, "retain": False},
                          data={"device": f"dev{n % DEVICES}", "value": n})
            for n in range(20) for kind in ("reading", "alarm")]
    try:
        proc = _start_learn("-c", config, "--endpoint", "source", "--count", str(len(sent)),
                            "--for", "2m", "-o", str(draft), "--format", "json")
        for message in sent:
            client.publish(message.fields["topic_name"], json.dumps(message.data),
                           qos=1).wait_for_publish(5)
        summary, err = _finish(proc)
        deadline = time.monotonic() + TIMEOUT
        while real.qsize() < len(sent) and time.monotonic() < deadline:
            time.sleep(0.05)
        taken_over = list(disconnects)  # before our own disconnect below
    finally:
        client.disconnect()
        client.loop_stop()
    assert real.qsize() == len(sent), "the real consumer lost messages to the observer"
    assert not taken_over, "the observer took over the real consumer's client id"
    assert f"read {len(sent)} message(s) from endpoint 'source'" in err
    assert "(count reached)" in err
    assert summary["messages"] == len(sent)
    definitions = summary["definitions"]
    assert sorted(d["messages"] for d in definitions) == [20, 20]
    for definition in definitions:
        assert [(p["name"], p["cardinality"]) for p in definition["placeholders"]] == [
            ("device", DEVICES)]
    _draft_matches(tmp_path, draft, sent, capsys)


def test_learn_from_nats_stops_on_sigterm_and_learns_what_was_read(
        tmp_path: Path, nats_server: Any, capsys: Any) -> None:
    sfx = uuid.uuid4().hex[:8]
    config = _config(tmp_path, "NATS", {"subject": f"plant.{sfx}.{{device}}"},
                     {"uri": nats_server.url, "options": {"queuegroup": f"real-{sfx}"}})
    sent = [NativeMessage("NATS", {"subject": f"plant.{sfx}.dev{n % DEVICES}"},
                          data={"device": f"dev{n % DEVICES}", "value": n})
            for n in range(25)]
    draft = tmp_path / "draft.xreg.json"

    async def traffic() -> int:
        nc = await nats.connect(nats_server.url)
        seen: list[Any] = []

        async def got(msg: Any) -> None:
            seen.append(msg)

        await nc.subscribe(f"plant.{sfx}.*", queue=f"real-{sfx}", cb=got)
        await nc.flush()
        for message in sent:
            await nc.publish(message.fields["subject"], json.dumps(message.data).encode())
        await nc.flush()
        deadline = time.monotonic() + TIMEOUT
        while len(seen) < len(sent) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        await asyncio.sleep(1.5)  # the observer's copies arrive as fast; let it settle them
        await nc.close()
        return len(seen)

    proc = _start_learn("-c", config, "--endpoint", "source", "--for", "10m", "-o",
                        str(draft), "--format", "json")
    try:
        real = asyncio.run(traffic())
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        summary, err = _finish(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert time.monotonic() - started < 10, "SIGTERM did not stop reading"
    assert real == len(sent), "the real consumer lost messages to the observer"
    assert f"read {len(sent)} message(s) from endpoint 'source'" in err
    assert "(interrupted)" in err
    assert summary["messages"] == len(sent)
    [definition] = summary["definitions"]
    assert [(p["name"], p["cardinality"]) for p in definition["placeholders"]] == [
        ("device", DEVICES)]
    _draft_matches(tmp_path, draft, sent, capsys)
