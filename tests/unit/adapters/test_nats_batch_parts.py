"""The NATS adapter's batch machinery without a server: the record fast paths, the
publish loop, and how a JetStream batch collects its PubAcks."""

from __future__ import annotations

import asyncio
from typing import Any

import nats.errors
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nats.aio.msg import Msg

from adapters.nats import record as nats_record
from adapters.nats.publish import Batch, PubAcks, _pub_ack_outcome, publish_all
from adapters.nats.record import (
    HeaderPairs,
    PublishArgs,
    _cached_pairs,
    _pairs_of,
    jetstream_ack,
    parse_header_block,
    publish_frame,
    to_publish,
    to_record,
    written_frame,
)
from gateway.cloudevents.bindings import nats as nats_binding
from gateway.cloudevents.event import CloudEvent
from gateway.ports import Outcome
from gateway.record import NativeMessage
from tests.unit.cloudevents.ce_strategies import usual_events, valid_events

# ====================================================================== record


def test_jetstream_position_of_both_ack_subject_forms() -> None:
    v1 = "$JS.ACK.ORDERS.d1.1.42.7.1732190000000000000.3"
    v2 = "$JS.ACK.hub.ACCHASH.ORDERS.d1.1.42.7.1732190000000000000.3.r4nd"
    assert jetstream_ack(v1) == jetstream_ack(v2) == ("ORDERS", 42, 7)
    # The same as nats-py's own (slower) reading.
    for reply in (v1, v2):
        meta = Msg.Metadata._from_reply(reply)
        assert jetstream_ack(reply) == (meta.stream, meta.sequence.stream,
                                        meta.sequence.consumer)


def test_jetstream_position_of_other_subjects_is_none() -> None:
    for reply in (None, "", "_INBOX.x.y", "$JS.ACK.ORDERS.d1.1.42", "$JS.ACK.S.d.1.x.7.1.3",
                  "$JS.NAK.ORDERS.d1.1.42.7.1732190000000000000.3",
                  "$JS.ACK.S.d.1.\u00b2.7.1.3"):  # a digit int() does not read
        assert jetstream_ack(reply) is None, reply


def test_jetstream_record_without_a_position_keeps_the_message() -> None:
    msg = Msg(None, subject="a.b", reply="not-an-ack-subject", data=b'{"x":1}')  # type: ignore[arg-type]
    record = to_record(msg, jetstream=True)
    assert record.data == {"x": 1}
    assert "stream" not in record.fields and "sequence" not in record.fields


def test_parsed_header_blocks_are_not_shared() -> None:
    raw = b"Content-Type: application/json\r\ntrace: a\r\ntrace: b\r\n\r\n"
    first = parse_header_block(raw)
    first.pairs.append(("extra", "1"))
    first["extra"] = "1"
    second = parse_header_block(raw)  # from the cache: must not see the change
    assert isinstance(second, HeaderPairs)
    assert second.pairs == [("Content-Type", "application/json"), ("trace", "a"),
                            ("trace", "b")]
    assert "extra" not in second


def test_large_header_blocks_are_parsed_but_not_kept() -> None:
    raw = b"big: " + b"x" * 4000 + b"\r\n\r\n"
    before = _cached_pairs.cache_info().currsize
    assert parse_header_block(raw).pairs == [("big", "x" * 4000)]
    assert _cached_pairs.cache_info().currsize == before


# ====================================================================== publish loop


class _Client:
    """Records the frames a batch queues; raises `error` instead when given one."""

    max_payload = 16

    def __init__(self, error: Exception | None = None) -> None:
        self.frames: list[bytes] = []
        self.sizes: list[int] = []
        self._error = error

    async def send_frames(self, frames: list[bytes], size: int) -> None:
        if self._error is not None:
            raise self._error
        self.frames.extend(frames)
        self.sizes.append(size)


def _records(count: int) -> list[NativeMessage]:
    return [NativeMessage("NATS", {"subject": f"s.{n}"}, payload=b"%d" % n)
            for n in range(count)]


def test_a_link_failure_fails_the_whole_batch_unsent() -> None:
    client = _Client(error=nats.errors.ConnectionClosedError())
    outcomes = asyncio.run(publish_all(client, _records(5), lambda _: ""))  # type: ignore[arg-type]
    failed = outcomes[0]
    assert failed is not None and failed.retryable
    assert outcomes == [failed] * 5
    assert client.frames == []  # nothing queued: no message goes out ahead of a retry


def test_a_message_failure_does_not_stop_the_batch() -> None:
    client = _Client()
    records = [*_records(3)]
    records.insert(1, NativeMessage("NATS", {"subject": "big"}, payload=b"x" * 17))
    records.insert(2, NativeMessage("NATS", {}, payload=b"no subject"))
    records.insert(3, NativeMessage("NATS", {"subject": "bad", "headers": [
        {"name": "bad name", "value": "v"}]}, payload=b"bad header"))
    outcomes = asyncio.run(publish_all(client, records, lambda i: f"r.{i}"))  # type: ignore[arg-type]
    assert [o is None for o in outcomes] == [True, False, False, False, True, True]
    assert all(o is not None and not o.retryable for o in outcomes[1:4])
    assert client.frames == [b"PUB s.0 r.0 1\r\n0\r\n", b"PUB s.1 r.4 1\r\n1\r\n",
                             b"PUB s.2 r.5 1\r\n2\r\n"]
    assert client.sizes == [3]  # payload bytes, as nats-py counts its pending buffer


# What nats-py's own `publish` writes, to hold `publish_frame` to it.
NAMES = st.sampled_from(["a", "Content-Type", "ce-id", " x ", "", "bad name", "k:v", "é",
                         "ce_time", "X-1"])
TEXTS = st.text(st.sampled_from("ab \r\n\t:é\u00ff"), max_size=6)
SUBJECTS = st.sampled_from(["s", "a.b.c", "", "a b", "a\r\nPUB x 1", "é.x", "a\tb",
                            "\ud800"])


def _nats_py_frame(subject: str, reply: str, payload: bytes,
                   headers: HeaderPairs | None) -> bytes | str:
    from nats.aio import client as nats_client

    try:
        nats_client._validate_subject(subject)
        if reply:
            nats_client._validate_subject(reply)
    except nats.errors.Error:
        return "refused"
    client = nats_client.Client()
    queued: list[bytes] = []

    async def capture(cmd: bytes, priority: bool = False) -> None:
        queued.append(cmd)

    client._send_command = capture  # type: ignore[method-assign]
    try:
        asyncio.run(client._send_publish(subject, reply, payload, len(payload), headers))
    except (nats.errors.Error, UnicodeEncodeError):
        return "refused"
    [frame] = queued
    return frame


@settings(max_examples=300, deadline=None)
@given(SUBJECTS, st.sampled_from(["", "r.1", "a b"]), st.binary(max_size=8),
       st.one_of(st.none(), st.lists(st.tuples(NAMES, TEXTS), max_size=4)))
def test_publish_frame_is_what_nats_py_queues(subject: str, reply: str, payload: bytes,
                                             pairs: list[tuple[str, str]] | None) -> None:
    headers = None if pairs is None else HeaderPairs(pairs)
    expected = _nats_py_frame(subject, reply, payload, headers)
    try:
        got: bytes | str = publish_frame(PublishArgs(subject, reply, payload, pairs))
    except ValueError:
        got = "refused"
    assert got == expected


def test_the_subjects_remembered_are_valid_ones_and_bounded(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A subject found valid is remembered as its bytes (the same frame the second time);
    one refused never is, and past the bound new subjects are checked every time."""
    table: dict[str, bytes] = {}
    monkeypatch.setattr(nats_record, "_SUBJECT_BYTES", table)
    monkeypatch.setattr(nats_record, "_SUBJECT_BYTES_MAX", 2)
    first = publish_frame(PublishArgs("orders.1", "", b"{}", None))
    assert publish_frame(PublishArgs("orders.1", "", b"{}", None)) == first
    assert table == {"orders.1": b"orders.1"}
    for bad in ("a b", "a\tb", ""):
        with pytest.raises(ValueError, match="invalid NATS subject"):
            publish_frame(PublishArgs(bad, "", b"{}", None))
    publish_frame(PublishArgs("orders.2", "_INBOX.x", b"{}", None))  # replies: not kept
    publish_frame(PublishArgs("orders.3", "", b"{}", None))
    assert table == {"orders.1": b"orders.1", "orders.2": b"orders.2"}
    with pytest.raises(ValueError, match="invalid NATS reply subject"):
        publish_frame(PublishArgs("orders.1", "r 1", b"{}", None))


@settings(max_examples=300, deadline=None)
@given(valid_events() | usual_events(), st.sampled_from(["", "r.1"]))
def test_a_binary_events_frame_is_what_nats_py_queues(event: CloudEvent, reply: str) -> None:
    """The header block the binding wrote with the record (`EncodedHeaders.lines`, with
    the producer's content type added) is the one nats-py writes for its pairs."""
    encoded = nats_binding.encode(event, "binary")
    record = encoded.replace_fields({**encoded.fields, "subject": "ce.out"})
    args = to_publish(record)
    assert args.pairs is not None
    expected = _nats_py_frame("ce.out", reply, args.payload, HeaderPairs(args.pairs))
    assert publish_frame(args, reply) == expected
    if encoded.header_pairs().lines is not None:
        assert args.block is not None


@settings(max_examples=300, deadline=None)
@given(valid_events() | usual_events(), st.sampled_from(["ce.out", "ce out", "ce.ü", ""]),
       st.sampled_from(["", "r.1", "r 1", "r.\udc80"]), st.booleans())
def test_a_written_frame_is_the_frame_of_its_publish_arguments(
        event: CloudEvent, subject: str, reply: str, own_reply: bool) -> None:
    """`written_frame` (the producer's way for the usual record) gives what
    `publish_frame(to_publish(record))` gives, or leaves the record to them: never
    another frame, and never one they would refuse."""
    encoded = nats_binding.encode(event, "binary")
    fields = {**encoded.fields, "subject": subject}
    if own_reply:
        fields["reply-to"] = "own.1"
    record = encoded.replace_fields(fields)
    for _ in range(2):  # the subject unknown, then perhaps kept as found valid
        written = written_frame(record, reply)
        try:
            args = to_publish(record)
            expected: tuple[bytes, int] | str = (publish_frame(args, reply), len(args.payload))
        except ValueError:
            expected = "refused"
        assert written is None or written == expected
    if subject == "ce.out" and not own_reply and reply in ("", "r.1") and \
            encoded.header_pairs().lines is not None:
        assert written is not None  # the usual record takes the short way


def test_the_usual_event_goes_out_with_the_block_its_binding_wrote() -> None:
    event = CloudEvent.trusted({"specversion": "1.0", "id": "1", "source": "/s", "type": "t",
                                "datacontenttype": "application/json"}, {"a": 1}, True,
                               b'{"a":1}')
    record = nats_binding.encode(event, "binary")
    args = to_publish(record.replace_fields({**record.fields, "subject": "ce"}))
    assert args.block == (b"NATS/1.0\r\nce-specversion: 1.0\r\nce-id: 1\r\nce-source: /s\r\n"
                          b"ce-type: t\r\nce-datacontenttype: application/json\r\n"
                          b"Content-Type: application/json\r\n\r\n")
    assert publish_frame(args) == _nats_py_frame("ce", "", b'{"a":1}', HeaderPairs(args.pairs))


@pytest.mark.parametrize(("content_type", "line"), [("application/json", True),
                                                    ("application/vnd.x+json", True),
                                                    ("text/plain", False)])
def test_a_body_declared_json_is_said_to_be_json_parsed_or_not(content_type: str,
                                                                line: bool) -> None:
    """`Content-Type: application/json` goes with a body its event declares JSON, even
    one that does not parse (the sender's word, as a receiver takes it): the producer
    need not parse a body to say so (`_says_json`)."""
    event = CloudEvent.trusted({"specversion": "1.0", "id": "1", "source": "/s", "type": "t",
                                "datacontenttype": content_type}, b"{not json", True, None)
    record = nats_binding.encode(event, "binary")
    args = to_publish(record.replace_fields({**record.fields, "subject": "ce"}))
    said = b"Content-Type: application/json\r\n" in publish_frame(args)
    assert said is line


# ====================================================================== PubAcks


def _reply(subject: str, data: bytes, headers: dict[str, str] | None = None) -> Msg:
    return Msg(None, subject=subject, data=data, headers=headers)  # type: ignore[arg-type]


def test_pub_ack_outcomes() -> None:
    assert _pub_ack_outcome(_reply("r", b'{"stream":"S","seq":3}')) == Outcome.ok()
    no_stream = _pub_ack_outcome(_reply("r", b"", {"Status": "503"}))
    assert no_stream == Outcome.failed("no JetStream stream answered for the subject")
    refused = _pub_ack_outcome(_reply("r", b'{"error":{"code":400,"err_code":10071,'
                                           b'"description":"wrong last sequence: 1"}}'))
    assert not refused.retryable and "wrong last sequence: 1" in (refused.reason or "")
    full = _pub_ack_outcome(_reply("r", b'{"error":{"code":503,"description":"full"}}'))
    assert not full.delivered and full.retryable
    garbage = _pub_ack_outcome(_reply("r", b"\xff{"))
    assert not garbage.delivered and garbage.retryable


def test_batch_collects_its_pub_acks_in_any_order() -> None:
    async def run() -> None:
        acks = PubAcks("_INBOX.t.")
        batch = Batch(acks, 3, asyncio.get_running_loop().time() + 5)
        replies = [batch.expect(i) for i in range(3)]
        assert len(set(replies)) == 3 and acks.waiting == 3
        confirmation = asyncio.create_task(batch.confirmed())
        await acks._on_reply(_reply(replies[2], b'{"error":{"code":400,"description":"no"}}'))
        await acks._on_reply(_reply(replies[0], b'{"stream":"S","seq":1}'))
        await asyncio.sleep(0.01)
        assert not confirmation.done()  # one still missing
        await acks._on_reply(_reply(replies[1], b'{"stream":"S","seq":2}'))
        ok, ok_too, refused = await asyncio.wait_for(confirmation, 1)
        assert ok.delivered and ok_too.delivered and not refused.delivered
        assert acks.waiting == 0

    asyncio.run(run())


def test_batch_deadline_fails_the_unanswered_and_forgets_them() -> None:
    async def run() -> None:
        acks = PubAcks("_INBOX.t.")
        batch = Batch(acks, 2, asyncio.get_running_loop().time() + 0.2)
        first, second = batch.expect(0), batch.expect(1)
        await acks._on_reply(_reply(first, b'{"stream":"S","seq":1}'))
        outcomes = await asyncio.wait_for(batch.confirmed(), 2)
        assert outcomes == [Outcome.ok(), Outcome.failed("no PubAck in time")]
        assert acks.waiting == 0
        await acks._on_reply(_reply(second, b'{"stream":"S","seq":2}'))  # late: ignored

    asyncio.run(run())


def test_unsent_messages_wait_for_nothing() -> None:
    async def run() -> None:
        acks = PubAcks("_INBOX.t.")
        batch = Batch(acks, 2, asyncio.get_running_loop().time() + 5)
        reply = batch.expect(0)
        batch.expect(1)
        batch.unsent(1, Outcome.failed("refused", retryable=False))
        await acks._on_reply(_reply(reply, b'{"stream":"S","seq":1}'))
        outcomes = await asyncio.wait_for(batch.confirmed(), 1)
        assert outcomes == [Outcome.ok(), Outcome.failed("refused", retryable=False)]
        assert acks.waiting == 0

    asyncio.run(run())


def test_abandon_fails_every_waiting_batch_at_once() -> None:
    async def run() -> None:
        acks = PubAcks("_INBOX.t.")
        deadline = asyncio.get_running_loop().time() + 30
        one, two = Batch(acks, 2, deadline), Batch(acks, 1, deadline)
        for batch, size in ((one, 2), (two, 1)):
            for index in range(size):
                batch.expect(index)
        acks.abandon("producer closed")
        gone = Outcome.failed("producer closed")
        assert await asyncio.wait_for(one.confirmed(), 1) == [gone, gone]
        assert await asyncio.wait_for(two.confirmed(), 1) == [gone]
        assert acks.waiting == 0

    asyncio.run(run())


def test_room_waits_while_too_many_are_waiting(monkeypatch: Any) -> None:
    monkeypatch.setattr("adapters.nats.publish._MAX_UNACKED", 2)

    async def run() -> None:
        acks = PubAcks("_INBOX.t.")
        batch = Batch(acks, 2, asyncio.get_running_loop().time() + 5)
        first = batch.expect(0)
        batch.expect(1)
        assert not await acks.room(0.05)  # full: gives up after the timeout
        waiter = asyncio.create_task(acks.room(5))
        await asyncio.sleep(0.01)
        assert not waiter.done()
        await acks._on_reply(_reply(first, b'{"stream":"S","seq":1}'))
        assert await asyncio.wait_for(waiter, 1)

    asyncio.run(run())


def test_header_block_parsing_is_as_lenient_as_nats_py() -> None:
    """Same names and values as nats-py's own parser (ours also keeps repeats)."""
    from nats.aio.client import Client as NatsClient

    for raw in (b"Name : v\r\nA: b\r\n", b" Lead: x\r\nbad name: y\r\n\xff: z\r\nok:1\r\n",
                b"no colon\r\nK: \r\n"):
        ours = dict(_pairs_of(raw))
        assert ours == dict(NatsClient._parse_header_lines(raw)), raw
