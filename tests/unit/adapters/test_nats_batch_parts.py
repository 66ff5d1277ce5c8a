"""The NATS adapter's batch machinery without a server: the record fast paths, the
publish loop, and how a JetStream batch collects its PubAcks."""

from __future__ import annotations

import asyncio
from typing import Any

import nats.errors
from nats.aio.msg import Msg

from adapters._nats_record import (
    HeaderPairs,
    _cached_pairs,
    jetstream_position,
    parse_header_block,
    to_record,
)
from adapters.nats import _Batch, _pub_ack_outcome, _PubAcks, _publish_all
from gateway.ports import Outcome
from gateway.record import NativeMessage

# ====================================================================== record


def test_jetstream_position_of_both_ack_subject_forms() -> None:
    v1 = "$JS.ACK.ORDERS.d1.1.42.7.1732190000000000000.3"
    v2 = "$JS.ACK.hub.ACCHASH.ORDERS.d1.1.42.7.1732190000000000000.3.r4nd"
    assert jetstream_position(v1) == ("ORDERS", 42)
    assert jetstream_position(v2) == ("ORDERS", 42)
    # The same as nats-py's own (slower) reading.
    for reply in (v1, v2):
        meta = Msg.Metadata._from_reply(reply)
        assert jetstream_position(reply) == (meta.stream, meta.sequence.stream)


def test_jetstream_position_of_other_subjects_is_none() -> None:
    for reply in (None, "", "_INBOX.x.y", "$JS.ACK.ORDERS.d1.1.42", "$JS.ACK.S.d.1.x.7.1.3",
                  "$JS.NAK.ORDERS.d1.1.42.7.1732190000000000000.3",
                  "$JS.ACK.S.d.1.\u00b2.7.1.3"):  # a digit int() does not read
        assert jetstream_position(reply) is None, reply


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
    """Records publishes; the `fail_at`-th raises `error`."""

    def __init__(self, fail_at: int = -1, error: Exception | None = None) -> None:
        self.published: list[tuple[str, bytes, str]] = []
        self._fail_at = fail_at
        self._error = error

    async def publish(self, subject: str, payload: bytes, reply: str,
                      headers: Any = None) -> None:
        if len(self.published) == self._fail_at:
            self.published.append(("<failed>", b"", ""))
            assert self._error is not None
            raise self._error
        self.published.append((subject, payload, reply))


def _records(count: int) -> list[NativeMessage]:
    return [NativeMessage("NATS", {"subject": f"s.{n}"}, payload=b"%d" % n)
            for n in range(count)]


def test_a_link_failure_fails_the_rest_of_the_batch_unsent() -> None:
    client = _Client(fail_at=2, error=nats.errors.ConnectionClosedError())
    outcomes = asyncio.run(_publish_all(client, _records(5), lambda _: ""))  # type: ignore[arg-type]
    assert outcomes[:2] == [None, None]
    failed = outcomes[2]
    assert failed is not None and failed.retryable
    assert outcomes[3:] == [failed, failed]
    assert len(client.published) == 3  # 3 and 4 never went out ahead of 2's retry


def test_a_message_failure_does_not_stop_the_batch() -> None:
    client = _Client(fail_at=1, error=nats.errors.MaxPayloadError())
    records = [*_records(3)]
    records.insert(2, NativeMessage("NATS", {}, payload=b"no subject"))
    outcomes = asyncio.run(_publish_all(client, records, lambda i: f"r.{i}"))  # type: ignore[arg-type]
    too_big, no_subject = outcomes[1], outcomes[2]
    assert outcomes[0] is None and outcomes[3] is None
    assert too_big is not None and not too_big.retryable
    assert no_subject is not None and not no_subject.retryable
    assert [p[2] for p in client.published] == ["r.0", "", "r.3"]  # reply subjects


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
        acks = _PubAcks("_INBOX.t.")
        batch = _Batch(acks, 3, asyncio.get_running_loop().time() + 5)
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
        acks = _PubAcks("_INBOX.t.")
        batch = _Batch(acks, 2, asyncio.get_running_loop().time() + 0.2)
        first, second = batch.expect(0), batch.expect(1)
        await acks._on_reply(_reply(first, b'{"stream":"S","seq":1}'))
        outcomes = await asyncio.wait_for(batch.confirmed(), 2)
        assert outcomes == [Outcome.ok(), Outcome.failed("no PubAck in time")]
        assert acks.waiting == 0
        await acks._on_reply(_reply(second, b'{"stream":"S","seq":2}'))  # late: ignored

    asyncio.run(run())


def test_unsent_messages_wait_for_nothing() -> None:
    async def run() -> None:
        acks = _PubAcks("_INBOX.t.")
        batch = _Batch(acks, 2, asyncio.get_running_loop().time() + 5)
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
        acks = _PubAcks("_INBOX.t.")
        deadline = asyncio.get_running_loop().time() + 30
        one, two = _Batch(acks, 2, deadline), _Batch(acks, 1, deadline)
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
    monkeypatch.setattr("adapters.nats._MAX_UNACKED", 2)

    async def run() -> None:
        acks = _PubAcks("_INBOX.t.")
        batch = _Batch(acks, 2, asyncio.get_running_loop().time() + 5)
        first = batch.expect(0)
        batch.expect(1)
        assert not await acks.room(0.05)  # full: gives up after the timeout
        waiter = asyncio.create_task(acks.room(5))
        await asyncio.sleep(0.01)
        assert not waiter.done()
        await acks._on_reply(_reply(first, b'{"stream":"S","seq":1}'))
        assert await asyncio.wait_for(waiter, 1)

    asyncio.run(run())
