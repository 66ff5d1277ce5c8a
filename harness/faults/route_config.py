"""The gateway configs of the fault scenarios: one route from a source endpoint of
`faults.xreg.json` to its outputs, with the harness brokers' URLs and per-scenario
topics, subjects and client ids as endpoint overrides, written into the test's folder."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from harness.brokers import Mosquitto, Tansu, free_port

#: The definitions every fault config loads (endpoints, message groups).
FAULT_DEFINITIONS = Path(__file__).resolve().parent / "faults.xreg.json"

#: The route's window: messages read from the source and not yet settled.
INFLIGHT = 128
#: The source consumer's `max_in_flight` (for MQTT sent as MQTT 5 Receive Maximum: the
#: broker keeps at most this many QoS 1 PUBLISHes to the gateway unacknowledged).
RECEIVE_MAX = 64
#: `shutdown: {grace: 5s}` in every config.
GRACE = 5.0

#: A retry budget (~1 minute) that outlasts a broker restart: nothing should be
#: dead-lettered as undeliverable while a broker is merely restarting.
PATIENT_RETRY: dict[str, object] = {"attempts": 60, "initial_backoff": "100ms",
                                    "max_backoff": "1s"}
#: A budget a down sink exhausts in well under a second.
SHORT_RETRY: dict[str, object] = {"attempts": 3, "initial_backoff": "10ms",
                                  "max_backoff": "20ms"}


def write_route_config(tmp: Path, *, name: str, source: tuple[str, dict[str, object]],
                       outputs: dict[str, dict[str, object]],
                       deadletter: tuple[str, dict[str, object]], admin_port: int,
                       retry: dict[str, object] | None = None) -> Path:
    """The gateway config for one route `source` -> `outputs` (endpoint id -> override)."""
    shutil.copy(FAULT_DEFINITIONS, tmp / FAULT_DEFINITIONS.name)
    config = {
        "definitions": [FAULT_DEFINITIONS.name],
        "routes": [{
            "from": source[0],
            "to": list(outputs),
            "mode": "binary",
            "inflight": INFLIGHT,
            "retry": retry or PATIENT_RETRY,
        }],
        "deadletter": deadletter[0],
        "admin": {"listen": f"127.0.0.1:{admin_port}"},
        "log": {"level": "info", "format": "text"},
        "shutdown": {"grace": f"{GRACE:g}s"},
        "endpoints": {source[0]: source[1], **outputs, deadletter[0]: deadletter[1]},
    }
    path = tmp / f"{name}.yaml"
    path.write_text(json.dumps(config, indent=2))
    return path


def write_config(tmp: Path, *, name: str, mqtt: Mosquitto, client_id: str, run: str,
                 outputs: dict[str, dict[str, object]], tansu: Tansu, deadletter_topic: str,
                 admin_port: int, topicfilter: str | None = None,
                 retry: dict[str, object] | None = None,
                 deadletter: tuple[str, dict[str, object]] | None = None) -> Path:
    """The gateway config (JSON is YAML) for one route faults-mqtt -> `outputs`; the dead
    letter is the Kafka topic `deadletter_topic` unless `deadletter` names another."""
    source: dict[str, object] = {
        "uri": mqtt.url,
        "client_id": client_id,  # stable: the persistent session survives restarts
        "options": {"topicfilter": topicfilter or f"/faults/{run}/+",
                    "max_in_flight": RECEIVE_MAX},
    }
    return write_route_config(
        tmp, name=name, source=("faults-mqtt", source), outputs=outputs,
        deadletter=deadletter or ("faults-deadletter", {
            "uri": tansu.url, "options": {"topic": deadletter_topic}}),
        admin_port=admin_port, retry=retry)


def mqtt_to_kafka_config(tmp: Path, *, name: str, short: str, mqtt: Mosquitto, tansu: Tansu,
                         run: str) -> tuple[Path, int, str, str]:
    """The plain MQTT -> Kafka route the kill, source-restart and SIGTERM scenarios share:
    (config path, admin port, output topic, dead-letter topic)."""
    topic, dead_topic = f"faults-{short}-{run}", f"faults-{short}-dead-{run}"
    port = free_port()
    config = write_config(
        tmp, name=name, mqtt=mqtt, client_id=f"xrgw-faults-{short}-{run}",
        run=run, outputs={"faults-kafka": {"uri": tansu.url, "options": {"topic": topic}}},
        tansu=tansu, deadletter_topic=dead_topic, admin_port=port)
    return config, port, topic, dead_topic
