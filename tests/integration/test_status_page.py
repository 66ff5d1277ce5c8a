"""The admin server's status page in a real browser: headless Chromium (Debian's
`chromium`) loads `/` from a running gateway (MQTT in -> NATS out, NATS dead letter), and
the numbers it shows must equal what was sent: per route received / matched / rendered /
dead-lettered, per definition, dead letters by reason, and the unmatched samples with
their explanation and the route's `redact:` paths hidden. The screenshot is kept in the
test's tmp dir (`status.png`). `xrgw report URL` prints the same counts."""

from __future__ import annotations

import asyncio
import json
import shutil
import uuid
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import nats
import paho.mqtt.client as paho
import pytest
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion
from support import write_store_gateway

from adapters.registry import REGISTRY
from gateway.cli import main
from gateway.config import load_config
from gateway.daemon import Gateway

TIMEOUT = 30.0
MATCHED = 7
UNMATCHED = 3
XID = "/messagegroups/store/messages/sale"
CARD = "4111-1111-1111-1111"


def _publish(port: int, messages: list[tuple[str, bytes]]) -> None:
    client = paho.Client(CallbackAPIVersion.VERSION2, client_id=f"pub-{uuid.uuid4().hex}",
                         protocol=MQTTProtocolVersion.MQTTv5)
    client.connect("127.0.0.1", port)
    client.loop_start()
    try:
        for topic, body in messages:
            client.publish(topic, body, qos=1).wait_for_publish(10)
    finally:
        client.disconnect()
        client.loop_stop()


class _Page(HTMLParser):
    """Table rows of the page: their data-* attributes and their counted cells."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[dict[str, Any]] = []
        self._count: str | None = None
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "tr":
            self.rows.append({k: v for k, v in found.items() if k.startswith("data-")})
        elif tag == "td" and "data-count" in found:
            self._count = found["data-count"]

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._count is not None and self.rows:
            self.rows[-1][self._count] = int(data.strip())
            self._count = None


def _row(page: _Page, **attrs: str) -> dict[str, Any]:
    wanted = {f"data-{k}": v for k, v in attrs.items()}
    found = [r for r in page.rows if {k: v for k, v in r.items() if k.startswith("data-")}
             == wanted]
    assert len(found) == 1, (attrs, page.rows)
    return found[0]


async def _chromium(url: str, *args: str) -> bytes:
    browser = shutil.which("chromium")
    if browser is None:
        pytest.fail("chromium is not installed: apt-get install chromium")
    proc = await asyncio.create_subprocess_exec(
        browser, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1280,1400",
        *args, url, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0
    return out


def test_status_page_in_chromium(tmp_path: Path, mosquitto: Any, nats_server: Any,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    sfx = uuid.uuid4().hex[:8]
    path = write_store_gateway(tmp_path, sfx, mosquitto.url, nats_server.url, ["data.card"])
    config, problems = load_config(path)
    assert config is not None, [str(p) for p in problems]

    async def scenario() -> None:
        nc = await nats.connect(nats_server.url)
        events: list[Any] = []
        dead: list[Any] = []

        async def on_event(msg: Any) -> None:
            events.append(msg)

        async def on_dead(msg: Any) -> None:
            dead.append(msg)

        await nc.subscribe(f"events.{sfx}", cb=on_event)
        await nc.subscribe(f"dead.{sfx}", cb=on_dead)
        gateway = Gateway(config, REGISTRY)
        await gateway.start()
        try:
            async with asyncio.timeout(TIMEOUT):
                while not (gateway.readiness() and all(gateway.readiness().values())):
                    await asyncio.sleep(0.05)
            sent = [(f"st/{sfx}/{i % 2}/cashierdesk", json.dumps({"amount": i}).encode())
                    for i in range(MATCHED)]
            sent += [(f"st/{sfx}/12/desk", json.dumps({"card": CARD, "n": i}).encode())
                     for i in range(UNMATCHED)]
            await asyncio.to_thread(_publish, mosquitto.port, sent)
            async with asyncio.timeout(TIMEOUT):
                while len(events) < MATCHED or len(dead) < UNMATCHED:
                    await asyncio.sleep(0.05)
            assert gateway.admin is not None
            url = f"http://127.0.0.1:{gateway.admin.port}/"
            dom = (await _chromium(url, "--dump-dom")).decode()
            shot = tmp_path / "status.png"
            await _chromium(url, f"--screenshot={shot}")
            assert shot.stat().st_size > 1000
            report_code = await asyncio.to_thread(main, ["report", url])
        finally:
            await gateway.stop()
            await nc.close()
        page = _Page()
        page.feed(dom)
        route = _row(page, route="store-mqtt->events")
        assert (route["received"], route["matched"], route["rendered"],
                route["deadletter"]) == (MATCHED + UNMATCHED, MATCHED, MATCHED, UNMATCHED)
        definition = _row(page, route="store-mqtt->events", definition=XID)
        assert (definition["matched"], definition["rendered"], definition["unmatched"],
                definition["invalid"]) == (MATCHED, MATCHED, UNMATCHED, 0)
        assert _row(page, route="store-mqtt->events", reason="unmatched")["count"] == UNMATCHED
        text = "".join(page.text)
        # The failed check, counted by its first differing segment, and each sample's
        # explanation.
        check = "topic_name segment 3: expected cashierdesk, got desk"
        assert _row(page, route="store-mqtt->events", failure=check)["failures"] == UNMATCHED
        assert f"expected st/{sfx}/{{storeid}}/cashierdesk, got st/{sfx}/12/desk" in text
        assert CARD not in dom and "***" in text  # redact: data.card
        assert 'http-equiv="refresh"' in dom
        assert report_code == 0
        table = capsys.readouterr().out
        line = next(line for line in table.splitlines() if line.startswith(XID))
        assert line.split()[1:] == [str(MATCHED), str(UNMATCHED), "0"]
        assert f"topic_name segment 3: expected cashierdesk, got desk — {UNMATCHED}" in table

    asyncio.run(scenario())
