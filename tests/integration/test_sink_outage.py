"""A sink or the dead letter down for longer than the old retry budget, with a real
broker stopped and started again (issue 28).

Measured before: Kafka unreachable for 15 s under an HTTP -> Kafka route dead-lettered
11-16 good messages as `undeliverable` (the default budget, ~3 s, was shorter than an
ordinary broker restart), and a held dead letter showed nowhere but in one log line.

Now: the sink's outage is back-pressure (the default retry budget has no limit while a
failure is transient) -- nothing is dead-lettered and everything arrives once the broker
is back -- and while it lasts the route is stalled: `/readyz` 503 naming the cause,
`xrgw_route_stalled{route,cause}` 1, one log line with the error; all of it clears when
the broker is back. The same for a dead letter that is down.
"""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import nats
import pytest

from adapters.registry import REGISTRY
from gateway.config import GatewayConfig
from gateway.daemon import Gateway
from harness.brokers import Mosquitto, NatsServer, free_port
from tests.integration.support import (
    collect,
    loaded,
    metric,
    nats_endpoint,
    publish_sales,
    readyz,
    started,
    until,
)

ROOT = Path(__file__).resolve().parents[2]
#: Longer than the old default budget (5 sends, ~3 s of backoff) by a margin.
OUTAGE = 6.0


@pytest.fixture
def own_nats() -> Iterator[NatsServer]:
    """A nats-server of this test alone: it is stopped and started again."""
    server = NatsServer()
    try:
        server.start()
        yield server
    finally:
        server.close()


def _config(tmp: Path, mosquitto_url: str, sfx: str, out: tuple[str, str, bool],
            dead: tuple[str, str, bool]) -> Path:
    shutil.copy(ROOT / "config/examples/store.xreg.json", tmp / "store.xreg.json")
    extra = {"endpoints": {"out": nats_endpoint(*out), "dl": nats_endpoint(*dead)}}
    (tmp / "extra.xreg.json").write_text(json.dumps(extra))
    (tmp / "gw.yaml").write_text(f"""
definitions: [store.xreg.json, extra.xreg.json]
routes:
  - from: store-mqtt
    to: [out]
    stall_after: 1s
deadletter: dl
admin: {{listen: "127.0.0.1:0"}}
endpoints:
  store-mqtt: {{uri: "{mosquitto_url}", client_id: "xrgw-outage-{sfx}"}}
  out: {{uri: "{out[0]}", options: {{reconnect_max: 1s}}}}
  dl: {{uri: "{dead[0]}", options: {{reconnect_max: 1s}}}}
""")
    return tmp / "gw.yaml"


def _outage(tmp: Path, mosquitto: Mosquitto, nats_server: NatsServer, own_nats: NatsServer,
            down: str) -> tuple[str, str, GatewayConfig]:
    """The store's MQTT route to `out` with dead letter `dl`; `down` ("out" or "dl") is
    the JetStream subject on the server the test stops, the other a core subject on the
    shared one. (run suffix, the stream to create for `down`, the configuration)."""
    sfx = uuid.uuid4().hex[:8]
    ends = {name: (own_nats.url, f"{name}.{sfx}", True) if name == down else
            (nats_server.url, f"{name}.{sfx}", False) for name in ("out", "dl")}
    path = _config(tmp, mosquitto.url, sfx, ends["out"], ends["dl"])
    return sfx, f"{down.upper()}_{sfx}", loaded(path)


async def _stream(url: str, name: str, subject: str) -> None:
    nc = await nats.connect(url)
    try:
        await nc.jetstream().add_stream(name=name, subjects=[subject])
    finally:
        await nc.close()


async def _stored(url: str, name: str) -> int:
    """Messages in a stream (0 while the server cannot be asked)."""
    try:
        nc = await nats.connect(url, connect_timeout=1, max_reconnect_attempts=0)
    except Exception:
        return 0
    try:
        info = await nc.jetstream().stream_info(name)
        return int(info.state.messages)
    except Exception:
        return 0
    finally:
        await nc.close()


async def _wait_stored(url: str, name: str, count: int) -> None:
    async with asyncio.timeout(60):
        while await _stored(url, name) < count:
            await asyncio.sleep(0.2)


def _stall_lines(caplog: pytest.LogCaptureFixture, cause: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage().startswith("route stalled")
            and r.__dict__.get("reason") == cause]


def test_a_sink_down_longer_than_the_old_budget_holds_and_delivers_everything(
        tmp_path: Path, mosquitto, nats_server, own_nats: NatsServer,
        caplog: pytest.LogCaptureFixture) -> None:
    sfx, stream, config = _outage(tmp_path, mosquitto, nats_server, own_nats, "out")
    topic = f"/store/{sfx}/cashierdesk/1"

    async def scenario() -> None:
        await _stream(own_nats.url, stream, f"out.{sfx}")
        watcher = await nats.connect(nats_server.url)
        dead = await collect(watcher, f"dl.{sfx}")
        await watcher.flush()
        gateway = Gateway(config, REGISTRY)
        await started(gateway)
        assert gateway.admin is not None
        route = gateway.routes[0].name
        try:
            await asyncio.to_thread(publish_sales, mosquitto.url, [
                (topic, json.dumps({"amount": n}).encode()) for n in range(5)])
            await _wait_stored(own_nats.url, stream, 5)

            await asyncio.to_thread(own_nats.stop)
            stopped = time.monotonic()
            await asyncio.to_thread(publish_sales, mosquitto.url, [
                (topic, json.dumps({"amount": n}).encode()) for n in range(5, 15)])
            await until(lambda: metric(gateway, "xrgw_route_stalled", route=route,
                                         cause="output-unavailable") == 1,
                         "the route to report the output")
            status, body = await asyncio.to_thread(readyz, gateway.admin.port)
            assert status == 503 and body["routes"][route] is False
            assert [(s["cause"], s["endpoint"]) for s in body["stalled"][route]] == [
                ("output-unavailable", "out")]
            # The outage goes on past the old budget; the messages wait, none is given up.
            await until(lambda: time.monotonic() - stopped >= OUTAGE, "the outage")
            assert not dead
            assert metric(gateway, "xrgw_publish_errors_total", endpoint="out",
                           reason="retryable") > 5
            await asyncio.to_thread(own_nats.start)

            await _wait_stored(own_nats.url, stream, 15)
            await until(lambda: not gateway.routes[0].stalled, "the stall to clear")
            await until(lambda: all(gateway.readiness().values()), "ready again")
            status, body = await asyncio.to_thread(readyz, gateway.admin.port)
            assert status == 200 and body["stalled"] == {}
            assert metric(gateway, "xrgw_route_stalled", route=route,
                           cause="output-unavailable") == 0
            await watcher.flush()
            assert not dead  # nothing dead-lettered: the sink was only down
            assert metric(gateway, "xrgw_messages_deadlettered_total",
                           reason="undeliverable") == 0
        finally:
            await gateway.stop()
            await watcher.close()

    with caplog.at_level(logging.INFO, logger="xrgw.route"):
        asyncio.run(scenario())
    [line] = _stall_lines(caplog, "output-unavailable")  # once for the whole outage
    assert line.__dict__["endpoint"] == "out" and line.__dict__["error"]


def test_a_dead_letter_that_is_down_is_a_stall_until_it_is_back(
        tmp_path: Path, mosquitto, nats_server, own_nats: NatsServer,
        caplog: pytest.LogCaptureFixture) -> None:
    sfx, stream, config = _outage(tmp_path, mosquitto, nats_server, own_nats, "dl")

    async def scenario() -> None:
        await _stream(own_nats.url, stream, f"dl.{sfx}")
        gateway = Gateway(config, REGISTRY)
        await started(gateway)
        assert gateway.admin is not None
        route = gateway.routes[0].name
        try:
            await asyncio.to_thread(own_nats.stop)
            # A message no definition matches: it can only go to the dead letter.
            await asyncio.to_thread(publish_sales, mosquitto.url, [
                (f"/store/{sfx}/desk/9", b'{"amount": 3}')])
            await until(lambda: metric(gateway, "xrgw_route_stalled", route=route,
                                         cause="deadletter-held") == 1,
                         "the held dead letter to show")
            status, body = await asyncio.to_thread(readyz, gateway.admin.port)
            assert status == 503
            assert ("deadletter-held", "dl") in [
                (s["cause"], s["endpoint"]) for s in body["stalled"][route]]
            assert gateway.routes[0].inflight == 1  # held, not acked, not dropped
            await asyncio.to_thread(own_nats.start)
            await _wait_stored(own_nats.url, stream, 1)
            await until(lambda: not gateway.routes[0].stalled
                         and gateway.routes[0].inflight == 0, "the stall to clear")
            assert metric(gateway, "xrgw_route_stalled", route=route,
                           cause="deadletter-held") == 0
            assert metric(gateway, "xrgw_messages_deadlettered_total", reason="unmatched") == 1
        finally:
            await gateway.stop()

    with caplog.at_level(logging.INFO, logger="xrgw.route"):
        asyncio.run(scenario())
    [line] = _stall_lines(caplog, "deadletter-held")
    assert line.__dict__["endpoint"] == "dl" and line.__dict__["error"]


def test_a_dead_letter_without_its_stream_wedges_visibly_and_heals_when_created(
        tmp_path: Path, mosquitto, nats_server, caplog: pytest.LogCaptureFixture) -> None:
    """A misconfiguration that wedges a route: the dead letter publishes through
    JetStream, and no stream takes its subject. Before, the route held the messages with
    one log line and `/readyz` 200. Now the route is stalled (`deadletter-held`), says so
    in `/readyz`, the metric and a log line naming JetStream's answer -- and goes on by
    itself once the stream exists."""
    sfx = uuid.uuid4().hex[:8]
    path = _config(tmp_path, mosquitto.url, sfx, (nats_server.url, f"out.{sfx}", False),
                   (nats_server.url, f"dl.{sfx}", True))
    config = loaded(path)

    async def scenario() -> None:
        gateway = Gateway(config, REGISTRY)
        await started(gateway)
        assert gateway.admin is not None
        route = gateway.routes[0].name
        try:
            await asyncio.to_thread(publish_sales, mosquitto.url, [
                (f"/store/{sfx}/desk/9", b'{"amount": 3}')])
            await until(lambda: metric(gateway, "xrgw_route_stalled", route=route,
                                         cause="deadletter-held") == 1,
                         "the wedge to show")
            status, body = await asyncio.to_thread(readyz, gateway.admin.port)
            assert status == 503 and body["routes"][route] is False
            assert [(s["cause"], s["endpoint"]) for s in body["stalled"][route]] == [
                ("deadletter-held", "dl")]
            await _stream(nats_server.url, f"DL_{sfx}", f"dl.{sfx}")
            await _wait_stored(nats_server.url, f"DL_{sfx}", 1)
            await until(lambda: not gateway.routes[0].stalled
                         and gateway.routes[0].inflight == 0, "the route to go on")
            status, body = await asyncio.to_thread(readyz, gateway.admin.port)
            assert status == 200 and body["stalled"] == {}
        finally:
            await gateway.stop()

    with caplog.at_level(logging.INFO, logger="xrgw.route"):
        asyncio.run(scenario())
    [line] = _stall_lines(caplog, "deadletter-held")
    assert "no JetStream stream" in line.__dict__["error"]


def test_an_http_sender_answered_504_during_an_outage_gets_no_duplicate(
        tmp_path: Path, nats_server, own_nats: NatsServer) -> None:
    """HTTP -> NATS JetStream with the sink down longer than `settle_timeout`: the
    sender gets 504 and sends the message again once the sink is back. Before, the route
    also kept retrying its copy, so the event arrived twice; now the route stops
    retrying a message whose sender was answered, and the event arrives once."""
    sfx = uuid.uuid4().hex[:8]
    stream = f"HOOKS_{sfx}"
    doc = json.loads((ROOT / "config/examples/http-webhooks.xreg.json").read_text())
    doc["endpoints"]["out"] = nats_endpoint(own_nats.url, f"hooks.{sfx}", True)
    doc["endpoints"]["dl"] = nats_endpoint(nats_server.url, f"dl.{sfx}", False)
    (tmp_path / "hooks.xreg.json").write_text(json.dumps(doc))
    port = free_port()
    (tmp_path / "gw.yaml").write_text(f"""
definitions: [hooks.xreg.json]
routes:
  - from: webhooks-http
    to: [out]
deadletter: dl
admin: {{listen: "127.0.0.1:0"}}
endpoints:
  webhooks-http:
    uri: "http://127.0.0.1:{port}"
    options: {{settle_timeout: 2}}
  out: {{uri: "{own_nats.url}", options: {{reconnect_max: 1s}}}}
  dl: {{uri: "{nats_server.url}"}}
""")
    config = loaded(tmp_path / "gw.yaml")
    url = f"http://127.0.0.1:{port}/hooks/acme/deployments/prod"

    async def post(session: aiohttp.ClientSession) -> int:
        async with session.post(url, json={"env": "prod"},
                                headers={"Idempotency-Key": f"deploy-{sfx}"}) as response:
            return response.status

    async def scenario() -> None:
        await _stream(own_nats.url, stream, f"hooks.{sfx}")
        gateway = Gateway(config, REGISTRY)
        await started(gateway)
        try:
            await asyncio.to_thread(own_nats.stop)
            async with aiohttp.ClientSession() as session:
                assert await post(session) == 504  # not settled within settle_timeout
                await until(lambda: gateway.routes[0].inflight == 0,
                             "the route to give the message up")
                await asyncio.to_thread(own_nats.start)
                await until(lambda: all(gateway.readiness().values()), "ready again")
                assert await post(session) == 202  # the sender's retry
            await _wait_stored(own_nats.url, stream, 1)
            await until(lambda: gateway.routes[0].inflight == 0, "everything settled")
            assert await _stored(own_nats.url, stream) == 1  # once, not twice
            # ... and the sink's outage cost no dead letter of a good message.
            assert metric(gateway, "xrgw_messages_deadlettered_total",
                           reason="undeliverable") == 0
        finally:
            await gateway.stop()

    asyncio.run(scenario())
