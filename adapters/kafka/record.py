"""Kafka record <-> native message record, both directions, no I/O.

Received record fields: `topic`, `partition`, `offset`, `timestamp` (ms since the epoch,
as the broker reports it), `key` (valid UTF-8) or `key_base64` (other bytes; absent when
the record has no key) and `headers` (a list of {name, value}, names may repeat, only
present when the record has headers).

Header values are bytes in Kafka but strings in the record: valid UTF-8 is kept as text,
other bytes become base64 text (documented lossy spot: a consumer cannot tell the two
apart; the producer always encodes header values as UTF-8). A header without a value
(null) becomes "".

Body rule (receive), the same as the MQTT adapter's, with the `content-type` header
(case-insensitive name) as the content type:
* null or empty value -> no body;
* JSON-family content type (`application/json`, `text/json`, `*/*+json`) -> `data` when
  the value parses, otherwise the raw bytes;
* another content type -> raw bytes (a declared non-JSON type is never reinterpreted);
* no content type -> `data` only when the value parses as a JSON object or array; bare
  scalars (`21.5`, `true`) stay bytes, since guessing would change the type a
  definition's schema sees.

Send: a record without a body becomes a null value (a tombstone on compacted topics); a
record with JSON data and no `content-type` header gets `content-type: application/json`
so that a consumer (ours included) reads the body back as JSON.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from typing import NamedTuple, Protocol

from gateway.cloudevents.bindings.kafka import is_marker, mode_of
from gateway.json import knowntypes
from gateway.json.values import JSON
from gateway.protocols import KAFKA
from gateway.record import EventMode, NativeMessage, PairsRecord, byte_text
from gateway.record import is_json_media_type as is_json_type

__all__ = ["KafkaRecordLike", "SendArgs", "is_json_type", "to_record", "to_send"]

CONTENT_TYPE = "content-type"
_CONTENT_TYPE_SIZE = len(CONTENT_TYPE)
TRACEPARENT = "traceparent"
_TRACEPARENT_SIZE = len(TRACEPARENT)


class KafkaRecordLike(Protocol):
    """The attributes of aiokafka's ConsumerRecord that the conversion reads."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def timestamp(self) -> int: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...
    @property
    def headers(self) -> Sequence[tuple[str, bytes | None]]: ...


def to_record(message: KafkaRecordLike, received_at: str | None = None,
              parse: bool = True) -> NativeMessage:
    """The record of one consumed Kafka record; total (never raises on odd input).
    Runs once per consumed record: attributes are read once each. `parse=False`: its
    body is parsed when first read (`NativeMessage.from_wire`)."""
    fields: dict[str, JSON] = {
        "topic": message.topic,
        "partition": message.partition,
        "offset": message.offset,
    }
    timestamp = message.timestamp
    if timestamp is not None and timestamp >= 0:
        fields["timestamp"] = timestamp
    key = message.key
    if key is not None:
        try:
            fields["key"] = key.decode("utf-8")
        except UnicodeDecodeError:
            fields["key_base64"] = base64.b64encode(key).decode("ascii")
    content_type: str | None = None
    structured: EventMode = None  # the content type's own mode (`mode_of` without a marker)
    traceparent: str | None = None
    specversion = False
    raw_headers = message.headers
    if raw_headers:
        # Only the names are read here, and the values of the two headers the route needs
        # at once: the `headers` field is made when someone reads it (`PairsRecord`).
        for name, value in raw_headers:
            # Length first: most names are not it, and are not lower-cased then.
            if (content_type is None and len(name) == _CONTENT_TYPE_SIZE
                    and name.lower() == CONTENT_TYPE):
                facts = _TYPE_FACTS.get(value) if value is not None else None
                if facts is None:
                    facts = _type_facts(value)
                content_type, structured = facts
            elif not specversion and is_marker(name):  # as the binding reads it
                specversion = True
            elif (traceparent is None and len(name) == _TRACEPARENT_SIZE
                  and name.lower() == TRACEPARENT):
                traceparent = byte_text(value)
    # Whether it carries a CloudEvent, its content type and trace parent, seen here once
    # rather than by a second pass over the headers for every record
    # (`NativeMessage.event_mode`, `header_facts`). `mode_of(content_type, specversion)`
    # is the content type's own mode, else the marker's.
    return PairsRecord.received(KAFKA, fields, message.value or b"", content_type,
                                received_at, parse, raw_headers,
                                structured or ("binary" if specversion else None),
                                traceparent)


#: Of each content-type header value seen (a sender's few types): its text, decoded
#: once, and the mode it says by itself (`mode_of(text, False)`: structured or None).
_TYPE_FACTS: dict[bytes, tuple[str, EventMode]] = {}


def _type_facts(value: bytes | None) -> tuple[str, EventMode]:
    """`byte_text(value)` and its mode, remembered (`knowntypes.keep`: bounded)."""
    text = byte_text(value)
    facts = (text, mode_of(text, False))
    if value is not None:
        knowntypes.keep(_TYPE_FACTS, value, facts)
    return facts


class SendArgs(NamedTuple):
    """What `AIOKafkaProducer.send` needs for one record. A NamedTuple: built once per
    sent record, and a frozen dataclass costs several times as much to build."""

    topic: str
    value: bytes | None
    key: bytes | None
    partition: int | None
    timestamp_ms: int | None
    headers: list[tuple[str, bytes]]


def _int(value: JSON) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def to_send(record: NativeMessage, default_topic: str | None = None,
            default_headers: tuple[tuple[str, bytes], ...] = ()) -> SendArgs:
    """Send arguments for a record; raises ValueError when it cannot be sent.
    `default_headers` (the endpoint's `headers`) are added unless the record has a header
    of the same name (compared case-insensitively)."""
    fields = record.wire_fields()  # read directly: this runs once per sent record
    topic = fields.get("topic")
    if topic is None:
        topic = default_topic
    if not isinstance(topic, str) or not topic:
        raise ValueError("record has no topic (and the producer has no `topic` option)")
    key: bytes | None = None
    raw_key, raw_key64 = fields.get("key"), fields.get("key_base64")
    if isinstance(raw_key, str):
        key = raw_key.encode()
    elif isinstance(raw_key64, str):
        try:
            key = base64.b64decode(raw_key64, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ValueError(f"key_base64 is not valid base64: {exc}") from exc
    partition = _int(fields.get("partition"))
    if partition is not None and partition < 0:
        raise ValueError(f"invalid partition {partition}")
    pairs = record.header_pairs()
    # A copy either way: a content type and the endpoint's headers may be added below.
    headers = (list(pairs.utf8) if pairs.utf8 is not None
               else [(name, value.encode()) for name, value in pairs.text])
    if not pairs.typed and record.has_json_data:
        headers.append((CONTENT_TYPE, b"application/json"))
    if default_headers:
        own = {name.lower() for name, _ in headers}
        headers += [(n, v) for n, v in default_headers if n.lower() not in own]
    value = record.body_bytes() if record.has_body else None
    return SendArgs(topic, value, key, partition, _int(fields.get("timestamp")), headers)
