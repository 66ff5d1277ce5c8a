"""`xrgw tap` against a running gateway (MQTT in from mosquitto -> NATS out, NATS dead
letter): the filters (route, definition, outcome), exact sampling and `--limit`, the
redaction of a sender's secrets (a `redact:` body path and user property, the
credential header), the text form, and a reader that stops reading: the route still
delivers everything, and the tap drops and says so (in the stream and in
`xrgw_tap_dropped_total`) -- shown by conditions, not by timing."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import uuid
from pathlib import Path
from typing import Any

import nats
import paho.mqtt.client as paho
import pytest
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from support import write_store_gateway

from adapters.registry import REGISTRY
from gateway.cli import main
from gateway.config import load_config
from gateway.daemon import Gateway
from gateway.tap.client import read_tap, tap_url

TIMEOUT = 60.0
XID = "/messagegroups/store/messages/sale"
ROUTE = "store-mqtt->events"
CARD = "4111-1111-1111-1111"
KEY = "k3y-0f-the-s3nder"
TOKEN = "Bearer t0ken-of-the-s3nder"
MISSES = (1, 5, 9)  # the messages sent to a topic no definition takes


def _publish(port: int, messages: list[tuple[str, bytes]]) -> None:
    """QoS 1 with the sender's secrets as user properties (a real client: paho)."""
    client = paho.Client(CallbackAPIVersion.VERSION2, client_id=f"pub-{uuid.uuid4().hex}",
                         protocol=MQTTProtocolVersion.MQTTv5)
    client.connect("127.0.0.1", port)
    client.loop_start()
    properties = Properties(PacketTypes.PUBLISH)
    properties.UserProperty = [("x-api-key", KEY), ("authorization", TOKEN)]
    try:
        for topic, body in messages:
            client.publish(topic, body, qos=1, properties=properties).wait_for_publish(30)
    finally:
        client.disconnect()
        client.loop_stop()


class _Running:
    """A started gateway and NATS subscribers counting what it delivers."""

    def __init__(self, gateway: Gateway, nc: Any) -> None:
        self.gateway = gateway
        self.nc = nc
        self.events: list[Any] = []
        self.dead: list[Any] = []

    @property
    def url(self) -> str:
        assert self.gateway.admin is not None
        return f"http://127.0.0.1:{self.gateway.admin.port}"

    async def until(self, events: int, dead: int) -> None:
        async with asyncio.timeout(TIMEOUT):
            while len(self.events) < events or len(self.dead) < dead:
                await asyncio.sleep(0.05)

    async def taps_attached(self, count: int) -> None:
        async with asyncio.timeout(TIMEOUT):
            while len(self.gateway.tap.subscriptions) < count:
                await asyncio.sleep(0.02)


async def _start(tmp: Path, sfx: str, mosquitto: Any, nats_server: Any) -> _Running:
    path = write_store_gateway(tmp, sfx, mosquitto.url, nats_server.url,
                               ["data.card", "user_properties.x-api-key"])
    config, problems = load_config(path)
    assert config is not None, [str(p) for p in problems]
    nc = await nats.connect(nats_server.url)
    gateway = Gateway(config, REGISTRY)
    running = _Running(gateway, nc)

    async def on_event(msg: Any) -> None:
        running.events.append(msg)

    async def on_dead(msg: Any) -> None:
        running.dead.append(msg)

    await nc.subscribe(f"events.{sfx}", cb=on_event)
    await nc.subscribe(f"dead.{sfx}", cb=on_dead)
    await gateway.start()
    async with asyncio.timeout(TIMEOUT):
        while not (gateway.readiness() and all(gateway.readiness().values())):
            await asyncio.sleep(0.05)
    return running


def test_filters_sampling_limit_and_redaction(tmp_path: Path, mosquitto: Any,
                                              nats_server: Any,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    sfx = uuid.uuid4().hex[:8]
    matched, unmatched = 8, 3

    async def scenario() -> tuple[int, list[dict[str, Any]], int, str]:
        running = await _start(tmp_path, sfx, mosquitto, nats_server)
        try:
            url = running.url
            # the CLI, as a person at a terminal: why do messages miss?
            cli = asyncio.create_task(asyncio.to_thread(
                main, ["tap", url, "--outcome", "unmatched", "--limit", str(unmatched)]))
            # a tool: every second matched message of the definition, four of them
            sampled = asyncio.create_task(asyncio.to_thread(lambda: list(read_tap(tap_url(
                url, routes=["store-mqtt"], definitions=["sale"], outcomes=["matched"],
                sample=0.5, limit=matched // 2)))))
            # curl, as a browser's EventSource would: server-sent events
            curl = await asyncio.create_subprocess_exec(
                "curl", "-sN", "--max-time", str(TIMEOUT), "-H", "Accept: text/event-stream",
                f"{url}/tap?outcome=matched&limit=2", stdout=asyncio.subprocess.PIPE)
            await running.taps_attached(3)
            no_route = await asyncio.to_thread(main, ["tap", url, "--route", "nowhere"])
            sent = []
            for i in range(matched + unmatched):
                topic = (f"st/{sfx}/{i}/desk" if i in MISSES else
                         f"st/{sfx}/{i}/cashierdesk")
                sent.append((topic, json.dumps({"n": i, "card": CARD}).encode()))
            assert sum("/desk" in t for t, _ in sent) == unmatched
            await asyncio.to_thread(_publish, mosquitto.port, sent)
            await running.until(matched, unmatched)
            async with asyncio.timeout(TIMEOUT):
                code, lines = await cli, await sampled
                events = (await curl.communicate())[0].decode()
        finally:
            await running.gateway.stop()
            await running.nc.close()
        return code, lines, no_route, capsys.readouterr().out + events

    code, lines, no_route, text = asyncio.run(scenario())
    assert code == 0 and no_route == 2
    assert text.count("event: message\ndata: {") == 2 and "event: end\n" in text
    # sampled: exactly the 1st, 3rd, 5th and 7th matched message, in order, then the end
    kinds = [line["tap"] for line in lines]
    assert kinds == ["attached", "message", "message", "message", "message", "end"]
    messages = lines[1:5]
    numbers = [m["record"]["data"]["n"] for m in messages]
    matched_numbers = [i for i in range(matched + unmatched) if i not in MISSES]
    assert numbers == matched_numbers[::2]
    for message in messages:
        assert message["route"] == ROUTE and message["outcome"] == "matched"
        assert message["definition"] == XID
        assert message["cloudevent"]["type"] == "com.example.sale"
        assert message["cloudevent"]["source"] == f"/stores/{message['record']['data']['n']}"
        assert message["record"]["data"]["card"] == "***"
        assert message["cloudevent"]["data"]["card"] == "***"
    # the sender's secrets appear nowhere: not in JSON, not in the text
    for secret in (CARD, KEY, TOKEN, TOKEN.split()[1]):
        assert secret not in json.dumps(lines) and secret not in text
    # the text: each miss with the nearest definition and its failed check
    assert text.count(" unmatched ~ " + XID) == unmatched
    assert text.count(f"x {XID}: topic_name: expected st/{sfx}/{{storeid}}/cashierdesk, "
                      f"got st/{sfx}/") == unmatched
    assert f"end: limit reached: {unmatched} message(s), 0 dropped" in text


def test_a_reader_that_stops_reading_never_slows_the_route(
        tmp_path: Path, mosquitto: Any, nats_server: Any) -> None:
    """A tap whose client reads nothing: its queue (5) fills and the rest is dropped;
    the route delivers every message all the same (it would stop if it waited on the
    tap: the client reads only once the route delivered everything)."""
    sfx = uuid.uuid4().hex[:8]
    count, body = 300, "x" * 16_000  # ~32 kB a line: far more than the sockets buffer

    async def scenario() -> tuple[int, bytes, float]:
        running = await _start(tmp_path, sfx, mosquitto, nats_server)
        try:
            assert running.gateway.admin is not None
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.setblocking(False)
            await asyncio.get_running_loop().sock_connect(
                sock, ("127.0.0.1", running.gateway.admin.port))
            reader, writer = await asyncio.open_connection(sock=sock, limit=1024)
            writer.write(b"GET /tap?queue=5 HTTP/1.0\r\nHost: gateway\r\n\r\n")
            await writer.drain()
            await running.taps_attached(1)
            sent = [(f"st/{sfx}/{i}/cashierdesk", json.dumps({"n": i, "pad": body}).encode())
                    for i in range(count)]
            await asyncio.to_thread(_publish, mosquitto.port, sent)
            await running.until(count, 0)  # everything delivered, the tap unread
            subscription = running.gateway.tap.subscriptions[0]
            dropped = subscription.dropped
            # now read: the stream says what it lost
            got = b""
            async with asyncio.timeout(TIMEOUT):
                while b'"tap":"dropped"' not in got:
                    chunk = await reader.read(1 << 16)
                    assert chunk, "the stream ended without a dropped line"
                    got += chunk
            metrics = await asyncio.to_thread(_get, running.url + "/metrics")
            writer.close()
        finally:
            await running.gateway.stop()
            await running.nc.close()
        found = re.search(rf'xrgw_tap_dropped_total{{route="{re.escape(ROUTE)}"}} (\S+)',
                          metrics)
        assert found is not None, metrics
        return dropped, got, float(found[1])

    dropped, got, metric = asyncio.run(scenario())
    assert len(got) > 0 and dropped > 0
    assert metric >= dropped
    line = next(json.loads(text) for text in got.split(b"\n")
                if text.startswith(b'{"tap":"dropped"'))
    assert line["dropped"] > 0 and line["total"] >= line["dropped"]


def _get(url: str) -> str:
    import urllib.request

    with urllib.request.urlopen(url, timeout=30) as answer:
        text: str = answer.read().decode()
    return text
