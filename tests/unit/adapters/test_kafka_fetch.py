"""Fetched Kafka record batches that do not decode (adapters/kafka/fetch.py): each bad
batch or record becomes one `Undecodable` at its offsets, every good record around it is
handed out as aiokafka would, and the fetch position ends past the whole answer.

The batches are built with aiokafka's own builder and then broken at the byte level (a
codec number Kafka does not define, compressed bytes that do not decompress, a CRC that
does not match, a header name that is not UTF-8), as a broker would hand them over."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import pytest
from aiokafka import codec  # type: ignore[import-untyped]
from aiokafka.consumer import fetcher  # type: ignore[import-untyped]
from aiokafka.record.default_records import (  # type: ignore[import-untyped]
    DefaultRecordBatchBuilder,
)
from aiokafka.record.util import calc_crc32c  # type: ignore[import-untyped]
from aiokafka.structs import TopicPartition  # type: ignore[import-untyped]

import adapters.kafka  # noqa: F401  # installs the tolerant decoder
from adapters.kafka.commits import Commits
from adapters.kafka.fetch import FramedRecords, TolerantPartitionRecords, Undecodable, install

TP = TopicPartition("t", 0)
ATTRIBUTES_AT, CRC_AT = 21, 17
#: A placeholder header name of the length of the bad one, replaced after building.
MARK, BAD_NAME = b"ZZMARK", b"\xff\xfeMARK"


def _batch(base: int, count: int, *, codec_id: int = 0, bad_header_at: int | None = None,
           producer: tuple[int, bool] | None = None, control: bool = False) -> bytearray:
    """A v2 record batch at offsets base..base+count-1 whose values are b"v<offset>";
    the record `bad_header_at` (an offset) gets a header name that is not UTF-8."""
    pid, transactional = producer or (-1, False)
    builder = DefaultRecordBatchBuilder(2, codec_id, int(transactional), pid,
                                        0 if producer else -1, 0 if producer else -1,
                                        1 << 20)
    for delta in range(count):
        offset = base + delta
        headers = [(MARK.decode(), b"x")] if offset == bad_header_at else [("h", b"\x00\xff")]
        if control:  # an abort marker: key (version, type 0 = abort), value (version, epoch)
            builder.append(delta, 0, struct.pack(">hh", 0, 0), struct.pack(">hi", 0, 0), [])
            continue
        builder.append(delta, 1_700_000_000_000 + delta, f"k{offset}".encode(),
                       f"v{offset}".encode(), headers)
    raw = builder.build()
    raw[0:8] = struct.pack(">q", base)
    if bad_header_at is not None:
        assert codec_id == 0
        at = raw.index(MARK)
        raw[at:at + len(MARK)] = BAD_NAME
        _fix_crc(raw)
    if control:
        raw[ATTRIBUTES_AT:ATTRIBUTES_AT + 2] = struct.pack(
            ">h", struct.unpack_from(">h", raw, ATTRIBUTES_AT)[0] | 0x20)
        _fix_crc(raw)
    return raw


def _fix_crc(raw: bytearray) -> None:
    raw[CRC_AT:CRC_AT + 4] = struct.pack(">I", calc_crc32c(bytes(raw[ATTRIBUTES_AT:])))


def _with_codec_id(raw: bytearray, codec_id: int) -> bytearray:
    attributes = struct.unpack_from(">h", raw, ATTRIBUTES_AT)[0]
    raw[ATTRIBUTES_AT:ATTRIBUTES_AT + 2] = struct.pack(">h", (attributes & ~7) | codec_id)
    _fix_crc(raw)
    return raw


def _read(*batches: bytes, fetch_offset: int = 0, aborted: Any = None,
          isolation: int = fetcher.READ_COMMITTED) -> tuple[list[Any], int]:
    records = TolerantPartitionRecords(TP, FramedRecords(b"".join(batches)), aborted,
                                       fetch_offset, None, None, True, isolation)
    return list(records), records.next_fetch_offset


def _offsets(out: list[Any]) -> list[tuple[str, int, int]]:
    return [("bad", r.offset, r.last_offset) if isinstance(r, Undecodable)
            else ("ok", r.offset, r.offset) for r in out]


def test_the_fetcher_decodes_with_the_tolerant_classes() -> None:
    # aiokafka offers no hook: these module globals are what its fetcher builds from.
    assert fetcher.PartitionRecords is TolerantPartitionRecords
    assert fetcher.MemoryRecords is FramedRecords
    assert install()  # again: idempotent, and the installed aiokafka fits


def test_an_aiokafka_of_another_shape_is_said_not_silently_left_unguarded(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(fetcher, "PartitionRecords", type("Other", (), {}))
    with caplog.at_level("WARNING"):
        assert not install()
    assert "not the one xrgw was tested with" in caplog.text
    assert fetcher.PartitionRecords.__name__ == "Other"  # left alone


def test_every_codec_kafka_defines_is_readable() -> None:
    assert codec.has_gzip() and codec.has_snappy() and codec.has_lz4() and codec.has_zstd()
    for codec_id in range(5):
        out, end = _read(_batch(0, 3, codec_id=codec_id))
        assert [(r.offset, r.value, r.headers) for r in out] == [
            (i, f"v{i}".encode(), (("h", b"\x00\xff"),)) for i in range(3)], codec_id
        assert end == 3


def test_good_batches_decode_as_aiokafka_decodes_them() -> None:
    data = bytes(_batch(0, 2) + _batch(2, 3, codec_id=3))
    plain = fetcher.PartitionRecords.__mro__[1](
        TP, FramedRecords(data), None, 0, None, None, True, fetcher.READ_COMMITTED)
    ours, _ = _read(data)
    assert ours == list(plain)


@pytest.mark.parametrize("breakage", ["unknown codec", "corrupt lz4", "crc"])
def test_a_batch_that_does_not_decode_is_one_undecodable_between_good_batches(
        breakage: str) -> None:
    if breakage == "unknown codec":
        bad = _with_codec_id(_batch(3, 4), 5)
    elif breakage == "corrupt lz4":
        bad = _batch(3, 4, codec_id=3)
        bad[70:80] = b"\xff" * 10
        _fix_crc(bad)
    else:
        bad = _batch(3, 4)
        bad[-1] ^= 0xFF
    out, end = _read(_batch(0, 3), bad, _batch(7, 2))
    assert _offsets(out) == [("ok", 0, 0), ("ok", 1, 1), ("ok", 2, 2), ("bad", 3, 6),
                             ("ok", 7, 7), ("ok", 8, 8)]
    poison = out[3]
    assert poison.raw == bytes(bad)  # the batch as fetched
    assert "offsets 3-6" in poison.why
    assert end == 9


def test_a_record_with_a_header_name_not_utf8_is_the_only_one_lost_to_its_batch() -> None:
    out, end = _read(_batch(0, 6, bad_header_at=3), _batch(6, 1))
    assert _offsets(out) == [("ok", 0, 0), ("ok", 1, 1), ("ok", 2, 2), ("bad", 3, 3),
                             ("ok", 4, 4), ("ok", 5, 5), ("ok", 6, 6)]
    poison = out[3]
    assert poison.value == b"v3" and poison.key == b"k3"
    assert "header 1's name is not UTF-8" in poison.why
    assert poison.headers == ((BAD_NAME.decode("utf-8", "backslashreplace"), b"x"),)
    # the records decoded here again are what aiokafka makes of them
    assert (out[4].value, out[4].headers, out[4].timestamp) == (
        b"v4", (("h", b"\x00\xff"),), 1_700_000_000_004)
    assert end == 7


def test_a_fetch_that_starts_inside_a_batch_hands_out_nothing_before_it() -> None:
    out, end = _read(_batch(0, 6, bad_header_at=3), fetch_offset=2)
    assert _offsets(out) == [("ok", 2, 2), ("bad", 3, 3), ("ok", 4, 4), ("ok", 5, 5)]
    out, end = _read(_with_codec_id(_batch(0, 6), 6), fetch_offset=4)
    assert _offsets(out) == [("bad", 4, 5)] and end == 6


def test_aborted_transactions_never_become_records_under_read_committed() -> None:
    aborted = _batch(0, 2, producer=(7, True))
    marker = _batch(2, 1, producer=(7, True), control=True)
    committed = _batch(3, 2, producer=(8, True))
    out, end = _read(aborted, marker, committed, aborted=[(7, 0)])
    assert _offsets(out) == [("ok", 3, 3), ("ok", 4, 4)]
    assert end == 5
    out, _ = _read(aborted, marker, committed, aborted=[(7, 0)],
                   isolation=fetcher.READ_UNCOMMITTED)
    assert [r.offset for r in out] == [0, 1, 3, 4]


def test_an_undecodable_delivery_settles_all_its_offsets() -> None:
    out, _ = _read(_batch(0, 1), _with_codec_id(_batch(1, 4), 5), _batch(5, 1))
    committed: list[dict[Any, int]] = []

    class Client:
        async def commit(self, offsets: dict[Any, int]) -> None:
            committed.append(dict(offsets))

        def seek(self, tp: Any, offset: int) -> None:
            raise AssertionError("no rewind expected")

    async def scenario() -> list[Any]:
        commits = Commits()
        commits.client = Client()
        deliveries = commits.deliver({TP: out}, "2026-01-01T00:00:00Z")
        assert commits.first_unsettled(TP) == 0
        await deliveries[0].ack()
        await deliveries[1].ack()
        await commits.flush(5.0)
        assert commits.first_unsettled(TP) == 5
        return deliveries

    deliveries = asyncio.run(scenario())
    assert [d.undecodable is not None for d in deliveries] == [False, True, False]
    poison = deliveries[1].message
    assert (poison.fields["topic"], poison.fields["partition"], poison.fields["offset"]) == (
        "t", 0, 1)
    assert poison.body_bytes() == out[1].raw
    assert "offsets 1-4" in (deliveries[1].undecodable or "")
    assert committed[-1] == {TP: 5}  # past the four offsets of the bad batch
    # The dead letter says when it was received, as the good records around it do.
    assert [d.message.received_at for d in deliveries] == ["2026-01-01T00:00:00Z"] * 3


def test_a_batch_claiming_more_records_than_it_holds_loses_nothing_it_holds() -> None:
    raw = _batch(0, 6)
    raw[57:61] = struct.pack(">i", 7)  # the record count
    _fix_crc(raw)
    out, end = _read(raw, _batch(6, 1))
    assert _offsets(out) == [("ok", i, i) for i in range(7)]
    assert end == 7


def test_a_batch_whose_records_break_mid_way_is_undecodable_from_there() -> None:
    raw = _batch(0, 6)
    # record 3's length (5 bytes before its key: length, attributes, timestamp delta,
    # offset delta, key length) made negative (zigzag 0x7f = -64): its framing is gone
    raw[raw.index(b"k3") - 5] = 0x7F
    _fix_crc(raw)
    out, end = _read(raw, _batch(6, 1))
    assert _offsets(out) == [("ok", 0, 0), ("ok", 1, 1), ("ok", 2, 2), ("bad", 3, 5),
                             ("ok", 6, 6)]
    assert "record length -64" in out[3].why
    assert end == 7


def test_the_warning_is_said_once_per_interval_and_counts_the_rest(
        caplog: pytest.LogCaptureFixture) -> None:
    import logging

    from adapters.kafka.fetch import RateLimitedLog

    limited = RateLimitedLog(logging.getLogger("test.kafka.limited"), interval=3600)
    with caplog.at_level(logging.WARNING, "test.kafka.limited"):
        assert limited.warning("p0", "bad p0")
        assert not limited.warning("p0", "bad p0")
        assert not limited.warning("p0", "bad p0")
        assert limited.warning("p1", "bad p1")  # another partition says its own
        seen = limited._gate._seen  # the interval is over:
        seen["p0"] = (seen["p0"][0] - 3601, 2)
        assert limited.warning("p0", "bad p0")
    assert [r.getMessage() for r in caplog.records] == [
        "bad p0", "bad p1", "bad p0 (2 more since the last report)"]


def test_a_fetch_error_is_said_once_with_its_cause_and_is_not_connected(
        caplog: pytest.LogCaptureFixture) -> None:
    """Not a record's fault (those are undecodable deliveries): the broker refused the
    fetch. Every read says NotConnected (the route reconnects); the log says why, once."""
    import logging

    from aiokafka.errors import TopicAuthorizationFailedError  # type: ignore[import-untyped]

    from adapters.kafka import KafkaConsumer
    from adapters.kafka.consumer import _fetch_warnings
    from gateway.ports import EndpointSettings, NotConnected

    class Refusing:
        async def getmany(self, **_: Any) -> Any:
            raise TopicAuthorizationFailedError("orders")

        async def commit(self, offsets: dict[Any, int]) -> None: ...
        def seek(self, tp: Any, offset: int) -> None: ...
        async def stop(self) -> None: ...

    async def scenario() -> None:
        for _ in range(3):
            consumer = KafkaConsumer(EndpointSettings(
                "kafka://127.0.0.1:9092", options={"topics": ["orders"], "consumergroup": "g"}))
            consumer._client = Refusing()
            with pytest.raises(NotConnected, match="TopicAuthorizationFailedError"):
                await consumer.read_batch(10)
            assert not consumer.connected  # dropped: the next connect rejoins

    _fetch_warnings._gate._seen.clear()
    with caplog.at_level(logging.WARNING, "adapters.kafka"):
        asyncio.run(scenario())
    said = [r for r in caplog.records if "fetch from" in r.getMessage()]
    assert len(said) == 1
    assert said[0].error_kind == "TopicAuthorizationFailedError"  # type: ignore[attr-defined]


def test_a_trailing_undecodable_span_moves_the_next_offset_past_its_last_offset() -> None:
    good, _ = _read(_batch(0, 1))
    bad = Undecodable(TP, 1, 4, b"raw", "unknown codec")

    async def scenario() -> tuple[int | None, int | None]:
        commits = Commits()  # no client: nothing is committed, the offsets still move
        deliveries = commits.deliver({TP: [*good, bad]}, "2026-01-01T00:00:00Z")
        before = commits.first_unsettled(TP)
        for delivery in deliveries:
            await delivery.ack()
        return before, commits.first_unsettled(TP)

    # Everything settled: the next offset to read is the one after the span, not after
    # its first offset (which would fetch offsets 2-4 again).
    assert asyncio.run(scenario()) == (0, 5)


def test_an_undecodable_span_is_logged_once_with_its_offsets_and_why(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A topic of its own: the line is said once a minute per partition, in this process.
    one_tp, span_tp = TopicPartition("logged", 1), TopicPartition("logged", 2)
    one = Undecodable(one_tp, 7, 7, b"raw", "bad record")
    span = Undecodable(span_tp, 1, 4, b"raw", "unknown codec")
    caplog.set_level("WARNING", logger="adapters.kafka")
    Commits().deliver({one_tp: [one], span_tp: [span]}, "2026-01-01T00:00:00Z")
    lines = [(r.getMessage(), getattr(r, "reason", None), getattr(r, "error", None))
             for r in caplog.records if r.name == "adapters.kafka"]
    assert lines == [
        ("kafka: logged[1] offset 7 cannot be decoded; dead-lettered as undecodable, "
         "the partition goes on", "undecodable", "bad record"),
        ("kafka: logged[2] offsets 1-4 cannot be decoded; dead-lettered as undecodable, "
         "the partition goes on", "undecodable", "unknown codec"),
    ]
