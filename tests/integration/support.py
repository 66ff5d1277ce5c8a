"""Small helpers shared by the integration tests: running an async test, the xRegistry
producer endpoints a test adds to a catalog, publishing store sales over MQTT, and
watching an in-process gateway (`gateway.daemon.Gateway`) until it is ready, a metric,
`/readyz`, or a NATS subject says what the test waits for."""

from __future__ import annotations

import asyncio
import functools
import json
import urllib.error
import urllib.request
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, ParamSpec

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from harness.brokers import TlsFiles

if TYPE_CHECKING:
    from pathlib import Path

    from adapters.memory import MemoryProducer
    from gateway.config import GatewayConfig
    from gateway.daemon import Gateway
    from gateway.observability.metrics import Metrics
    from gateway.runtime.route import Route
    from harness.tls import Pki

P = ParamSpec("P")

#: Seconds a gateway test waits for a condition (a loaded 2-core machine).
PATIENCE = 60.0


class ReplyGateway:
    """A reply route under test (`tests/integration/test_request_reply*.py`): the route,
    its dead-letter producer, and its metrics."""

    def __init__(self, route: Route, dlq: MemoryProducer, metrics: Metrics) -> None:
        self.route = route
        self.dlq = dlq
        self.metrics = metrics

    def count(self, name: str, **labels: str) -> float:
        return self.metrics.registry.get_sample_value(name, labels) or 0.0

    def reasons(self) -> list[str]:
        from gateway.deadletter.format import deadletter_metadata

        return [deadletter_metadata(r)["xrgw-reason"] for r in self.dlq.written]


def asyncio_test(fn: Callable[P, Coroutine[Any, Any, None]]) -> Callable[P, None]:
    """Run an async test function in a fresh event loop (no pytest plugin needed);
    `functools.wraps` keeps the signature, so pytest still injects fixtures."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> None:
        asyncio.run(fn(*args, **kwargs))

    return wrapper


def tls_files(pki: Pki) -> TlsFiles:
    """A harness broker's TLS files from a test PKI (`harness.tls.make_pki`)."""
    return TlsFiles(pki.ca, pki.server_cert, pki.server_key, pki.client_cert, pki.client_key)


# -- catalog pieces ------------------------------------------------------------------------

def nats_endpoint(url: str, subject: str, jetstream: bool = False) -> dict[str, Any]:
    """An xRegistry NATS producer endpoint publishing to `subject` (through JetStream,
    waiting for the PubAck, with `jetstream`)."""
    options: dict[str, Any] = {"endpoints": [{"uri": url}], "subject": subject}
    if jetstream:
        options["jetstream"] = True
    return {"usage": ["producer"], "protocol": "NATS", "protocoloptions": options}


def mqtt_endpoint(url: str, topic: str) -> dict[str, Any]:
    """An xRegistry MQTT 5 producer endpoint publishing to `topic` with QoS 1."""
    return {"usage": ["producer"], "protocol": "MQTT/5.0",
            "protocoloptions": {"endpoints": [{"uri": url}], "topic": topic, "qos": 1}}


def loaded(path: Path) -> GatewayConfig:
    """The gateway configuration at `path`, which must load without problems."""
    from gateway.config import load_config

    config, problems = load_config(path)
    assert config is not None, [str(p) for p in problems]
    return config


# -- senders -------------------------------------------------------------------------------

def publish_sales(url: str, messages: list[tuple[str, bytes]]) -> None:
    """Publish (topic, JSON body) pairs as MQTT 5 QoS 1 sales of the store catalog
    (user property eventType=com.example.sale), each confirmed, with paho."""
    host, port = url.removeprefix("mqtt://").split(":")
    client = paho.Client(CallbackAPIVersion.VERSION2, protocol=MQTTProtocolVersion.MQTTv5)
    client.connect(host, int(port))
    client.loop_start()
    try:
        for topic, body in messages:
            properties = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
            properties.UserProperty = [("eventType", "com.example.sale")]
            properties.ContentType = "application/json"
            client.publish(topic, body, qos=1, properties=properties).wait_for_publish(30)
    finally:
        client.loop_stop()
        client.disconnect()


# -- watching a gateway --------------------------------------------------------------------

def write_store_catalog(folder: Path, sfx: str) -> None:
    """`store.xreg.json` in `folder`: MQTT sales on `st/<sfx>/{storeid}/cashierdesk` as
    CloudEvents to a NATS `events.<sfx>` producer, with a NATS `dead.<sfx>` endpoint for
    dead letters (the admin-page and tap tests' catalog)."""
    doc = {
        "$schema": "https://cloudevents.io/schemas/registry", "specversion": "1.0-rc4",
        "endpoints": {
            "store-mqtt": {"usage": ["consumer"], "protocol": "MQTT/5.0",
                           "protocoloptions": {"topicfilter": f"st/{sfx}/#", "qos": 1},
                           "messagegroups": ["#/messagegroups/store"]},
            "events": {"usage": ["producer"], "protocol": "NATS",
                       "protocoloptions": {"subject": f"events.{sfx}"}},
            "dead": {"usage": ["producer"], "protocol": "NATS",
                     "protocoloptions": {"subject": f"dead.{sfx}"}},
        },
        "messagegroups": {"store": {"envelope": "CloudEvents/1.0", "messages": {"sale": {
            "protocol": "MQTT/5.0",
            "protocoloptions": {"topic_name": f"st/{sfx}/{{storeid}}/cashierdesk"},
            "envelope": "CloudEvents/1.0",
            "envelopemetadata": {"type": {"value": "com.example.sale"},
                                 "source": {"type": "uritemplate",
                                            "value": "/stores/{storeid}"}}}}}},
    }
    (folder / "store.xreg.json").write_text(json.dumps(doc))


def write_store_gateway(folder: Path, sfx: str, mqtt: str, nats_url: str,
                        redact: list[str]) -> Path:
    """The store catalog (`write_store_catalog`) and a `gateway.yaml` beside it: its MQTT
    sales route to the NATS `events` producer with `redact`, dead letters to `dead`, the
    admin server on a free loopback port. Returns the config's path."""
    write_store_catalog(folder, sfx)
    path = folder / "gateway.yaml"
    path.write_text(json.dumps({
        "definitions": ["store.xreg.json"],
        "routes": [{"from": "store-mqtt", "to": ["events"], "redact": redact}],
        "deadletter": "dead", "admin": {"listen": "127.0.0.1:0"}, "log": {"level": "warning"},
        "shutdown": {"grace": "1s"},
        "endpoints": {"store-mqtt": {"uri": mqtt}, "events": {"uri": nats_url},
                      "dead": {"uri": nats_url}}}))
    return path


def readyz(port: int) -> tuple[int, dict[str, Any]]:
    """The admin server's `/readyz`: status and JSON body."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz") as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def metric(gateway: Gateway, name: str, **labels: str) -> float:
    """A sample of the gateway's metrics (0 when it has none yet)."""
    value = gateway.metrics.registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


async def until(condition: Callable[[], bool], what: str, timeout: float = PATIENCE) -> None:
    """Wait until `condition()` holds; fail saying `what` was waited for."""
    try:
        async with asyncio.timeout(timeout):
            while not condition():
                await asyncio.sleep(0.05)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None


async def started(gateway: Gateway) -> None:
    """Start the gateway and wait until every route is ready."""
    await gateway.start()
    await until(lambda: all(gateway.readiness().values()), "the routes to be ready")


async def collect(nc: Any, subject: str) -> list[Any]:
    """Subscribe a nats-py connection to `subject`; the list fills with what arrives."""
    arrived: list[Any] = []

    async def on_message(msg: Any) -> None:
        arrived.append(msg)

    await nc.subscribe(subject, cb=on_message)
    return arrived
