"""The gateway as a bridge command of an external passthrough harness, with a large catalog.

Not a test. A passthrough harness that runs "bridge commands" (a child process told its
route through `PKB_*` environment variables: source and sink protocol, topics, stream,
durable, prefixes, broker addresses) can run the gateway with this script, e.g.

    XRGW=.venv/bin/xrgw XRGW_DEFINITIONS=10000 python3 bench/catalog_bridge.py

It writes an xRegistry document and an `xrgw run` config for that route and execs the
gateway. The route is the store example: the source address carries `storeid` and
`cdid` (MQTT topic, NATS subject, Kafka key, AMQP subject, HTTP path), the event gets
`type`, `source` and `subject` from them, binary CloudEvents out (structured for an MQTT
sink, which may be 3.1.1). Besides the definition that matches, the catalog holds
`XRGW_DEFINITIONS - 1` more for the same source endpoint that match nothing the harness
sends (other topics, subjects, paths), so a run measures what a large catalog costs per
message. With `XRGW_DEFINITIONS=1` it is the plain one-definition route.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

ENV = os.environ
PROTOCOLS = {"mqtt": "MQTT/3.1.1", "kafka": "KAFKA", "nats": "NATS", "amqp": "AMQP/1.0",
             "http": "HTTP"}


def uri(protocol: str) -> str:
    if protocol == "mqtt":
        return (f"mqtt://{ENV.get('PKB_MQTT_HOST', '127.0.0.1')}:"
                f"{ENV.get('PKB_MQTT_PORT', '1884')}")
    if protocol == "kafka":
        return f"kafka://{ENV.get('PKB_KAFKA_BOOTSTRAP', '127.0.0.1:9092')}"
    if protocol == "nats":
        return ENV.get("PKB_NATS_URL", "nats://127.0.0.1:4222")
    if protocol == "amqp":
        return ENV.get("PKB_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672")
    return (f"http://{ENV.get('PKB_HTTP_HOST', '127.0.0.1')}:"
            f"{ENV.get('PKB_HTTP_PORT', '18080')}")


def source_options(protocol: str) -> dict[str, Any]:
    if protocol == "mqtt":
        return {"qos": 1}
    if protocol == "kafka":
        return {"topic": ENV["PKB_SRC_KAFKA_TOPIC"], "consumergroup": ENV["PKB_SRC_KAFKA_GROUP"]}
    if protocol == "nats":
        return {"stream": ENV["PKB_SRC_NATS_STREAM"], "durable": ENV["PKB_SRC_NATS_DURABLE"],
                "subjectfilter": ENV["PKB_SRC_NATS_SUBJECT"]}
    if protocol == "amqp":
        # The harness's seeder declares its /queue/ address transient; the default
        # `terminus-durability: auto` attaches to it as it is (adapters/amqp/terminus.py).
        return {"node": ENV["PKB_SRC_AMQP_ADDRESS"]}
    return {}


def address(protocol: str, scope: str) -> dict[str, Any]:
    """The protocol options a definition matches on; `scope` "" is the harness's own
    address, anything else an address the harness never sends to."""
    path = f"{scope}store/{{storeid}}/cashierdesk/{{cdid}}"
    if protocol == "mqtt":
        return {"topic_name": ENV.get("PKB_SRC_MQTT_PREFIX", "") + path}
    if protocol == "kafka":
        topic = ENV["PKB_SRC_KAFKA_TOPIC"] + (f"-{scope.strip('/')}" if scope else "")
        return {"topic": topic, "key": "store/{storeid}/cashierdesk/{cdid}"}
    if protocol == "nats":
        return {"subject": ENV.get("PKB_SRC_NATS_PREFIX", "") + path.replace("/", ".")}
    if protocol == "amqp":
        return {"properties": {"subject": {"type": "uritemplate", "value": path}}}
    return {"method": "POST", "path": "/" + path}


def sink_options(protocol: str) -> dict[str, Any]:
    if protocol == "kafka":
        return {"topic": ENV["PKB_SINK_KAFKA_TOPIC"]}
    if protocol == "nats":
        return {"subject": ENV.get("PKB_SINK_NATS_PREFIX", "") + "ce"}
    return {"topic": ENV.get("PKB_SINK_MQTT_PREFIX", "") + "ce", "qos": 1}


def definition(protocol: str, scope: str, kind: str) -> dict[str, Any]:
    return {"protocol": PROTOCOLS[protocol], "protocoloptions": address(protocol, scope),
            "envelope": "CloudEvents/1.0",
            "envelopemetadata": {
                "type": {"value": f"com.example.store.{kind}"},
                "source": {"type": "uritemplate", "value": "/stores/{storeid}"},
                "subject": {"type": "uritemplate", "value": "{cdid}"}}}


def document(source: str, sink: str, count: int) -> dict[str, Any]:
    messages = {"sale": definition(source, "", "sale")}
    for index in range(1, count):
        messages[f"other{index}"] = definition(source, f"other{index}/", f"other{index}")
    return {
        "specversion": "1.0",
        "endpoints": {
            "src": {"usage": ["consumer"], "protocol": PROTOCOLS[source],
                    "protocoloptions": {"endpoints": [{"uri": uri(source)}],
                                        **source_options(source)},
                    "messagegroups": ["#/messagegroups/store"]},
            "dst": {"usage": ["producer"], "protocol": PROTOCOLS[sink],
                    "protocoloptions": {"endpoints": [{"uri": uri(sink)}],
                                        **sink_options(sink)}},
        },
        "messagegroups": {"store": {"envelope": "CloudEvents/1.0", "messages": messages}},
    }


def main() -> None:
    source, sink = ENV["PKB_SOURCE"], ENV["PKB_SINK"]
    folder = tempfile.mkdtemp(prefix="xrgw-catalog-")
    with open(os.path.join(folder, "catalog.xreg.json"), "w", encoding="utf-8") as out:
        json.dump(document(source, sink, int(ENV.get("XRGW_DEFINITIONS", "10000"))), out)
    client = (f"\n  src: {{client_id: {ENV['PKB_SRC_MQTT_CLIENT_ID']}}}"
              if source == "mqtt" else " {}")
    mode = "structured" if sink == "mqtt" else "binary"
    config = os.path.join(folder, "xrgw.yaml")
    with open(config, "w", encoding="utf-8") as out:
        out.write(f"definitions: [catalog.xreg.json]\nroutes:\n  - from: src\n    to: [dst]\n"
                  f"    mode: {mode}\ndeadletter: log\nadmin: {{listen: \"127.0.0.1:0\"}}\n"
                  f"log: {{level: warning}}\nendpoints:{client}\n")
    executable = ENV.get("XRGW", "xrgw")
    os.execvp(executable, [executable, "run", "-c", config])


if __name__ == "__main__":
    main()
