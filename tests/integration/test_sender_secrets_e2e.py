"""Issue 29's attacks against a running gateway: senders post unmatched requests carrying
secrets to two HTTP ingresses (curl, as a sender would), and no secret appears in any
admin output, metric label, log line or dead-letter explanation.

- `open-in` takes anyone; the senders put `Authorization: Token <SENDER>`, a cookie and a
  redacted `x-api-key` on requests no definition accepts (the definition wants
  `Authorization: Bearer {token}`).
- `auth-in` requires its own credential (`password`); the ingress strips it once the
  request is authenticated, so the dead letter (`xrgw-record`, all of it) never has it.

The gateway's admin port is on loopback with a token; /metrics, /conformance, the status
page and every log line (debug level) are searched, as are the dead letters on NATS."""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import subprocess
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import pytest

from adapters.registry import REGISTRY
from gateway.config import load_config
from gateway.daemon import Gateway
from gateway.observability.logs import configure
from harness.brokers import free_port

TIMEOUT = 60.0
SENDER = "SUPERSECRET-API-KEY-123"
COOKIE = "COOKIE-SESSION-98765"
API_KEY = "X-API-KEY-SECRET-555"
INGRESS = "INGRESS-PASSWORD-4711"
ADMIN = "admin-token-for-the-pages"
SECRETS = (SENDER, COOKIE, API_KEY, INGRESS)


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """`run` and `configure` replace the root logger's handlers: put them back."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def _config(tmp: Path, sfx: str, nats_url: str) -> Path:
    doc = {
        "endpoints": {
            "open-in": {"usage": ["consumer"], "protocol": "HTTP", "protocoloptions": {},
                        "messagegroups": ["#/messagegroups/api"]},
            "auth-in": {"usage": ["consumer"], "protocol": "HTTP", "protocoloptions": {},
                        "messagegroups": ["#/messagegroups/api"]},
            "events": {"usage": ["producer"], "protocol": "NATS",
                       "protocoloptions": {"subject": f"events.{sfx}"}},
            "dead": {"usage": ["producer"], "protocol": "NATS",
                     "protocoloptions": {"subject": f"dead.{sfx}"}},
        },
        "messagegroups": {"api": {"envelope": "CloudEvents/1.0", "messages": {"call": {
            "protocol": "HTTP",
            "protocoloptions": {"path": {"value": "/api"},
                                "headers": {"authorization": {"value": "Bearer {token}"}}},
            "envelope": "CloudEvents/1.0",
            "envelopemetadata": {"type": {"value": "com.example.call"},
                                 "source": {"value": "/api"}}}}}},
    }
    (tmp / "api.xreg.json").write_text(json.dumps(doc))
    (tmp / "admin-token").write_text(ADMIN)
    (tmp / "ingress-password").write_text(INGRESS)
    path = tmp / "gateway.yaml"
    path.write_text(json.dumps({
        "definitions": ["api.xreg.json"],
        "routes": [{"from": "open-in", "to": ["events"], "redact": ["headers.x-api-key"]},
                   {"from": "auth-in", "to": ["events"]}],
        "deadletter": "dead",
        "admin": {"listen": "127.0.0.1:0", "token_file": "admin-token"},
        "log": {"level": "debug"}, "shutdown": {"grace": "1s"},
        "endpoints": {
            "open-in": {"uri": f"http://127.0.0.1:{free_port()}"},
            "auth-in": {"uri": f"http://127.0.0.1:{free_port()}",
                        "password_file": "ingress-password"},
            "events": {"uri": nats_url}, "dead": {"uri": nats_url}}}))
    return path


def _curl(url: str, *headers: str) -> str:
    args = [shutil.which("curl") or "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}"]
    for header in headers:
        args += ["-H", header]
    return subprocess.run([*args, "--data", '{"n": 1}', url], capture_output=True,
                          text=True, check=False, timeout=30).stdout


def _get(url: str, token: str | None = None) -> str:
    request = urllib.request.Request(url, headers={} if token is None else {
        "Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        return str(answer.read().decode())


def test_no_sender_secret_in_any_output(tmp_path: Path, nats_server: Any,
                                        capfd: pytest.CaptureFixture[str]) -> None:
    sfx = uuid.uuid4().hex[:8]
    config, problems = load_config(_config(tmp_path, sfx, nats_server.url))
    assert config is not None, [str(p) for p in problems]
    configure("debug", "json")

    async def scenario() -> tuple[dict[str, str], list[Any]]:
        nc = await nats.connect(nats_server.url)
        dead: list[Any] = []

        async def on_dead(msg: Any) -> None:
            dead.append(msg)

        await nc.subscribe(f"dead.{sfx}", cb=on_dead)
        await nc.flush()
        gateway = Gateway(config, REGISTRY)
        await gateway.start()
        try:
            async with asyncio.timeout(TIMEOUT):
                while not all(gateway.readiness().values()):
                    await asyncio.sleep(0.05)
            ports = {r.source_endpoint: r.consumer.port  # type: ignore[attr-defined]
                     for r in gateway.routes}
            codes = []
            for i in range(3):
                codes.append(await asyncio.to_thread(
                    _curl, f"http://127.0.0.1:{ports['open-in']}/api",
                    f"Authorization: Token {SENDER}-{i}", f"Cookie: session={COOKIE}",
                    f"X-Api-Key: {API_KEY}"))
                codes.append(await asyncio.to_thread(
                    _curl, f"http://127.0.0.1:{ports['auth-in']}/api",
                    f"Authorization: Bearer {INGRESS}"))
            assert codes == ["202"] * 6  # dead-lettered = acknowledged
            async with asyncio.timeout(TIMEOUT):
                while len(dead) < 6:
                    await asyncio.sleep(0.05)
            assert gateway.admin is not None
            base = f"http://127.0.0.1:{gateway.admin.port}"
            outputs = {
                "metrics": await asyncio.to_thread(_get, base + "/metrics"),
                "conformance": await asyncio.to_thread(_get, base + "/conformance", ADMIN),
                "status page": await asyncio.to_thread(_get, base + "/", ADMIN),
            }
        finally:
            await gateway.stop()
            await nc.close()
        return outputs, dead

    outputs, dead = asyncio.run(scenario())
    outputs["logs"] = capfd.readouterr().out
    for where, text in outputs.items():
        for secret in SECRETS:
            assert secret not in text, f"{secret} in {where}"
    # The outputs still say what went wrong.
    report = json.loads(outputs["conformance"])
    failures = {c["failure"] for r in report["routes"] for c in r["constraints"]}
    assert failures == {"headers[authorization]: expected Bearer {token}, got ***",
                        "headers[authorization]: expected Bearer {token}, got nothing "
                        "(field absent)"}
    assert ('xrgw_conformance_failed_checks{failure="headers[authorization]: expected '
            'Bearer {token}"') in outputs["metrics"]
    for msg in dead:
        headers = dict(msg.headers or {})
        explained = headers.get("xrgw-explain", "") + headers.get("xrgw-detail", "")
        for secret in SECRETS:
            assert secret not in explained
        record = json.loads(headers["xrgw-record"])
        if headers.get("xrgw-source-endpoint") == "auth-in":
            # The ingress's own credential is nowhere in its dead letters.
            assert INGRESS not in json.dumps(headers) + msg.data.decode()
            assert "authorization" not in {h["name"].lower() for h in record["headers"]}
