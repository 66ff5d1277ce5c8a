"""Fetched Kafka records decoded so that one bad record or batch cannot stop a partition.

aiokafka decodes a fetched partition lazily, batch by batch, while `getmany()` hands the
records out (`PartitionRecords._unpack_records`). An error there -- a batch in a codec it
cannot read, a corrupt batch or one failing its CRC, a header name that is not UTF-8 --
escapes `getmany()`, loses the records of that answer (the good ones before the bad one
included) and comes back at the same offset on every later fetch: the partition stalls
for ever.

`TolerantPartitionRecords` decodes exactly as aiokafka does (the same checks, the same
`read_committed` filtering of aborted transactions, control batches skipped), with one
difference: what fails to decode becomes an `Undecodable` record in the stream, at its
offset, and decoding goes on after it.

- A batch that cannot be read as a whole (unknown or unavailable codec, corrupt
  compressed data, CRC mismatch, a header that makes no sense) is one `Undecodable`
  spanning its offsets; `raw` is the record batch as fetched.
- A batch whose records fail one by one (a header name that is not UTF-8, a record whose
  framing is broken) is decoded again here, record by record, in Python (only then: the
  good path stays aiokafka's C decoder): every record that decodes is handed out as
  usual, each one that does not becomes an `Undecodable` of its own offset whose `raw`
  is its value; when the records' framing itself is broken, the rest of the batch is one
  `Undecodable`.

`install()` puts these classes into aiokafka's fetcher (its module globals
`PartitionRecords` and `MemoryRecords`: aiokafka offers no other way in). `FramedRecords`
wraps aiokafka's C `MemoryRecords` only to find a failed batch's raw bytes again. The
unit tests check that the installed aiokafka still has the shape this relies on.

Cost on the good path: per batch one Python call and a counter; a try block around each
batch and one around its record loop (free in CPython 3.11 until something raises);
nothing per record.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterator
from typing import Any

from aiokafka import codec  # type: ignore[import-untyped]  # no py.typed
from aiokafka.consumer import fetcher  # type: ignore[import-untyped]
from aiokafka.errors import CorruptRecordException  # type: ignore[import-untyped]
from aiokafka.record.memory_records import MemoryRecords  # type: ignore[import-untyped]
from aiokafka.record.util import decode_varint  # type: ignore[import-untyped]
from aiokafka.structs import ConsumerRecord  # type: ignore[import-untyped]

from gateway.observability.logs import RATE_WINDOW, RateGate

__all__ = ["FramedRecords", "RateLimitedLog", "TolerantPartitionRecords", "Undecodable",
           "install"]

#: Batch framing: base offset (int64) and length (int32) before every batch.
_LOG_OVERHEAD = 12
#: A v2 batch header: offset 16 magic, 21 attributes, 23 last offset delta, 27 first and
#: 35 max timestamp, 57 record count; the records start at 61.
_V2 = struct.Struct(">qiibIhiqqqhii")
_LENGTH = struct.Struct(">i")
_MAGIC_AT = 16
_LAST_DELTA_AT = 23
#: Kafka's compression codecs by the attributes' low three bits.
_DECODERS = {1: codec.gzip_decode, 2: codec.snappy_decode, 3: codec.lz4_decode,
             4: codec.zstd_decode}
#: How far past the fetch position a corrupt batch's own offsets are believed.
_PLAUSIBLE_SPAN = 1 << 31


class Undecodable:
    """What could be had of offsets that do not decode: where they are, why, and the raw
    bytes (the batch as fetched, or the record's value). It has the attributes of a
    ConsumerRecord that the adapter reads, so it travels with the good records in
    offset order."""

    __slots__ = ("headers", "key", "last_offset", "offset", "partition", "raw", "timestamp",
                 "topic", "value", "why")

    def __init__(self, tp: Any, offset: int, last_offset: int, raw: bytes | None,
                 why: str, *, key: bytes | None = None, timestamp: int = -1,
                 headers: tuple[tuple[str, bytes | None], ...] = ()) -> None:
        self.topic: str = tp.topic
        self.partition: int = tp.partition
        self.offset = offset
        self.last_offset = last_offset  # the same as offset for one record
        self.raw = raw
        self.value = raw
        self.why = why
        self.key = key
        self.timestamp = timestamp
        self.headers = headers

    @property
    def span(self) -> int:
        """How many offsets it covers."""
        return self.last_offset - self.offset + 1

    def __repr__(self) -> str:
        return (f"<Undecodable {self.topic}[{self.partition}] {self.offset}-"
                f"{self.last_offset}: {self.why}>")


class FramedRecords:
    """aiokafka's MemoryRecords (a fetched partition's record batches, one after the
    other, read by its C reader) that can also give the raw bytes of the batch it handed
    out last (`last`): found again by walking the framing, only when a batch failed."""

    __slots__ = ("_data", "_next", "handed", "has_next", "size_in_bytes")

    def __init__(self, data: bytes) -> None:
        records = MemoryRecords(data)
        self._data = data
        self.handed = 0  # batches handed out
        # Bound methods of the C reader: the good path pays one Python call per batch.
        self.has_next = records.has_next
        self.size_in_bytes = records.size_in_bytes
        self._next = records.next_batch

    def next_batch(self) -> Any:
        self.handed += 1
        return self._next()

    @property
    def last(self) -> bytes:
        """The raw bytes of the batch handed out last (its framing included)."""
        data, pos = self._data, 0
        for index in range(self.handed):
            if len(data) - pos < _LOG_OVERHEAD:
                return b""
            end = pos + _LOG_OVERHEAD + _LENGTH.unpack_from(data, pos + 8)[0]
            if index == self.handed - 1:
                return bytes(data[pos:end])
            pos = end
        return b""


class TolerantPartitionRecords(fetcher.PartitionRecords):  # type: ignore[misc]
    """aiokafka's PartitionRecords, yielding `Undecodable` for what does not decode."""

    def _unpack_records(self) -> Iterator[Any]:
        # aiokafka's own loop (aiokafka/consumer/fetcher.py), each step guarded.
        tp = self._tp
        records = self._records
        while records.has_next():
            batch = None
            try:
                batch = records.next_batch()
                if self._check_crcs and not batch.validate_crc():
                    raise CorruptRecordException("CRC mismatch")
                if (self._isolation_level == fetcher.READ_COMMITTED
                        and batch.producer_id is not None):
                    self._consume_aborted_up_to(batch.base_offset)
                    if batch.is_control_batch and self._contains_abort_marker(batch):
                        self._aborted_producers.discard(batch.producer_id)
                    if (batch.is_transactional
                            and batch.producer_id in self._aborted_producers):
                        self.next_fetch_offset = batch.next_offset
                        continue
                if batch.is_control_batch:
                    self.next_fetch_offset = batch.next_offset
                    continue
            except Exception as exc:
                yield from self._whole(getattr(records, "last", b""), _cause(exc))
                if batch is None:
                    # The framing itself is broken (the reader cannot step over it):
                    # the rest of this answer is lost, the next fetch starts past it.
                    return
                continue
            try:
                for record in batch:
                    if record.offset < self.next_fetch_offset:
                        continue  # a compressed batch starts before the fetch position
                    consumer_record = self._consumer_record(tp, record)
                    self.next_fetch_offset = record.offset + 1
                    yield consumer_record
            except Exception as exc:
                yield from self._one_by_one(getattr(records, "last", b""), exc)
                continue
            self.next_fetch_offset = batch.next_offset

    def _whole(self, raw: bytes, why: str) -> Iterator[Undecodable]:
        """The batch `raw` (its offsets from the fetch position on) as one Undecodable;
        the fetch position moves past it."""
        first = self.next_fetch_offset
        last = first
        if len(raw) >= _LAST_DELTA_AT + 4 and raw[_MAGIC_AT] >= 2:
            base = int.from_bytes(raw[:8], "big", signed=True)
            delta = int.from_bytes(raw[_LAST_DELTA_AT:_LAST_DELTA_AT + 4], "big",
                                   signed=True)
            if delta >= 0 and base + delta < first:
                return  # all of it before the position: nothing of it is wanted
            # A corrupt header may say anything: only a span that starts at or before
            # the position and ends within reach of it is believed.
            if base <= first <= base + delta < first + _PLAUSIBLE_SPAN:
                last = base + delta
        self.next_fetch_offset = last + 1
        where = f"offset {first}" if last == first else f"offsets {first}-{last}"
        yield Undecodable(self._tp, first, last, raw or None,
                          f"record batch at {where} cannot be decoded: {why}")

    def _one_by_one(self, raw: bytes, exc: Exception) -> Iterator[Any]:
        """The batch `raw`, whose records failed in aiokafka's decoder after the fetch
        position, decoded here record by record."""
        try:
            header = _V2.unpack_from(raw)
        except struct.error:
            yield from self._whole(raw, _cause(exc))
            return
        base, attributes, last_delta = header[0], header[5], header[6]
        first_ts, max_ts, count = header[7], header[8], header[12]
        if header[3] < 2:  # a legacy batch: aiokafka's decoder is the only one here
            yield from self._whole(raw, _cause(exc))
            return
        try:
            buffer = _records_of(raw, attributes)
        except Exception as why:
            yield from self._whole(raw, _cause(why))
            return
        append_time = bool(attributes & 0x08)
        pos = 0
        for _ in range(count):
            try:
                length, start = decode_varint(buffer, pos)
                end = start + length
                if length < 0 or end > len(buffer):
                    raise CorruptRecordException(f"record length {length}")
            except Exception as why:
                # The records' framing is broken: nothing after this can be trusted.
                if self.next_fetch_offset <= base + last_delta:
                    yield from self._whole(raw, _cause(why))
                return
            record = _Record(buffer, start, end, base, first_ts, max_ts, append_time)
            pos = end
            if record.offset < self.next_fetch_offset:
                continue
            self.next_fetch_offset = record.offset + 1
            if record.why is None:
                yield ConsumerRecord(
                    self._tp.topic, self._tp.partition, record.offset, record.timestamp,
                    int(append_time), record.key, record.value, None,
                    -1 if record.key is None else len(record.key),
                    -1 if record.value is None else len(record.value), record.headers)
            else:
                yield Undecodable(
                    self._tp, record.offset, record.offset, record.value,
                    f"record at offset {record.offset} cannot be decoded: {record.why}",
                    key=record.key, timestamp=record.timestamp, headers=record.headers)
        self.next_fetch_offset = max(self.next_fetch_offset, base + last_delta + 1)


class _Record:
    """One v2 record read from `buffer[start:end]` (past its length), tolerantly: `why`
    says what is wrong with it, None when nothing is."""

    __slots__ = ("headers", "key", "offset", "timestamp", "value", "why")

    def __init__(self, buffer: bytes, start: int, end: int, base: int, first_ts: int,
                 max_ts: int, append_time: bool) -> None:
        self.offset = base
        self.timestamp = max_ts if append_time else first_ts
        self.key: bytes | None = None
        self.value: bytes | None = None
        self.headers: tuple[tuple[str, bytes | None], ...] = ()
        self.why: str | None = None
        try:
            self._read(buffer, start, end, base, first_ts, append_time)
        except Exception as exc:
            self.why = self.why or _cause(exc)

    def _read(self, buffer: bytes, pos: int, end: int, base: int, first_ts: int,
              append_time: bool) -> None:
        _, pos = decode_varint(buffer, pos)  # attributes: unused in v2
        ts_delta, pos = decode_varint(buffer, pos)
        if not append_time:
            self.timestamp = first_ts + ts_delta
        offset_delta, pos = decode_varint(buffer, pos)
        self.offset = base + offset_delta
        self.key, pos = _nullable(buffer, pos, end)
        self.value, pos = _nullable(buffer, pos, end)
        count, pos = decode_varint(buffer, pos)
        if count < 0:
            raise CorruptRecordException(f"{count} headers")
        headers: list[tuple[str, bytes | None]] = []
        for index in range(count):
            name, pos = _nullable(buffer, pos, end)
            value, pos = _nullable(buffer, pos, end)
            if name is None:
                raise CorruptRecordException(f"header {index + 1} has no name")
            try:
                text = name.decode("utf-8")
            except UnicodeDecodeError:
                # Kept for the dead letter, escaped; the reason names the header (not its
                # bytes: the reason is logged).
                text = name.decode("utf-8", "backslashreplace")
                self.why = self.why or f"header {index + 1}'s name is not UTF-8"
            headers.append((text, value))
        self.headers = tuple(headers)
        if pos != end:
            raise CorruptRecordException(f"record is {end - pos} bytes longer than its "
                                         "fields")
        if self.why is not None:
            raise CorruptRecordException(self.why)


def _nullable(buffer: bytes, pos: int, end: int) -> tuple[bytes | None, int]:
    length, pos = decode_varint(buffer, pos)
    if length < 0:
        return None, pos
    if pos + length > end:
        raise CorruptRecordException("a field runs past its record")
    return bytes(buffer[pos:pos + length]), pos + length


def _records_of(raw: bytes, attributes: int) -> bytes:
    """The records of a v2 batch, decompressed."""
    data = raw[_V2.size:]
    kind = attributes & 0x07
    if kind == 0:
        return data
    decoder = _DECODERS.get(kind)
    if decoder is None:
        raise CorruptRecordException(f"unknown compression codec {kind}")
    return bytes(decoder(data))


def _cause(exc: BaseException) -> str:
    """One line naming what failed (the type and aiokafka's words), without the bytes."""
    # aiokafka's errors print as "[Error 2] CorruptRecordException: ..."; their own
    # words are the first argument.
    first = exc.args[0] if exc.args and isinstance(exc.args[0], str) else str(exc)
    text = first.splitlines()[0] if first else ""
    if isinstance(exc, UnicodeDecodeError):
        text = f"{exc.reason} at byte {exc.start}"
    name = type(exc).__name__
    return f"{name}: {text}" if text else name


class RateLimitedLog:
    """A warning per key at most once per `interval` seconds; the ones held back are
    counted into the next. So a partition full of bad records, or a fetch error that
    comes back every second, says so once, with its cause, not a thousand times
    (the gate is the core's, `gateway.observability.logs.RateGate`)."""

    __slots__ = ("_gate", "_logger")

    def __init__(self, logger: logging.Logger, interval: float = RATE_WINDOW) -> None:
        self._logger = logger
        self._gate = RateGate(interval)

    def warning(self, key: object, message: str,
                extra: dict[str, object] | None = None) -> bool:
        """Log `message` (`extra`: `gateway.observability.logs.fields(...)`) unless `key`
        was logged within the interval; whether it was logged."""
        held = self._gate.admit(key)
        if held is None:
            return False
        if held:
            message += f" ({held} more since the last report)"
        self._logger.warning(message, extra=extra)
        return True


#: What of aiokafka's fetcher this module relies on (checked by `install`).
_RELIED_ON = ("_consume_aborted_up_to", "_contains_abort_marker", "_consumer_record",
              "_unpack_records")


def install(logger: logging.Logger | None = None) -> bool:
    """Make aiokafka's fetcher decode with these classes (idempotent); False, with a
    warning, when the installed aiokafka is not the shape this relies on (a newer one:
    the lock pins the one tested)."""
    base = TolerantPartitionRecords.__mro__[1]
    fits = (getattr(fetcher, "PartitionRecords", None) in (base, TolerantPartitionRecords)
            and hasattr(fetcher, "MemoryRecords")
            and all(hasattr(base, name) for name in _RELIED_ON))
    if not fits:
        (logger or logging.getLogger(__name__)).warning(
            "kafka: this aiokafka's fetcher is not the one xrgw was tested with; a record "
            "that does not decode will stop its partition instead of being dead-lettered")
        return False
    fetcher.PartitionRecords = TolerantPartitionRecords
    fetcher.MemoryRecords = FramedRecords
    return True
