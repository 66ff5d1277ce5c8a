"""Kafka records written by clients nobody here wrote, through a real Kafka -> NATS route.

librdkafka (`confluent-kafka`, the client under most Kafka producers: Java-less services,
Go, .NET, Python) writes to Tansu with every compression codec Kafka defines, as an
idempotent producer, as a transactional one, with null keys, tombstones (null values),
binary header values and a 1 MB record. One record is written at the wire level with a
header name that is not UTF-8 (librdkafka cannot write one; other clients can). A gateway
in process runs one route from a Kafka source subscribed to every case's topic to a
core NATS sink, dead letters to a Kafka topic.

Each case: every record becomes an event on NATS (its body intact) or a dead letter with
a reason; none is lost, none is delivered twice, the partition behind a bad record keeps
flowing (no stall), and the route ends ready. The table of sent / delivered /
dead-lettered per case is printed (`-s`) for the issue's closing note.

Tansu accepts transactions (InitProducerId, AddPartitionsToTxn, EndTxn) and writes the
abort and commit markers, but its Fetch answers carry an empty aborted-transactions list
(checked: the abort marker sits at the offset after the aborted records, the list is
[]), so records of an aborted transaction reach a `read_committed` consumer -- a
consumer cannot know a batch was aborted until the marker after it, which is why Kafka
sends the list. The test that aborted records never become events is therefore an
expected failure on Tansu (strict: it fails the day Tansu reports aborts and the mark
must go), and `tests/unit/test_kafka_fetch.py` checks the adapter's read_committed
filtering on crafted batches with an aborted-transactions list.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import struct
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nats
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer  # type: ignore[import-untyped]
from aiokafka.admin import AIOKafkaAdminClient, NewTopic  # type: ignore[import-untyped]
from aiokafka.record.util import calc_crc32c  # type: ignore[import-untyped]
from aiokafka.structs import TopicPartition  # type: ignore[import-untyped]
from confluent_kafka import Producer  # type: ignore[import-untyped]

from adapters.registry import REGISTRY
from gateway.config import load_config
from gateway.daemon import Gateway
from harness.brokers import NatsServer, Tansu

pytestmark = pytest.mark.integration

TIMEOUT = 90.0
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
PER_CODEC = 50
BIG = 1_000_000  # bytes of the 1 MB record's value
#: Cases broken at the wire level (librdkafka writes nothing broken).
WIRE = ("header-name-not-utf8", "crc-mismatch", "corrupt-lz4")
#: The header name written in place of the placeholder (same length), not UTF-8.
PLACEHOLDER, NOT_UTF8 = b"ZZMARK", b"\xff\xfeMARK"


@dataclass
class Case:
    name: str
    sent: int = 0
    dead_expected: int = 0  # dead letters meant to be written (undecodable)
    dead_offsets: int = 0  # offsets those dead letters cover (a batch: several)
    delivered: list[Any] = field(default_factory=list)  # NATS messages
    dead: list[Any] = field(default_factory=list)  # dead-letter records


def _uid() -> str:
    return uuid.uuid4().hex[:8]


@pytest.fixture(scope="module")
def brokers() -> Iterator[tuple[Tansu, NatsServer]]:
    tansu, nats_server = Tansu(), NatsServer()
    try:
        tansu.start()
        nats_server.start()
        yield tansu, nats_server
    finally:
        nats_server.close()
        tansu.close()


def _definitions(sfx: str, cases: list[str]) -> dict[str, Any]:
    messages = {
        case: {
            "protocol": "KAFKA",
            "protocoloptions": {"topic": f"ix-{case}-{sfx}"},
            "envelope": "CloudEvents/1.0",
            "envelopemetadata": {
                "type": {"value": f"com.example.interop.{case}"},
                "source": {"value": f"/interop/{case}"},
            },
        }
        for case in cases
    }
    return {
        "$schema": "https://cloudevents.io/schemas/registry",
        "specversion": "1.0-rc4",
        "endpoints": {
            "ix-kafka": {"usage": ["consumer"], "protocol": "KAFKA", "protocoloptions": {},
                         "messagegroups": ["#/messagegroups/ix"]},
            "ix-sink": {"usage": ["producer"], "protocol": "NATS",
                        "protocoloptions": {"subject": f"ix.sink.{sfx}"}},
            "ix-dlq": {"usage": ["producer"], "protocol": "KAFKA",
                       "protocoloptions": {"topic": f"ix-dlq-{sfx}"}},
        },
        "messagegroups": {"ix": {"envelope": "CloudEvents/1.0", "messages": messages}},
    }


def _config(tmp: Path, sfx: str, cases: list[str], tansu: Tansu,
            nats_server: NatsServer) -> Path:
    (tmp / "interop.xreg.json").write_text(json.dumps(_definitions(sfx, cases)))
    config = {
        "definitions": ["interop.xreg.json"],
        "routes": [{"from": "ix-kafka", "to": ["ix-sink"]}],
        "deadletter": "ix-dlq",
        "admin": {"listen": "127.0.0.1:0"}, "log": {"level": "warning"},
        "shutdown": {"grace": "5s"},
        "endpoints": {
            "ix-kafka": {"uri": tansu.url, "options": {
                "topics": [f"ix-{case}-{sfx}" for case in cases],
                "consumergroup": f"ix-{sfx}", "session_timeout_ms": 6000,
                "heartbeat_interval_ms": 1000}},
            "ix-sink": {"uri": nats_server.url},
            "ix-dlq": {"uri": tansu.url},
        },
    }
    path = tmp / "gateway.yaml"
    path.write_text(json.dumps(config, indent=1))
    return path


def _librdkafka(bootstrap: str, **conf: Any) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                     "message.max.bytes": 2_000_000, **conf})


def _flush(producer: Producer) -> None:
    assert producer.flush(30) == 0, "librdkafka could not deliver everything"


def _produce_librdkafka(bootstrap: str, sfx: str, cases: dict[str, Case]) -> None:
    """Every librdkafka case; each record's body says its case and number."""
    errors: list[Any] = []

    def report(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    def body(case: str, i: int) -> bytes:
        return json.dumps({"case": case, "i": i}).encode()

    def send(producer: Producer, case: str, i: int, **kw: Any) -> None:
        kw.setdefault("value", body(case, i))
        producer.produce(f"ix-{case}-{sfx}", on_delivery=report, **kw)
        cases[case].sent += 1

    for codec in CODECS:
        case = f"codec-{codec}"
        producer = _librdkafka(bootstrap, **{"compression.type": codec})
        for i in range(PER_CODEC):
            send(producer, case, i, key=f"dev-{i % 5}".encode(),
                 headers=[("content-type", b"application/json")])
        _flush(producer)

    producer = _librdkafka(bootstrap, **{"enable.idempotence": True})
    for i in range(PER_CODEC):
        send(producer, "idempotent", i, key=f"dev-{i % 5}".encode())
    _flush(producer)

    producer = _librdkafka(bootstrap)
    for i in range(10):
        send(producer, "null-key", i)  # no key at all
    for i in range(5):
        send(producer, "tombstone", i, key=f"gone-{i}".encode(), value=None)
    for i in range(10):
        send(producer, "binary-headers", i, key=b"b",
             headers=[("bin", bytes([0, 255, 254, i])), ("empty", b""), ("none", None)])
    send(producer, "big", 0, key=b"big", value=bytes(range(256)) * (BIG // 256),
         headers=[("content-type", b"application/octet-stream")])
    _flush(producer)
    assert not errors, errors

    producer = _librdkafka(bootstrap, **{"transactional.id": f"ix-tx-{sfx}"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(f"ix-aborted-{sfx}", value=body("aborted", i), key=b"tx")
    _flush(producer)  # on the broker, then aborted
    producer.abort_transaction(30)
    cases["aborted"].sent = 5
    producer.begin_transaction()
    for i in range(5):
        send(producer, "committed", i, key=b"tx")
    producer.commit_transaction(30)
    _flush(producer)


async def _produce_wire_poison(bootstrap: str, sfx: str, case: Case) -> None:
    """3 good records, one batch of 3 broken at the wire level (the record batch patched
    after building), 100 good ones. `header-name-not-utf8`: the middle record's header
    name is not UTF-8 (CRC made right again); `crc-mismatch`: a byte of the batch flipped;
    `corrupt-lz4`: an lz4 batch whose compressed bytes are garbage (CRC made right)."""
    topic = f"ix-{case.name}-{sfx}"
    good = AIOKafkaProducer(bootstrap_servers=bootstrap)
    lz4 = AIOKafkaProducer(bootstrap_servers=bootstrap, compression_type="lz4")
    await good.start()
    await lz4.start()
    try:
        for i in range(3):
            await good.send_and_wait(topic, json.dumps({"i": i}).encode(), key=b"h")
        producer = lz4 if case.name == "corrupt-lz4" else good
        batch = producer.create_batch()
        for i in range(3):
            name = PLACEHOLDER.decode() if i == 1 else "h"
            batch.append(key=b"h", value=b'{"poison": %d}' % i + b" " * 200,
                         timestamp=None, headers=[(name, b"x")])
        raw = batch._build()  # the buffer send_batch sends
        if case.name == "header-name-not-utf8":
            at = raw.index(PLACEHOLDER)
            raw[at:at + len(PLACEHOLDER)] = NOT_UTF8
            case.dead_offsets = 1  # only that record: its neighbours are delivered
        elif case.name == "crc-mismatch":
            raw[-1] ^= 0xFF
            case.dead_offsets = 3
        else:
            raw[70:76] = b"\xff" * 6
            case.dead_offsets = 3
        if case.name != "crc-mismatch":
            raw[17:21] = struct.pack(">I", calc_crc32c(bytes(raw[21:])))
        await (await producer.send_batch(batch, topic, partition=0))
        for i in range(3, 103):
            await good.send_and_wait(topic, json.dumps({"i": i}).encode(), key=b"h")
    finally:
        await good.stop()
        await lz4.stop()
    case.sent, case.dead_expected = 106, 1


async def _dead_letters(bootstrap: str, topic: str, count: int) -> list[Any]:
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap,
                                group_id=f"check-{_uid()}", auto_offset_reset="earliest")
    await consumer.start()
    out: list[Any] = []
    try:
        async with asyncio.timeout(TIMEOUT):
            while len(out) < count:
                for records in (await consumer.getmany(timeout_ms=300)).values():
                    out.extend(records)
        for records in (await consumer.getmany(timeout_ms=1000)).values():
            out.extend(records)  # a duplicate would show here
    finally:
        await consumer.stop()
    return out


async def _committed(bootstrap: str, group: str, topic: str) -> int | None:
    """The group's committed offset of the topic's partition 0 (without joining it)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                                enable_auto_commit=False)
    await consumer.start()
    try:
        offset: int | None = await consumer.committed(TopicPartition(topic, 0))
        return offset
    finally:
        await consumer.stop()


@pytest.fixture(scope="module")
def run(brokers: tuple[Tansu, NatsServer],
        tmp_path_factory: pytest.TempPathFactory) -> dict[str, Case]:
    tansu, nats_server = brokers
    bootstrap, sfx = tansu.bootstrap_servers, _uid()
    names = [*(f"codec-{c}" for c in CODECS), "idempotent", "null-key", "tombstone",
             "binary-headers", "big", "aborted", "committed", *WIRE]
    cases = {name: Case(name) for name in names}
    tmp = tmp_path_factory.mktemp("interop-kafka")
    logged = _Collect()
    metrics: list[str] = []
    committed: dict[str, int | None] = {}

    async def scenario() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            await admin.create_topics(
                [NewTopic(f"ix-{name}-{sfx}", 1, 1) for name in names]
                + [NewTopic(f"ix-dlq-{sfx}", 1, 1)])
        finally:
            await admin.close()
        for name in WIRE:
            await _produce_wire_poison(bootstrap, sfx, cases[name])
        await asyncio.to_thread(_produce_librdkafka, bootstrap, sfx, cases)
        config, problems = load_config(_config(tmp, sfx, names, tansu, nats_server))
        assert config is not None, [str(p) for p in problems if p.is_error]
        gateway = Gateway(config, REGISTRY)
        nc = await nats.connect(nats_server.url, max_reconnect_attempts=-1)
        delivered: list[Any] = []

        async def on_event(msg: Any) -> None:
            delivered.append(msg)

        await nc.subscribe(f"ix.sink.{sfx}", cb=on_event)
        await nc.flush()
        kafka_log = logging.getLogger("adapters.kafka")
        kafka_log.addHandler(logged)
        await gateway.start()
        expected = sum(c.sent - c.dead_offsets for n, c in cases.items() if n != "aborted")
        dead_expected = sum(c.dead_expected for c in cases.values())
        try:
            async with asyncio.timeout(TIMEOUT):
                while len(delivered) < expected:
                    await asyncio.sleep(0.1)
            dead = await _dead_letters(bootstrap, f"ix-dlq-{sfx}", dead_expected)
            await asyncio.sleep(1.0)  # a late duplicate or aborted record would show
            assert all(gateway.readiness().values()), gateway.readiness()
            metrics.append(gateway.metrics.render().decode())
        finally:
            await gateway.stop()
            await nc.close()
            kafka_log.removeHandler(logged)
        for name in WIRE:  # the group's commit moved past the bad offsets too
            committed[name] = await _committed(bootstrap, f"ix-{sfx}", f"ix-{name}-{sfx}")
        for msg in delivered:
            kind = (msg.headers or {}).get("ce-type", "").rsplit(".", 1)[-1]
            cases[kind].delivered.append(msg)
        for record in dead:
            original = json.loads(dict(record.headers)["xrgw-record"])
            cases[original["topic"].split("-", 1)[1].rsplit("-", 1)[0]].dead.append(record)

    asyncio.run(scenario())
    print("\ncase | sent | delivered | dead-lettered (reason, offsets) | lost | stalled")
    for case in cases.values():
        reasons = Counter(dict(r.headers)["xrgw-reason"].decode() for r in case.dead)
        covered = sum(_span(r) for r in case.dead)
        lost = case.sent - len(case.delivered) - covered
        print(f"{case.name} | {case.sent} | {len(case.delivered)} | {len(case.dead)} "
              f"{dict(reasons)} covering {covered} | {lost} | no")
    RESULT.update(logs=logged.records, metrics=metrics[0], committed=committed)
    return cases


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


#: What the scenario saw besides the messages: the adapter's log records, the metrics.
RESULT: dict[str, Any] = {}


def _span(dead_letter: Any) -> int:
    """How many offsets a dead letter stands for ("offsets 3-5" in its detail)."""
    detail = dict(dead_letter.headers)["xrgw-detail"].decode()
    found = re.search(r"offsets (\d+)-(\d+)", detail)
    return 1 if found is None else int(found[2]) - int(found[1]) + 1


def _bodies(case: Case) -> list[Any]:
    return sorted(json.loads(m.data)["i"] for m in case.delivered)


@pytest.mark.parametrize("codec", CODECS)
def test_every_compression_codec_is_converted(run: dict[str, Case], codec: str) -> None:
    case = run[f"codec-{codec}"]
    assert _bodies(case) == list(range(PER_CODEC))  # all, once each
    assert not case.dead


def test_an_idempotent_producer_is_converted(run: dict[str, Case]) -> None:
    assert _bodies(run["idempotent"]) == list(range(PER_CODEC))


def test_records_of_a_committed_transaction_are_converted_once(run: dict[str, Case]) -> None:
    # The transaction markers (control batches) never become events either.
    assert _bodies(run["committed"]) == list(range(5))


@pytest.mark.xfail(strict=True, reason="Tansu's Fetch answers carry an empty aborted-"
                   "transactions list: no read_committed consumer can skip aborted records")
def test_records_of_an_aborted_transaction_never_become_events(run: dict[str, Case]) -> None:
    assert run["aborted"].delivered == []


def test_null_keys_and_tombstones_are_converted(run: dict[str, Case]) -> None:
    assert _bodies(run["null-key"]) == list(range(10))
    tombstones = run["tombstone"].delivered
    assert len(tombstones) == 5 and all(m.data == b"" for m in tombstones)


def test_binary_header_values_survive(run: dict[str, Case]) -> None:
    assert _bodies(run["binary-headers"]) == list(range(10))


def test_a_1mb_record_is_converted_byte_for_byte(run: dict[str, Case]) -> None:
    (message,) = run["big"].delivered
    assert message.data == bytes(range(256)) * (BIG // 256)


def test_a_header_name_not_utf8_is_dead_lettered_and_the_partition_flows(
        run: dict[str, Case]) -> None:
    case = run["header-name-not-utf8"]
    # the 3 good records before it included, its 2 neighbours in the batch, the 100 after
    assert sorted(json.loads(m.data).get("i", -1) for m in case.delivered) == (
        [-1, -1, *range(103)])
    (dead,) = case.dead
    headers = dict(dead.headers)
    assert headers["xrgw-reason"] == b"undecodable"
    assert b"header 1's name is not UTF-8" in headers["xrgw-detail"]
    original = json.loads(headers["xrgw-record"])
    assert (original["partition"], original["offset"]) == (0, 4)
    assert dead.value == b'{"poison": 1}' + b" " * 200  # the record's own bytes


@pytest.mark.parametrize(("name", "cause"), [("crc-mismatch", b"CRC mismatch"),
                                             ("corrupt-lz4", b"DecompressionError")])
def test_a_batch_that_does_not_decode_is_dead_lettered_whole_and_the_partition_flows(
        run: dict[str, Case], name: str, cause: bytes) -> None:
    case = run[name]
    assert _bodies(case) == list(range(103))  # before it and after it
    (dead,) = case.dead
    headers = dict(dead.headers)
    assert headers["xrgw-reason"] == b"undecodable"
    assert b"record batch at offsets 3-5" in headers["xrgw-detail"]
    assert cause in headers["xrgw-detail"]
    original = json.loads(headers["xrgw-record"])
    assert (original["topic"], original["partition"], original["offset"]) == (
        f"ix-{name}-{original['topic'].rsplit('-', 1)[1]}", 0, 3)
    # the record batch as fetched: its framing (base offset, length) and all its bytes
    assert struct.unpack_from(">qi", dead.value) == (3, len(dead.value) - 12)


def test_undecodable_records_are_logged_once_per_partition_and_counted(
        run: dict[str, Case]) -> None:
    warnings = [r.getMessage() for r in RESULT["logs"] if r.levelno >= logging.WARNING]
    for name in WIRE:
        said = [m for m in warnings if f"ix-{name}-" in m and "cannot be decoded" in m]
        assert len(said) == 1, warnings
    assert not [r for r in RESULT["logs"] if r.exc_info], "a traceback was logged"
    # a restart would not dead-letter them again: the commits are past them
    assert RESULT["committed"] == dict.fromkeys(WIRE, 106)
    assert re.search(r'xrgw_messages_deadlettered_total\{[^}]*reason="undecodable"[^}]*\} 3',
                     RESULT["metrics"]), RESULT["metrics"]
