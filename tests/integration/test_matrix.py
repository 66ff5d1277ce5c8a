"""The protocol matrix, end to end through real brokers: every input protocol (MQTT 5,
AMQP 1.0, Kafka, NATS, HTTP ingress) x every output protocol (MQTT 5, AMQP 1.0, Kafka,
NATS, HTTP egress) x {binary, structured}, plus CloudEvents in -> native out.

One gateway (in process, `gateway.daemon.Gateway` with `adapters.registry.REGISTRY`)
runs ten routes at once: one per (input protocol, mode), each feeding the five producer
endpoints of its mode. Every input has its own address and its definition renders the
input protocol into the CloudEvent `source` (`/in/<protocol>/<device>`), so the outputs
can be told apart. The scenario runs once per module; each (input, output, mode) cell is
then its own test case over the captured outputs.

The xRegistry document is built in code (`_matrix_document`), because every address
carries a per-run suffix (the brokers are shared by the whole session).
"""

from __future__ import annotations

import asyncio
import json
import queue
import re
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import nats
import paho.mqtt.client as paho
import pytest
from aiohttp import web
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer  # type: ignore[import-untyped]
from aiokafka.admin import AIOKafkaAdminClient, NewTopic  # type: ignore[import-untyped]
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from proton import Link, Message, Terminus
from proton.reactor import LinkOption
from proton.utils import BlockingConnection

from adapters.registry import REGISTRY
from gateway.config import load_config
from gateway.daemon import Gateway
from gateway.envelope.ids import ID_NAMESPACE
from harness.brokers import free_port

INPUTS = ("mqtt", "amqp", "kafka", "nats", "http")
OUTPUTS = ("mqtt", "amqp", "kafka", "nats", "http")
MODES = ("binary", "structured")
TIMEOUT = 30.0
FIXTURES = Path(__file__).resolve().parent / "fixtures"

PROTOCOL = {"mqtt": "MQTT/5.0", "amqp": "AMQP/1.0", "kafka": "KAFKA", "nats": "NATS",
            "http": "HTTP"}
STRUCTURED_CT = "application/cloudevents+json; charset=utf-8"
RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")
UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[1-5][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
#: Every attribute the matrix definitions render (no extensions, no dataschema).
ATTRIBUTES = {"specversion", "id", "source", "type", "subject", "time", "datacontenttype"}


def _uid() -> str:
    return uuid.uuid4().hex[:8]


def _device(proto: str, mode: str) -> str:
    return f"dev-{proto}-{mode}"


# ------------------------------------------------------------------ the xRegistry document


def _addresses(sfx: str, mode: str) -> dict[str, str]:
    """Native input addresses of one mode (with the per-run suffix)."""
    return {
        "mqtt": f"/in/{mode}/{sfx}/mqtt/{{device}}",
        "kafka": f"in-{mode}-kafka-{sfx}",
        "nats": f"in.{mode}.{sfx}.nats.{{device}}",
        "amqp": f"/queue/in-{mode}-amqp-{sfx}",
        "http": f"/in/{mode}/{sfx}/http/{{device}}",
    }


def _input_message(proto: str, sfx: str, mode: str) -> dict[str, Any]:
    address = _addresses(sfx, mode)[proto]
    options: dict[str, Any]
    if proto == "mqtt":
        options = {"topic_name": address}
    elif proto == "kafka":
        options = {"topic": address, "key": "{device}"}
    elif proto == "nats":
        options = {"subject": address}
    elif proto == "amqp":
        options = {"properties": {"subject": {"value": "{device}"}}}
    else:
        options = {"path": address, "method": "POST"}
    return {
        "protocol": PROTOCOL[proto],
        "protocoloptions": options,
        "envelope": "CloudEvents/1.0",
        "envelopemetadata": {
            "type": {"value": f"com.example.matrix.{proto}"},
            "source": {"type": "uritemplate", "value": f"/in/{proto}/{{device}}"},
            "subject": {"type": "uritemplate", "value": "{device}"},
        },
    }


def _matrix_document(sfx: str) -> dict[str, Any]:
    groups: dict[str, Any] = {}
    endpoints: dict[str, Any] = {}
    for mode in MODES:
        for proto in INPUTS:
            group = f"in-{proto}-{mode}"
            groups[group] = {"envelope": "CloudEvents/1.0", "messages": {
                f"reading-{proto}": _input_message(proto, sfx, mode)}}
            endpoints[group] = {"usage": ["consumer"], "protocol": PROTOCOL[proto],
                                "protocoloptions": {},
                                "messagegroups": [f"#/messagegroups/{group}"]}
        for proto in OUTPUTS:
            options: dict[str, Any] = {}
            if proto == "mqtt":
                options = {"topic": f"/out/{mode}/{sfx}", "qos": 1}
            elif proto == "kafka":
                options = {"topic": f"out-{mode}-{sfx}"}
            elif proto == "nats":
                options = {"subject": f"out.{mode}.{sfx}"}
            endpoints[f"out-{proto}-{mode}"] = {
                "usage": ["producer"], "protocol": PROTOCOL[proto], "protocoloptions": options}
    return {"$schema": "https://cloudevents.io/schemas/registry", "specversion": "1.0-rc4",
            "endpoints": endpoints, "messagegroups": groups}


def _matrix_config(tmp: Path, sfx: str, *, mosquitto: Any, tansu: Any, nats_server: Any,
                   rabbitmq: Any, http_port: int) -> Path:
    (tmp / "matrix.xreg.json").write_text(json.dumps(_matrix_document(sfx), indent=1))
    uri = {"mqtt": mosquitto.url, "kafka": tansu.url, "nats": nats_server.url,
           "amqp": rabbitmq.login_url, "http": ""}
    overrides: dict[str, Any] = {}
    routes = []
    for mode in MODES:
        for proto in INPUTS:
            eid = f"in-{proto}-{mode}"
            # The config rejects port 0 (an ephemeral ingress port nobody could find).
            over: dict[str, Any] = {"uri": uri[proto] or f"http://127.0.0.1:{free_port()}"}
            if proto == "kafka":
                over["options"] = {"consumergroup": f"matrix-{mode}-{sfx}",
                                   "session_timeout_ms": 3000, "heartbeat_interval_ms": 500}
            elif proto == "amqp":
                over["options"] = {"node": _addresses(sfx, mode)["amqp"]}
            overrides[eid] = over
            routes.append({"from": eid, "to": [f"out-{o}-{mode}" for o in OUTPUTS],
                           "mode": mode, "retry": {"attempts": 3, "initial_backoff": "50ms"}})
        for proto in OUTPUTS:
            over = {"uri": uri[proto]}
            if proto == "amqp":
                over["options"] = {"node": f"/queue/out-{mode}-{sfx}"}
            elif proto == "http":
                over["uri"] = f"http://127.0.0.1:{http_port}/out/{mode}"
            overrides[f"out-{proto}-{mode}"] = over
    config = {"definitions": ["matrix.xreg.json"], "routes": routes, "deadletter": "log",
              "admin": {"listen": "127.0.0.1:0"}, "log": {"level": "warning"},
              "shutdown": {"grace": "2s"}, "endpoints": overrides}
    path = tmp / "gateway.yaml"
    path.write_text(json.dumps(config, indent=1))  # JSON is YAML
    return path


# ------------------------------------------------------------------ native clients


def _mqtt_client(port: int, *, client_id: str = "") -> tuple[paho.Client, queue.Queue[Any]]:
    got: queue.Queue[Any] = queue.Queue()
    client = paho.Client(CallbackAPIVersion.VERSION2, client_id=client_id or f"t-{_uid()}",
                         protocol=MQTTProtocolVersion.MQTTv5)
    client.on_message = lambda _c, _u, msg: got.put(msg)
    client.connect("127.0.0.1", port)
    client.loop_start()
    return client, got


def _mqtt_publish(port: int, topic: str, body: bytes, **props: Any) -> None:
    client, _ = _mqtt_client(port)
    try:
        properties = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
        for name, value in props.items():
            setattr(properties, name, value)
        client.publish(topic, body, qos=1, properties=properties).wait_for_publish(10)
    finally:
        client.disconnect()
        client.loop_stop()


class _DurableQueue(LinkOption):
    """The terminus durability the gateway asks for on a /queue/ address (RabbitMQ 3.x
    refuses a link whose durability differs from the queue's)."""

    def apply(self, link: Link) -> None:
        (link.source if link.is_receiver else link.target).durability = Terminus.CONFIGURATION


def _amqp_send(url: str, address: str, messages: list[Message]) -> None:
    conn = BlockingConnection(url, timeout=10, allowed_mechs="PLAIN")
    try:
        sender = conn.create_sender(address, options=_DurableQueue())
        for message in messages:
            sender.send(message)
    finally:
        conn.close()


def _amqp_receive(url: str, address: str, count: int) -> list[Message]:
    conn = BlockingConnection(url, timeout=TIMEOUT, allowed_mechs="PLAIN")
    try:
        receiver = conn.create_receiver(address, credit=count, options=_DurableQueue())
        out = []
        for _ in range(count):
            out.append(receiver.receive(timeout=TIMEOUT))
            receiver.accept()
        return out
    finally:
        conn.close()


async def _create_topics(bootstrap: str, topics: list[str]) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(t, num_partitions=1, replication_factor=1)
                                   for t in topics])
    finally:
        await admin.close()


async def _kafka_read(bootstrap: str, topics: list[str], count: int) -> list[Any]:
    consumer = AIOKafkaConsumer(*topics, bootstrap_servers=bootstrap,
                                group_id=f"check-{_uid()}", auto_offset_reset="earliest",
                                session_timeout_ms=3000, heartbeat_interval_ms=500)
    await consumer.start()
    out: list[Any] = []
    try:
        async with asyncio.timeout(TIMEOUT):
            while len(out) < count:
                for records in (await consumer.getmany(timeout_ms=300)).values():
                    out.extend(records)
    finally:
        await consumer.stop()
    return out


class HttpReceiver:
    """An aiohttp server on 127.0.0.1:0 that records every request and answers 200."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.arrived = asyncio.Event()
        self.port = 0
        self._runner: web.AppRunner | None = None

    async def _handle(self, request: web.Request) -> web.Response:
        self.requests.append({"method": request.method, "path": request.path,
                              "headers": list(request.headers.items()),
                              "body": await request.read()})
        self.arrived.set()
        return web.Response(status=200)

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


async def _wait_ready(gateway: Gateway) -> None:
    async with asyncio.timeout(TIMEOUT):
        while not (gateway.readiness() and all(gateway.readiness().values())):
            await asyncio.sleep(0.05)


def _http_ingress_port(gateway: Gateway, endpoint_id: str) -> int:
    for route in gateway.routes:
        if route.source_endpoint == endpoint_id:
            port: int = route.consumer.port  # type: ignore[attr-defined]
            return port
    raise AssertionError(f"no route from {endpoint_id}")


# ------------------------------------------------------------------ what came out


@dataclass
class Observed:
    """One output message, as the output protocol's raw client saw it."""

    protocol: str
    address: str
    headers: list[tuple[str, str]]  # Kafka/NATS/HTTP headers, MQTT user properties,
    #                                 AMQP application properties (str(value))
    content_type: str | None  # MQTT/AMQP content type, else the content-type header
    body: bytes
    extra: dict[str, Any] = field(default_factory=dict)

    def header(self, name: str) -> str | None:
        for key, value in self.headers:
            if key.lower() == name.lower():
                return value
        return None

    def event(self, mode: str) -> tuple[dict[str, Any], Any]:
        """(attributes, data) of the CloudEvent carried in `mode`."""
        if mode == "structured":
            obj = json.loads(self.body)
            data = obj.pop("data", None)
            return obj, data
        prefix = {"kafka": "ce_", "nats": "ce-", "http": "ce-", "amqp": "cloudEvents_",
                  "mqtt": ""}[self.protocol]
        attrs: dict[str, Any] = {}
        for key, value in self.headers:
            if key.lower().startswith(prefix.lower()):
                name = key[len(prefix):].lower()
                attrs[name] = value
        if self.protocol in ("mqtt", "amqp", "kafka", "http") and self.content_type:
            attrs["datacontenttype"] = self.content_type
        return attrs, json.loads(self.body)


@dataclass
class Inputs:
    """What each input sent: body and the expected id (None: random)."""

    bodies: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    ids: dict[tuple[str, str], str | None] = field(default_factory=dict)
    sent_at: datetime = field(default_factory=lambda: datetime.now(UTC))


def _uuid5(identity: str) -> str:
    return str(uuid.uuid5(ID_NAMESPACE, identity))


async def _send_inputs(gateway: Gateway, sfx: str, mosquitto: Any, tansu: Any,
                       nats_server: Any, rabbitmq: Any) -> Inputs:
    inputs = Inputs()
    nc = await nats.connect(nats_server.url)
    producer = AIOKafkaProducer(bootstrap_servers=tansu.bootstrap_servers)
    await producer.start()
    try:
        async with aiohttp.ClientSession() as http:
            for mode in MODES:
                addr = _addresses(sfx, mode)
                for proto in INPUTS:
                    dev = _device(proto, mode)
                    body = {"input": proto, "mode": mode, "reading": 21.5}
                    inputs.bodies[proto, mode] = body
                    raw = json.dumps(body).encode()
                    if proto == "mqtt":
                        topic = addr["mqtt"].replace("{device}", dev)
                        correlation = f"corr-{mode}-{sfx}"
                        await asyncio.to_thread(
                            _mqtt_publish, mosquitto.port, topic, raw,
                            ContentType="application/json",
                            CorrelationData=correlation.encode())
                        inputs.ids[proto, mode] = _uuid5(f"mqtt:{topic}/{correlation}")
                    elif proto == "kafka":
                        meta = await producer.send_and_wait(
                            addr["kafka"], raw, key=dev.encode(),
                            headers=[("content-type", b"application/json")])
                        inputs.ids[proto, mode] = _uuid5(
                            f"kafka:{addr['kafka']}/{meta.partition}/{meta.offset}")
                    elif proto == "nats":
                        # No headers at all: datacontenttype is inferred from the JSON body.
                        await nc.publish(addr["nats"].replace("{device}", dev), raw)
                        await nc.flush()
                        inputs.ids[proto, mode] = None  # core NATS: no identity, random id
                    elif proto == "amqp":
                        message_id = f"amqp-{mode}-{sfx}"
                        await asyncio.to_thread(_amqp_send, rabbitmq.login_url, addr["amqp"], [
                            Message(body=raw, content_type="application/json", subject=dev,
                                    id=message_id, durable=True)])
                        inputs.ids[proto, mode] = _uuid5(f"amqp:{message_id}")
                    else:
                        port = _http_ingress_port(gateway, f"in-http-{mode}")
                        key = f"idem-{mode}-{sfx}"
                        url = f"http://127.0.0.1:{port}" + addr["http"].replace("{device}", dev)
                        async with http.post(url, data=raw, headers={
                                "Content-Type": "application/json",
                                "Idempotency-Key": key}) as response:
                            assert response.status == 202, await response.text()
                        inputs.ids[proto, mode] = _uuid5(f"http:{key}")
    finally:
        await producer.stop()
        await nc.close()
    return inputs


async def _collect_outputs(sfx: str, receiver: HttpReceiver, mqtt_got: queue.Queue[Any],
                           nats_got: list[Any], tansu: Any, rabbitmq: Any,
                           ) -> dict[tuple[str, str], list[Observed]]:
    """Every output message, keyed by (output protocol, mode)."""
    per_mode = len(INPUTS)
    total = per_mode * len(MODES)
    out: dict[tuple[str, str], list[Observed]] = {(o, m): [] for o in OUTPUTS for m in MODES}

    def mode_of(address: str) -> str:
        return "structured" if "structured" in address else "binary"

    async def amqp() -> None:
        for mode in MODES:
            got = await asyncio.to_thread(_amqp_receive, rabbitmq.login_url,
                                          f"/queue/out-{mode}-{sfx}", per_mode)
            for m in got:
                props: dict[str, Any] = m.properties or {}  # type: ignore[assignment]
                body = (bytes(m.body) if isinstance(m.body, (bytes, memoryview))
                        else str(m.body).encode())
                out["amqp", mode].append(Observed(
                    "amqp", f"/queue/out-{mode}-{sfx}",
                    [(str(k), str(v)) for k, v in props.items()],
                    None if m.content_type is None else str(m.content_type), body,
                    extra={"properties": props}))

    async def kafka() -> None:
        topics = [f"out-{m}-{sfx}" for m in MODES]
        for r in await _kafka_read(tansu.bootstrap_servers, topics, total):
            headers = [(k, v.decode()) for k, v in r.headers]
            ct = next((v for k, v in headers if k.lower() == "content-type"), None)
            out["kafka", mode_of(r.topic)].append(Observed(
                "kafka", r.topic, headers, ct, r.value, extra={"key": r.key}))

    async def rest() -> None:
        async with asyncio.timeout(TIMEOUT):
            while (mqtt_got.qsize() < total or len(nats_got) < total
                   or len(receiver.requests) < total):
                await asyncio.sleep(0.05)
        while not mqtt_got.empty():
            m = mqtt_got.get()
            props = m.properties.json() if m.properties else {}
            out["mqtt", mode_of(m.topic)].append(Observed(
                "mqtt", m.topic, [tuple(p) for p in props.get("UserProperty", [])],
                props.get("ContentType"), m.payload))
        for m in nats_got:
            headers = list((m.headers or {}).items())
            ct = next((v for k, v in headers if k.lower() == "content-type"), None)
            out["nats", mode_of(m.subject)].append(Observed("nats", m.subject, headers, ct,
                                                            m.data))
        for r in receiver.requests:
            ct = next((v for k, v in r["headers"] if k.lower() == "content-type"), None)
            out["http", mode_of(r["path"])].append(Observed(
                "http", r["path"], r["headers"], ct, r["body"], extra={"method": r["method"]}))

    await asyncio.gather(amqp(), kafka(), rest())
    return out


@dataclass
class MatrixRun:
    sfx: str
    inputs: Inputs
    outputs: dict[tuple[str, str], list[Observed]]
    metrics: str
    done_at: datetime


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory, mosquitto: Any, tansu: Any,
           nats_server: Any, rabbitmq: Any) -> MatrixRun:
    sfx = _uid()
    tmp = tmp_path_factory.mktemp("matrix")

    async def scenario() -> MatrixRun:
        receiver = HttpReceiver()
        await receiver.start()
        await _create_topics(tansu.bootstrap_servers,
                             [f"in-{m}-kafka-{sfx}" for m in MODES]
                             + [f"out-{m}-{sfx}" for m in MODES])
        path = _matrix_config(tmp, sfx, mosquitto=mosquitto, tansu=tansu,
                              nats_server=nats_server, rabbitmq=rabbitmq,
                              http_port=receiver.port)
        config, problems = load_config(path)
        assert config is not None, [str(p) for p in problems if p.is_error]
        gateway = Gateway(config, REGISTRY)
        # Output subscribers first (MQTT and core NATS keep nothing for late subscribers).
        mqtt_client, mqtt_got = await asyncio.to_thread(_mqtt_client, mosquitto.port)
        assert mqtt_client.subscribe(f"/out/+/{sfx}", qos=1)[0] == paho.MQTT_ERR_SUCCESS
        nc = await nats.connect(nats_server.url)
        nats_got: list[Any] = []

        async def on_nats(msg: Any) -> None:
            nats_got.append(msg)

        await nc.subscribe(f"out.*.{sfx}", cb=on_nats)
        await nc.flush()
        await gateway.start()
        try:
            await _wait_ready(gateway)
            await asyncio.sleep(0.3)  # MQTT SUBACK of the test subscriber
            inputs = await _send_inputs(gateway, sfx, mosquitto, tansu, nats_server, rabbitmq)
            outputs = await _collect_outputs(sfx, receiver, mqtt_got, nats_got, tansu,
                                             rabbitmq)
            metrics = gateway.metrics.render().decode()
            return MatrixRun(sfx, inputs, outputs, metrics, datetime.now(UTC))
        finally:
            await gateway.stop()
            await nc.close()
            mqtt_client.disconnect()
            mqtt_client.loop_stop()
            await receiver.stop()

    return asyncio.run(scenario())


# ------------------------------------------------------------------ the cells


def _find(run: MatrixRun, inp: str, out: str, mode: str) -> Observed:
    cell = f"{inp} -> {out} ({mode})"
    found = []
    for observed in run.outputs[out, mode]:
        attrs, _ = observed.event(mode)
        if attrs.get("source") == f"/in/{inp}/{_device(inp, mode)}":
            found.append(observed)
    assert len(found) == 1, (f"cell {cell}: expected exactly one output, got {len(found)} "
                             f"among {[o.event(mode)[0] for o in run.outputs[out, mode]]}")
    return found[0]


def _check_binding(observed: Observed, mode: str, cell: str) -> None:
    """The binding's own metadata, exactly, per protocol and mode."""
    names = {k for k, _ in observed.headers}
    if mode == "structured":
        assert observed.content_type == STRUCTURED_CT, cell
        # no attribute is duplicated into metadata in structured mode
        assert not any(n.lower().startswith(("ce-", "ce_", "cloudevents")) for n in names), cell
        if observed.protocol == "mqtt":
            assert names == set(), cell
        return
    if observed.protocol == "kafka":
        assert names == {f"ce_{a}" for a in ATTRIBUTES - {"datacontenttype"}} | {
            "content-type"}, cell
        assert observed.header("content-type") == "application/json", cell
    elif observed.protocol == "mqtt":
        # MQTT 5: bare attribute names as user properties, datacontenttype = Content Type
        assert names == ATTRIBUTES - {"datacontenttype"}, cell
        assert observed.content_type == "application/json", cell
    elif observed.protocol == "amqp":
        assert names == {f"cloudEvents_{a}" for a in ATTRIBUTES - {"datacontenttype"}}, cell
        assert observed.content_type == "application/json", cell
    elif observed.protocol == "nats":
        # NATS carries datacontenttype as a ce- header; the adapter adds the Content-Type
        # header of JSON bodies (so a plain NATS consumer can read the body too)
        assert names == {f"ce-{a}" for a in ATTRIBUTES} | {"Content-Type"}, cell
        assert observed.header("ce-datacontenttype") == "application/json", cell
        assert observed.header("content-type") == "application/json", cell
    else:
        lower = {n.lower() for n in names}
        assert {f"ce-{a}" for a in ATTRIBUTES - {"datacontenttype"}} <= lower, cell
        assert "ce-datacontenttype" not in lower, cell
        assert observed.header("content-type") == "application/json", cell


def _source_key(inp: str, mode: str, sfx: str) -> bytes | None:
    """The Kafka key an output gets from its source: MQTT topic, Kafka key, NATS subject,
    AMQP subject (no group-id sent); HTTP has no unit of order."""
    dev = _device(inp, mode)
    address = _addresses(sfx, mode)[inp].replace("{device}", dev)
    return {"mqtt": address.encode(), "kafka": dev.encode(), "nats": address.encode(),
            "amqp": dev.encode(), "http": None}[inp]


CELLS = [pytest.param(i, o, m, id=f"{i}-to-{o}-{m}") for m in MODES for i in INPUTS
         for o in OUTPUTS]


@pytest.mark.parametrize(("inp", "out", "mode"), CELLS)
def test_cell(matrix: MatrixRun, inp: str, out: str, mode: str) -> None:
    cell = f"cell {inp} -> {out} ({mode})"
    observed = _find(matrix, inp, out, mode)
    attrs, data = observed.event(mode)
    dev = _device(inp, mode)
    assert set(attrs) == ATTRIBUTES, f"{cell}: attributes {sorted(attrs)}"
    assert attrs["specversion"] == "1.0", cell
    assert attrs["type"] == f"com.example.matrix.{inp}", cell
    assert attrs["source"] == f"/in/{inp}/{dev}", cell
    assert attrs["subject"] == dev, cell
    assert attrs["datacontenttype"] == "application/json", cell
    assert RFC3339.match(attrs["time"]), f"{cell}: time {attrs['time']!r}"
    when = datetime.fromisoformat(attrs["time"].replace("Z", "+00:00"))
    sent = matrix.inputs.sent_at
    assert sent - timedelta(seconds=5) <= when <= matrix.done_at + timedelta(seconds=5), cell
    expected_id = matrix.inputs.ids[inp, mode]
    if expected_id is None:
        assert UUID.match(attrs["id"]), f"{cell}: id {attrs['id']!r}"
    else:
        assert attrs["id"] == expected_id, f"{cell}: id {attrs['id']!r} (uuid5 rule)"
    assert data == matrix.inputs.bodies[inp, mode], cell
    _check_binding(observed, mode, cell)
    # the address is the producer endpoint's
    if out == "mqtt":
        assert observed.address == f"/out/{mode}/{matrix.sfx}", cell
    elif out == "kafka":
        assert observed.address == f"out-{mode}-{matrix.sfx}", cell
        # No partitionkey attribute: keyed by the source's unit of order (partitionkey:
        # source), so a partitioned topic keeps each source topic/subject/key in order.
        assert observed.extra["key"] == _source_key(inp, mode, matrix.sfx), cell
    elif out == "nats":
        assert observed.address == f"out.{mode}.{matrix.sfx}", cell
    elif out == "http":
        assert observed.address == f"/out/{mode}", cell
        assert observed.extra["method"] == "POST", cell


@pytest.mark.parametrize(("inp", "mode"), [(i, m) for m in MODES for i in INPUTS],
                         ids=str)
def test_one_event_many_outputs_same_id(matrix: MatrixRun, inp: str, mode: str) -> None:
    """Every output of one input message carries the very same event (one conversion)."""
    events = []
    for out in OUTPUTS:
        attrs, data = _find(matrix, inp, out, mode).event(mode)
        events.append((attrs["id"], attrs["time"], data))
    assert len(set(json.dumps(e) for e in events)) == 1, f"{inp} ({mode}): {events}"


def test_matrix_metrics(matrix: MatrixRun) -> None:
    for mode in MODES:
        for proto in OUTPUTS:
            line = (f'xrgw_messages_published_total{{endpoint="out-{proto}-{mode}",'
                    f'xrgw_endpoint="out-{proto}-{mode}"}} 5.0')
            assert line in matrix.metrics, line
        for proto in INPUTS:
            line = (f'xrgw_messages_received_total{{endpoint="in-{proto}-{mode}",'
                    f'protocol="{PROTOCOL[proto]}",xrgw_endpoint="in-{proto}-{mode}"}} 1.0')
            assert line in matrix.metrics, line
    # every reason's series exists from the start, at 0
    assert not re.search(r"^xrgw_deadletter_total\{.*\} [1-9]", matrix.metrics, re.M)
    assert "xrgw_dropped_total{" not in matrix.metrics  # deadletter: log counts drops there


# ------------------------------------------------------------------ CloudEvents in -> native out


def _native_config(tmp: Path, sfx: str, *, mosquitto: Any, tansu: Any) -> Path:
    text = (FIXTURES / "native-out.xreg.json").read_text().replace("__SFX__", sfx)
    (tmp / "native-out.xreg.json").write_text(text)
    config = {
        "definitions": ["native-out.xreg.json"],
        "routes": [
            {"from": "ce-in-kafka", "to": ["native-mqtt", "native-kafka"], "deliver": "native"},
            {"from": "ce-in-http", "to": ["native-mqtt", "native-kafka"], "deliver": "native"},
        ],
        "deadletter": "log", "admin": {"listen": "127.0.0.1:0"}, "log": {"level": "warning"},
        "shutdown": {"grace": "2s"},
        "endpoints": {
            "ce-in-kafka": {"uri": tansu.url, "options": {
                "consumergroup": f"native-{sfx}", "session_timeout_ms": 3000,
                "heartbeat_interval_ms": 500}},
            "ce-in-http": {"uri": f"http://127.0.0.1:{free_port()}"},
            "native-mqtt": {"uri": mosquitto.url},
            "native-kafka": {"uri": tansu.url},
        },
    }
    path = tmp / "gateway.yaml"
    path.write_text(json.dumps(config, indent=1))
    return path


def test_cloudevent_in_native_out(tmp_path: Path, mosquitto: Any, tansu: Any) -> None:
    """Binary-mode CloudEvents over Kafka and HTTP -> native MQTT 5 and Kafka messages whose
    topic, key, user properties and headers are rendered from the producer endpoint's
    definitions (storeid captured from `source` by the target's envelope template)."""
    sfx = _uid()

    async def scenario() -> None:
        await _create_topics(tansu.bootstrap_servers, [f"ce-in-{sfx}", f"native-{sfx}"])
        config, problems = load_config(_native_config(tmp_path, sfx, mosquitto=mosquitto,
                                                      tansu=tansu))
        assert config is not None, [str(p) for p in problems if p.is_error]
        gateway = Gateway(config, REGISTRY)
        mqtt_client, mqtt_got = await asyncio.to_thread(_mqtt_client, mosquitto.port)
        mqtt_client.subscribe(f"/out/{sfx}/#", qos=1)
        await gateway.start()
        try:
            await _wait_ready(gateway)
            await asyncio.sleep(0.3)
            sale = {"amount": 12.5, "items": ["tea"]}
            producer = AIOKafkaProducer(bootstrap_servers=tansu.bootstrap_servers)
            await producer.start()
            try:
                await producer.send_and_wait(f"ce-in-{sfx}", json.dumps(sale).encode(), headers=[
                    ("ce_specversion", b"1.0"), ("ce_id", b"sale-41"),
                    ("ce_type", b"com.example.store.sale"), ("ce_source", b"/stores/41"),
                    ("ce_subject", b"desk-3"), ("ce_time", b"2026-01-02T03:04:05Z"),
                    ("content-type", b"application/json")])
            finally:
                await producer.stop()
            port = _http_ingress_port(gateway, "ce-in-http")
            async with aiohttp.ClientSession() as http, http.post(
                    f"http://127.0.0.1:{port}/sales", data=json.dumps(sale).encode(), headers={
                        "ce-specversion": "1.0", "ce-id": "sale-42",
                        "ce-type": "com.example.store.sale", "ce-source": "/stores/42",
                        "ce-subject": "desk-9", "Content-Type": "application/json"}) as resp:
                assert resp.status == 202, await resp.text()

            kafka = await _kafka_read(tansu.bootstrap_servers, [f"native-{sfx}"], 2)
            mqtt: list[Any] = []
            async with asyncio.timeout(TIMEOUT):
                while len(mqtt) < 2:
                    mqtt.append(await asyncio.to_thread(mqtt_got.get, True, TIMEOUT))
        finally:
            await gateway.stop()
            mqtt_client.disconnect()
            mqtt_client.loop_stop()

        by_topic = {m.topic: m for m in mqtt}
        assert set(by_topic) == {f"/out/{sfx}/41", f"/out/{sfx}/42"}, sorted(by_topic)
        for store, desk in (("41", "desk-3"), ("42", "desk-9")):
            m = by_topic[f"/out/{sfx}/{store}"]
            props = m.properties.json()
            # native: only the definition's user properties, no CloudEvents attributes
            assert [tuple(p) for p in props["UserProperty"]] == [("store", store),
                                                                 ("desk", desk)], props
            assert props["ContentType"] == "application/json"
            assert m.qos == 1
            assert json.loads(m.payload) == sale

        by_key = {r.key: r for r in kafka}
        assert set(by_key) == {b"store-41", b"store-42"}, sorted(by_key)
        for store, desk in (("41", "desk-3"), ("42", "desk-9")):
            r = by_key[f"store-{store}".encode()]
            headers = sorted((k, v.decode()) for k, v in r.headers)
            assert headers == sorted([("desk", desk), ("eventtype", "com.example.store.sale"),
                                      ("content-type", "application/json")]), headers
            assert json.loads(r.value) == sale

    asyncio.run(scenario())
