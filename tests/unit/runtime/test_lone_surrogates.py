"""Lone surrogates (a JSON escape such as "\\ud800" parses into one; it has no UTF-8 form)
in identities, headers and metadata: the CLI and the daemon must treat them as data, never
crash or loop on them (issue 19: `xrgw match` ended in a UnicodeEncodeError traceback)."""

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from adapters.kafka.record import to_record, to_send
from adapters.memory import MemoryConsumer, MemoryProducer
from gateway.convert import Converter
from gateway.deadletter.format import deadletter_metadata, original_record
from gateway.definitions import load_catalog
from gateway.json.text import utf8_json
from gateway.observability.metrics import Metrics
from gateway.policies.retry import RetryPolicy
from gateway.ports import Outcome
from gateway.record import NativeMessage
from gateway.runtime.route import Output, Route

ROOT = Path(__file__).resolve().parents[3]
WEBHOOKS = ROOT / "config/examples/http-webhooks.xreg.json"
FAST = RetryPolicy(attempts=2, initial_backoff=0.001, max_backoff=0.002)


def _webhook(key: str, event: str = "opened", path: str = "/hooks/acme/issues") -> dict:
    return {"protocol": "HTTP", "method": "POST", "path": path,
            "headers": [{"name": "X-Event", "value": event},
                        {"name": "Idempotency-Key", "value": key}],
            "data": {"issue": 17}}


def test_match_cli_exits_cleanly_on_a_lone_surrogate_idempotency_key(tmp_path):
    records = tmp_path / "hostile.jsonl"
    # json.dumps writes the lone surrogates as the escapes "\ud800" a hostile sender would.
    records.write_text("\n".join(json.dumps(r) for r in (
        _webhook("\ud800"),
        _webhook("k", event="opened\udfff"),
        _webhook("k", path="/hooks/ac\ud800me/issues"),
    )) + "\n", encoding="ascii")
    run = subprocess.run(
        [sys.executable, "-m", "gateway.cli", "match", "-d", str(WEBHOOKS), "--", str(records)],
        cwd=ROOT, capture_output=True, timeout=120,
        env={"PYTHONIOENCODING": "utf-8", "PATH": "/usr/bin:/bin"})
    stderr = run.stderr.decode("utf-8", "replace")
    assert run.returncode == 0, stderr
    assert "Traceback" not in stderr
    lines = [json.loads(line) for line in run.stdout.decode("utf-8").splitlines()]
    assert len(lines) == 3
    # uuid5(uuid5(NAMESPACE_URL, "urn:xrgw:cloudevents:id"), "http:" + "\ud800"), the
    # surrogate hashed as its own code unit (ED A0 80): worked out with hashlib, not read
    # from gateway.envelope.ids.
    assert lines[0]["cloudevent"]["id"] == "901c0f47-b846-50ee-bfa4-f7d42e8abc4d"
    assert lines[1]["context"]["event"] == "opened\udfff"  # the value survives, escaped
    assert lines[2]["context"]["tenant"] == "ac\ud800me"


def test_utf8_json_escapes_only_when_it_must():
    assert utf8_json({"a": "é"}) == '{"a": "é"}'
    text = utf8_json({"a": "é\ud800"})
    text.encode("utf-8")  # does not raise
    assert json.loads(text) == {"a": "é\ud800"}


class _Consumed:
    """A consumed Kafka record (aiokafka's ConsumerRecord attributes) built from what the
    Kafka producer would send: the dead letter's real wire form."""

    def __init__(self, topic, value, key, headers, offset):
        self.topic, self.partition, self.offset, self.timestamp = topic, 0, offset, 0
        self.key, self.value, self.headers = key, value, headers


def _route(messages, dlq):
    consumer = MemoryConsumer(messages, close_when_empty=True)
    catalog = load_catalog([WEBHOOKS])
    route = Route("hooks", "hooks-http", consumer, Converter(catalog.messages()),
                  [Output("events", "KAFKA", MemoryProducer(), defaults={"topic": "events"})],
                  deadletter=Output("dlq", "KAFKA", dlq, defaults={"topic": "dead"}),
                  metrics=Metrics(), inflight=4, retry=FAST)
    return route, consumer


async def _run(route):
    await route.start()
    await asyncio.wait_for(route.wait_finished(), 10)
    await route.stop(grace=5)


def test_a_dead_letter_with_a_lone_surrogate_header_re_drives_once():
    # A GET is no webhook: unmatched, dead-lettered with its headers in the metadata.
    original = NativeMessage.from_json({**_webhook("\ud800", event="x\udfff"), "method": "GET"})
    dlq = MemoryProducer()
    route, consumer = _route([original], dlq)
    asyncio.run(_run(route))
    assert len(consumer.acked) == 1 and not consumer.nacked
    [dead] = dlq.written
    assert deadletter_metadata(dead)["xrgw-reason"] == "unmatched"
    # The Kafka producer can encode it (a UnicodeEncodeError here made the dead letter
    # fail and the message come back forever) ...
    sent = to_send(dead)
    wire = _Consumed(sent.topic, sent.value, sent.key, sent.headers, offset=7)
    # ... and a re-drive of what the dead-letter topic holds rebuilds the original,
    # surrogates included, which is dead-lettered exactly once more and acked.
    again = original_record(to_record(wire))
    assert again == original
    dlq2 = MemoryProducer()
    route2, consumer2 = _route([again], dlq2)
    asyncio.run(_run(route2))
    assert len(consumer2.acked) == 1 and not consumer2.nacked
    assert len(dlq2.written) == 1
    assert original_record(dlq2.written[0]) == original


class _KafkaEncoding(MemoryProducer):
    """Encodes each record as the Kafka producer does (`to_send`) and refuses what it
    cannot encode, as KafkaProducer._send_all does: the real data path, minus the broker."""

    async def _write(self, messages):
        outcomes = []
        for message in messages:
            try:
                to_send(message, "out")
            except ValueError as exc:
                outcomes.append(Outcome.failed(str(exc), retryable=False))
                continue
            self.written.append(message)
            outcomes.append(Outcome.ok())
        return outcomes


def test_a_cloudevent_rendered_from_a_lone_surrogate_is_dead_lettered_once():
    # X-Event feeds the CloudEvent type (com.example.hooks.issue.{event}): the rendered
    # event's ce_type header has no UTF-8 form.
    hostile = NativeMessage.from_json(_webhook("k", event="opened\ud800"))
    out, dlq = _KafkaEncoding(), _KafkaEncoding()
    consumer = MemoryConsumer([hostile], close_when_empty=True)
    route = Route("hooks", "hooks-http", consumer,
                  Converter(load_catalog([WEBHOOKS]).messages()),
                  [Output("events", "KAFKA", out, defaults={"topic": "events"})],
                  deadletter=Output("dlq", "KAFKA", dlq, defaults={"topic": "dead"}),
                  metrics=Metrics(), inflight=4, retry=FAST)
    asyncio.run(_run(route))
    assert len(consumer.acked) == 1 and not consumer.nacked
    assert not out.written
    [dead] = dlq.written  # encoded fine: the dead letter escapes the surrogate
    meta = deadletter_metadata(dead)
    assert meta["xrgw-reason"] == "undeliverable" and "events:" in meta["xrgw-detail"]
    assert original_record(dead) is not None  # the event it gave up, re-drivable
