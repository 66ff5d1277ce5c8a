"""Every way a message ends in the dead letter, end to end through real brokers.

One gateway (in process) with three routes and a Kafka dead letter (`dlq-<sfx>`):

- `dl-kafka` (Kafka, `ambiguity: deadletter`) -> NATS sink: one record per case, the key
  picks the case: `ok-1` (delivered, the control), `zzz-1` and `zzz-2` (unmatched; JSON
  and non-UTF-8 bodies), `amb-1` (two equally specific definitions: ambiguous),
  `sp-bad name` (the capture `bad name` rendered into `source` makes an invalid
  URI-reference: invalid-envelope), `ce-1` (a binary CloudEvent with a bad `time`:
  invalid-cloudevent);
- `dl-kafka-down` (Kafka) -> an HTTP producer pointing at a closed port, retry budget 2
  attempts / 50 ms: undeliverable;
- `dl-http` (HTTP ingress) -> NATS sink: a path no definition matches (unmatched) and one
  that matches (delivered).

Each dead letter must carry the right `xrgw-reason`, the original body byte for byte and
the original record's metadata; the source message must be acked: Kafka offsets
committed past it, HTTP answered 202, and no dead letter written twice.
The definitions are the fixture `fixtures/deadletter.xreg.json`.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import nats
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer  # type: ignore[import-untyped]
from aiokafka.admin import AIOKafkaAdminClient, NewTopic  # type: ignore[import-untyped]
from aiokafka.structs import TopicPartition  # type: ignore[import-untyped]

from adapters.registry import REGISTRY
from gateway.config import load_config
from gateway.daemon import Gateway
from harness.brokers import free_port

TIMEOUT = 30.0
FIXTURES = Path(__file__).resolve().parent / "fixtures"

#: Kafka cases on `dl-in-<sfx>`, in send order: (case, key, extra headers).
KAFKA_CASES: list[tuple[str, str, list[tuple[str, bytes]]]] = [
    ("ok", "ok-1", []),
    ("unmatched", "zzz-1", []),
    ("unmatched-bytes", "zzz-2", [("content-type", b"application/octet-stream")]),
    ("ambiguous", "amb-1", []),
    ("invalid-envelope", "sp-bad name", []),
    ("invalid-cloudevent", "ce-1", [
        ("ce_specversion", b"1.0"), ("ce_id", b"bad-time-1"), ("ce_type", b"com.example.x"),
        ("ce_source", b"/dl/ce"), ("ce_time", b"yesterday at noon")]),
]

#: case -> (expected reason, source endpoint).
EXPECTED = {
    "unmatched": ("unmatched", "dl-kafka"),
    "unmatched-bytes": ("unmatched", "dl-kafka"),
    "ambiguous": ("ambiguous", "dl-kafka"),
    "invalid-envelope": ("invalid-envelope", "dl-kafka"),
    "invalid-cloudevent": ("invalid-cloudevent", "dl-kafka"),
    "undeliverable": ("undeliverable", "dl-kafka-down"),
    "http-unmatched": ("unmatched", "dl-http"),
}


def _uid() -> str:
    return uuid.uuid4().hex[:8]


def _body(case: str, sfx: str) -> bytes:
    if case == "unmatched-bytes":  # not JSON, not even UTF-8
        return b"\xff\x00raw " + sfx.encode()
    # Deliberately not compact JSON (indent, 1.50): see test_json_body_byte_for_byte.
    return json.dumps({"case": case, "run": sfx}, indent=1).replace(
        "}", ', "value": 1.50}').encode()


def _headers(case: str, extra: list[tuple[str, bytes]]) -> list[tuple[str, bytes]]:
    if any(k == "content-type" for k, _ in extra):
        return extra
    return [("content-type", b"application/json"), *extra]


def _config(tmp: Path, sfx: str, *, tansu: Any, nats_server: Any) -> Path:
    text = (FIXTURES / "deadletter.xreg.json").read_text().replace("__SFX__", sfx)
    (tmp / "deadletter.xreg.json").write_text(text)
    kafka_opts = {"session_timeout_ms": 3000, "heartbeat_interval_ms": 500}
    config = {
        "definitions": ["deadletter.xreg.json"],
        "routes": [
            {"from": "dl-kafka", "to": ["dl-sink"], "ambiguity": "deadletter"},
            {"from": "dl-kafka-down", "to": ["dl-down"],
             "retry": {"attempts": 2, "initial_backoff": "50ms", "max_backoff": "100ms"}},
            {"from": "dl-http", "to": ["dl-sink"]},
        ],
        "deadletter": "dlq",
        "admin": {"listen": "127.0.0.1:0"}, "log": {"level": "error"},
        "shutdown": {"grace": "5s"},
        "endpoints": {
            "dl-kafka": {"uri": tansu.url, "options": {
                "topics": [f"dl-in-{sfx}"], "consumergroup": f"dl-{sfx}", **kafka_opts}},
            "dl-kafka-down": {"uri": tansu.url, "options": {
                "topics": [f"dl-down-{sfx}"], "consumergroup": f"dl-down-{sfx}",
                **kafka_opts}},
            # accept every path under /dl/, so that an unmatched one reaches the gateway
            "dl-http": {"uri": f"http://127.0.0.1:{free_port()}", "options": {"paths": ["/dl/"]}},
            "dl-sink": {"uri": nats_server.url},
            # nothing listens there; one HTTP attempt per send, the route retries
            "dl-down": {"uri": f"http://127.0.0.1:{free_port()}/down",
                        "options": {"timeout": 2}},
            "dlq": {"uri": tansu.url},
        },
    }
    path = tmp / "gateway.yaml"
    path.write_text(json.dumps(config, indent=1))  # JSON is YAML
    return path


async def _read_all(bootstrap: str, topic: str, count: int, quiet: float) -> list[Any]:
    """At least `count` records from the start of `topic`, then whatever else arrives
    within `quiet` seconds (so that a duplicate would be seen)."""
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=f"check-{_uid()}",
                                auto_offset_reset="earliest", session_timeout_ms=3000,
                                heartbeat_interval_ms=500)
    await consumer.start()
    out: list[Any] = []
    try:
        async with asyncio.timeout(TIMEOUT):
            while len(out) < count:
                for records in (await consumer.getmany(timeout_ms=300)).values():
                    out.extend(records)
        loop = asyncio.get_running_loop()
        end = loop.time() + quiet
        while loop.time() < end:
            for records in (await consumer.getmany(timeout_ms=200)).values():
                out.extend(records)
    finally:
        await consumer.stop()
    return out


async def _committed(bootstrap: str, group: str, topic: str) -> int | None:
    """The group's committed offset (OffsetFetch; the consumer does not join the group,
    and Tansu does not answer the admin client's variant)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                                enable_auto_commit=False)
    await consumer.start()
    try:
        offset: int | None = await consumer.committed(TopicPartition(topic, 0))
        return offset
    finally:
        await consumer.stop()


@dataclass
class DeadLetter:
    reason: str
    headers: dict[str, str]
    body: bytes
    record: dict[str, Any]


@dataclass
class Run:
    sfx: str
    dead: dict[str, list[DeadLetter]]  # by case (from the original body)
    http_status: dict[str, int]
    sink: list[Any]
    committed: dict[str, int | None]
    sent_offsets: dict[str, int]
    metrics: str


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, tansu: Any, nats_server: Any) -> Run:
    sfx = _uid()
    tmp = tmp_path_factory.mktemp("deadletter")
    bootstrap = tansu.bootstrap_servers

    async def scenario() -> Run:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            await admin.create_topics([NewTopic(t, num_partitions=1, replication_factor=1)
                                       for t in (f"dl-in-{sfx}", f"dl-down-{sfx}",
                                                 f"dlq-{sfx}")])
        finally:
            await admin.close()
        config, problems = load_config(_config(tmp, sfx, tansu=tansu,
                                               nats_server=nats_server))
        assert config is not None, [str(p) for p in problems if p.is_error]
        gateway = Gateway(config, REGISTRY)
        nc = await nats.connect(nats_server.url)
        sink: list[Any] = []

        async def on_sink(msg: Any) -> None:
            sink.append(msg)

        await nc.subscribe(f"dl.sink.{sfx}", cb=on_sink)
        await nc.flush()
        await gateway.start()
        sent: dict[str, int] = {}
        status: dict[str, int] = {}
        try:
            async with asyncio.timeout(TIMEOUT):
                while not all(gateway.readiness().values()):
                    await asyncio.sleep(0.05)
            producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
            await producer.start()
            try:
                for case, key, headers in KAFKA_CASES:
                    meta = await producer.send_and_wait(
                        f"dl-in-{sfx}", _body(case, sfx), key=key.encode(),
                        headers=_headers(case, headers))
                    sent[case] = meta.offset
                meta = await producer.send_and_wait(
                    f"dl-down-{sfx}", _body("undeliverable", sfx), key=b"d1",
                    headers=[("content-type", b"application/json")])
                sent["undeliverable"] = meta.offset
            finally:
                await producer.stop()
            port = next(r.consumer.port for r in gateway.routes  # type: ignore[attr-defined]
                        if r.source_endpoint == "dl-http")
            async with aiohttp.ClientSession() as http:
                for case, path in (("http-unmatched", f"/dl/{sfx}/nope/1"),
                                   ("http-ok", f"/dl/{sfx}/ok/2")):
                    async with http.post(f"http://127.0.0.1:{port}{path}",
                                         data=_body(case, sfx),
                                         headers={"Content-Type": "application/json"}) as resp:
                        status[case] = resp.status
            records = await _read_all(bootstrap, f"dlq-{sfx}", len(EXPECTED), quiet=1.0)
            async with asyncio.timeout(TIMEOUT):
                while len(sink) < 2:
                    await asyncio.sleep(0.05)
            metrics = gateway.metrics.render().decode()
        finally:
            await gateway.stop()  # flushes the Kafka commits
            await nc.close()
        committed = {
            "dl-kafka": await _committed(bootstrap, f"dl-{sfx}", f"dl-in-{sfx}"),
            "dl-kafka-down": await _committed(bootstrap, f"dl-down-{sfx}", f"dl-down-{sfx}"),
        }
        # which case a dead letter is, from the original record it describes
        by_origin = {(f"dl-in-{sfx}", off): case for case, off in sent.items()
                     if case != "undeliverable"}
        by_origin[f"dl-down-{sfx}", sent["undeliverable"]] = "undeliverable"
        dead: dict[str, list[DeadLetter]] = {}
        for r in records:
            headers = {k: v.decode() for k, v in r.headers}
            original = json.loads(headers.get("xrgw-record", "{}"))
            if original.get("protocol") == "HTTP":
                case = "http-unmatched" if "/nope/" in original.get("path", "") else "?"
            else:
                case = by_origin.get((original.get("topic"), original.get("offset")), "?")
            dead.setdefault(case, []).append(DeadLetter(
                headers.get("xrgw-reason", ""), headers, r.value, original))
        return Run(sfx, dead, status, sink, committed, sent, metrics)

    return asyncio.run(scenario())


@pytest.mark.parametrize("case", list(EXPECTED))
def test_dead_letter(run: Run, case: str) -> None:
    reason, source = EXPECTED[case]
    letters = run.dead.get(case, [])
    assert len(letters) == 1, f"{case}: {len(letters)} dead letter(s) (want exactly 1)"
    letter = letters[0]
    assert letter.reason == reason, f"{case}: {letter.headers}"
    sent = _body(case, run.sfx)
    if case == "unmatched-bytes":
        assert letter.body == sent, f"{case}: body not intact"
        assert letter.headers["content-type"] == "application/octet-stream"
    else:
        # JSON bodies: the same JSON document (bytes: see test_json_body_byte_for_byte)
        assert json.loads(letter.body) == json.loads(sent), f"{case}: body not intact"
        assert letter.headers["content-type"] == "application/json"
    assert letter.headers["xrgw-source-endpoint"] == source
    assert letter.headers["xrgw-detail"], f"{case}: no detail"
    assert letter.headers["xrgw-time"].endswith("Z")
    original = letter.record
    assert "data" not in original and "data_base64" not in original
    if source == "dl-http":
        assert original["protocol"] == "HTTP"
        assert original["path"] == f"/dl/{run.sfx}/nope/1"
        assert run.http_status[case] == 202  # dead-lettered = acked = 202 Accepted
    else:
        assert original["protocol"] == "KAFKA"
        assert original["offset"] == run.sent_offsets[case]
        topic = f"dl-down-{run.sfx}" if case == "undeliverable" else f"dl-in-{run.sfx}"
        assert original["topic"] == topic
    if reason == "unmatched":
        explain = json.loads(letter.headers["xrgw-explain"])
        assert explain, f"{case}: an unmatched dead letter explains the nearest definitions"
    if reason == "invalid-envelope":
        assert "source" in letter.headers["xrgw-detail"], letter.headers["xrgw-detail"]
    if reason == "invalid-cloudevent":
        assert "time" in letter.headers["xrgw-detail"], letter.headers["xrgw-detail"]
    if reason == "ambiguous":
        detail = letter.headers["xrgw-detail"]
        assert "amb-a" in detail and "amb-b" in detail, detail
    if reason == "undeliverable":
        assert "dl-down" in letter.headers["xrgw-detail"]
    assert not run.dead.get("?"), f"dead letters of no case: {run.dead.get('?')}"


def test_json_body_byte_for_byte(run: Run) -> None:
    [letter] = run.dead["unmatched"]
    assert letter.body == _body("unmatched", run.sfx)


def test_control_messages_delivered(run: Run) -> None:
    """The same routes deliver what matches: the failures above are about the messages."""
    sources = sorted((m.headers or {}).get("ce-source", "") for m in run.sink)
    assert sources == ["/dl/1", "/dl/2"], sources
    assert run.http_status["http-ok"] == 202


def test_sources_acked(run: Run) -> None:
    """Every Kafka record was acked, dead-lettered ones included: the group's committed
    offset is one past the last record, so a restart redelivers nothing."""
    assert run.committed["dl-kafka"] == max(
        run.sent_offsets[c] for c, _, _ in KAFKA_CASES) + 1, run.committed
    assert run.committed["dl-kafka-down"] == run.sent_offsets["undeliverable"] + 1


def test_deadletter_metrics(run: Run) -> None:
    counts: dict[str, int] = {}
    for reason, _ in EXPECTED.values():
        counts[reason] = counts.get(reason, 0) + 1
    for reason, count in counts.items():
        line = f'xrgw_deadletter_total{{reason="{reason}"}} {float(count)}'
        assert line in run.metrics, line
    assert ('xrgw_messages_published_total{endpoint="dl-sink",xrgw_endpoint="dl-sink"} 2.0'
            in run.metrics)
