"""What a deployment meets first, with the real adapters and a real Kafka (Tansu): the HTTP
ingress listens from the start and answers 503 + Retry-After while its output is down,
every endpoint has its `xrgw_endpoint_connected` series from the start, and `/readyz`
follows `admin.readiness` (all / sources / none) with a broker stopped."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import aiohttp

from adapters.registry import REGISTRY
from gateway.config import load_config
from gateway.daemon import Gateway
from harness.brokers.broker import free_port

ROOT = Path(__file__).resolve().parents[2]


@contextlib.asynccontextmanager
async def _forwarder(port: int, target: tuple[str, int]) -> AsyncIterator[None]:
    """A TCP forwarder on `port` to `target`: Kafka "coming up" where the gateway looks
    for it (Tansu advertises its own address, so only the bootstrap goes through here)."""

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.close()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*target)
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    server = await asyncio.start_server(handle, "127.0.0.1", port)
    try:
        yield
    finally:
        server.close()


def _config(tmp: Path, ingress: int, kafka_port: int, policy: str) -> Path:
    shutil.copy(ROOT / "config/examples/http-webhooks.xreg.json", tmp / "hooks.xreg.json")
    path = tmp / "gateway.yaml"
    topic = f"deploy-{uuid.uuid4().hex[:8]}"
    path.write_text(f"""
definitions: [hooks.xreg.json]
routes:
  - from: webhooks-http
    to: [webhooks-kafka]
    mode: structured
deadletter: webhooks-deadletter
admin: {{listen: "127.0.0.1:0", readiness: {policy}}}
endpoints:
  webhooks-http: {{uri: "http://127.0.0.1:{ingress}"}}
  webhooks-kafka:
    uri: "kafka://127.0.0.1:{kafka_port}"
    options: {{topic: {topic}}}
  webhooks-deadletter:
    uri: "kafka://127.0.0.1:{kafka_port}"
    options: {{topic: {topic}-dead}}
""")
    return path


async def _post(session: aiohttp.ClientSession, url: str) -> tuple[int, dict[str, str]]:
    async with session.post(url, json={"version": "1.2.3"}) as response:
        return response.status, dict(response.headers)


async def _until(check, what: str, timeout: float = 60.0):  # type: ignore[no-untyped-def]
    async with asyncio.timeout(timeout):
        while True:
            try:
                found = await check()
            except aiohttp.ClientConnectionError:
                found = None
            if found:
                return found
            await asyncio.sleep(0.1)
    raise AssertionError(what)  # pragma: no cover


def test_ingress_answers_503_while_kafka_is_down_at_start_then_202(tmp_path, tansu):
    ingress, kafka_port = free_port(), free_port()
    config, problems = load_config(_config(tmp_path, ingress, kafka_port, "sources"))
    assert config is not None, [str(p) for p in problems]
    host, port = tansu.url.removeprefix("kafka://").split(":")
    url = f"http://127.0.0.1:{ingress}/hooks/acme/deployments/prod"

    async def scenario() -> None:
        gateway = Gateway(config, REGISTRY)
        await gateway.start()
        try:
            async with aiohttp.ClientSession() as session:
                # Listening from the start: 503 + Retry-After, not a refused connection.
                async def refused() -> tuple[int, dict[str, str]] | None:
                    status, headers = await _post(session, url)
                    return (status, headers) if status == 503 else None

                _, headers = await _until(refused, "the ingress answered 503")
                assert headers["Retry-After"] == "1"
                # Every endpoint has its connected series, the ingress up, Kafka down.
                text = gateway.metrics.render().decode()
                for endpoint, value in (("webhooks-http", 1.0), ("webhooks-kafka", 0.0),
                                        ("webhooks-deadletter", 0.0)):
                    assert (f'xrgw_endpoint_connected{{endpoint="{endpoint}",'
                            f'xrgw_endpoint="{endpoint}"}} {value}') in text, text
                # Readiness per policy with the output down.
                verdicts = {}
                for policy in ("all", "sources", "none"):
                    gateway.config = replace(config, admin=replace(config.admin,
                                                                   readiness=policy))
                    verdicts[policy] = gateway.readiness_report()
                assert verdicts["all"].ready is False
                down = {e.get("endpoint") for e in verdicts["all"].not_ready}
                assert {"webhooks-kafka", "webhooks-deadletter"} <= down
                assert verdicts["sources"].ready is True
                assert {e.get("endpoint") for e in verdicts["sources"].ignored} >= down
                assert verdicts["none"].ready is True
                gateway.config = config
                assert gateway.admin is not None
                admin = f"http://127.0.0.1:{gateway.admin.port}/readyz"
                async with session.get(admin) as response:
                    body = await response.json()
                    assert response.status == 200 and body["policy"] == "sources"
                    assert body["ignored"], body
                # Kafka comes up: the same request is accepted.
                async with _forwarder(kafka_port, (host, int(port))):
                    async def accepted() -> bool:
                        status, _ = await _post(session, url)
                        return status == 202

                    up = time.monotonic()
                    await _until(accepted, "the ingress accepted once Kafka was up")
                    # shown with -s: how long senders still got 503 (the outputs'
                    # reconnect backoff, at most routes[].retry.max_backoff)
                    print(f"202 {time.monotonic() - up:.2f}s after Kafka was reachable")
                    sample = gateway.metrics.registry.get_sample_value(
                        "xrgw_endpoint_connected", {"endpoint": "webhooks-kafka"})
                    assert sample == 1.0
        finally:
            await gateway.stop()

    asyncio.run(scenario())


def test_log_levels_while_kafka_is_unreachable(tmp_path):
    """A broker that keeps refusing: one warning from the gateway, with the endpoint; the
    client library's own lines are at most warnings and rate-limited; no error line."""
    ingress, kafka_port = free_port(), free_port()
    config = _config(tmp_path, ingress, kafka_port, "all")
    log_path = tmp_path / "run.log"
    with log_path.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "gateway.cli", "run", "-c", str(config),
             "--log-level", "debug"], stdout=out, stderr=subprocess.STDOUT)
    try:
        def lines() -> list[dict[str, object]]:
            return [json.loads(x) for x in log_path.read_text().splitlines()
                    if x.startswith("{")]

        def retries() -> list[dict[str, object]]:
            return [x for x in lines() if x.get("endpoint") == "webhooks-kafka"
                    and str(x["message"]).startswith("endpoint not connected")]

        deadline = time.monotonic() + 120
        while len(retries()) < 5:  # a first attempt and four retries
            assert process.poll() is None, log_path.read_text()
            assert time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.2)
    finally:
        process.terminate()
        process.wait(30)
    found = lines()
    assert [x for x in found if x["level"] == "error"] == []
    assert retries()[0]["level"] == "warning"
    assert {x["level"] for x in retries()[1:]} == {"debug"}
    client = [x for x in found if str(x["logger"]).startswith("aiokafka")
              and x["level"] != "debug"]
    assert client, "aiokafka said nothing about the refused connection"
    assert {x["level"] for x in client} == {"warning"}
    assert {x.get("endpoint") for x in client} == {"webhooks-kafka"}, client
    templates = [str(x["message"]).split(":")[0] for x in client]
    assert len(templates) == len(set(templates)), client  # once per minute each
