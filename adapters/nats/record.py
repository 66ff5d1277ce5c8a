"""NATS message <-> native message record, both directions, no I/O.

Record fields: `subject`, `reply-to` (core messages with a reply subject), `headers`
(list of {name, value}; NATS headers may repeat), and for JetStream deliveries `stream`
and `sequence` (the stream sequence, stable across redeliveries: the gateway derives
deterministic CloudEvents ids from it). A JetStream delivery's reply subject is its ack
subject, not the publisher's reply-to, so it is not reported.

Body rule (receive), with the content type taken from a `Content-Type` header (name
matched case-insensitively):
* empty payload -> no body;
* a JSON-family content type (`application/json`, `text/json`, `*/*+json`) -> `data`
  when the payload parses; any other content type -> `payload` bytes;
* no content type -> `data` only when the payload parses as a JSON object or array
  (bare scalars stay bytes: guessing would change the type a schema sees).

Send: a record without a `Content-Type` header gets `Content-Type: application/json`
when its body is JSON data or is declared JSON by its own `ce-datacontenttype` (a binary
CloudEvent's), so that a receiver's body rule reads it back as JSON. The declaration is
read before the body: a body received declared JSON and sent on unparsed
(`envelope/wirewriter.py`) is not parsed for it.

Repeated headers. nats-py keeps headers in a plain dict (last value wins). `HeaderPairs`
is a dict that also remembers every (name, value) pair: `parse_header_block` builds one
on receive (the adapter's client subclass plugs it in), and on send nats-py writes the
header block from `headers.items()`, which `HeaderPairs` answers with all pairs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache
from operator import itemgetter
from typing import NamedTuple

from nats.aio.msg import Msg

from gateway.cloudevents.bindings.nats import WIRE, is_marker, mode_of
from gateway.json.values import JSON
from gateway.protocols import NATS
from gateway.record import EncodedHeaders, NativeMessage, PairsRecord
from gateway.record import is_json_media_type as is_json_type

__all__ = [
    "HeaderPairs",
    "JetStreamAck",
    "PublishArgs",
    "is_json_type",
    "jetstream_ack",
    "parse_header_block",
    "publish_frame",
    "to_publish",
    "to_record",
]


class HeaderPairs(dict[str, str]):
    """Headers as nats-py wants them (a dict) that keep repeated names and their order."""

    def __init__(self, pairs: Iterable[tuple[str, str]] = ()) -> None:
        self.pairs = list(pairs)
        super().__init__(self.pairs)

    def items(self) -> list[tuple[str, str]]:  # type: ignore[override]
        # nats-py serialises `headers.items()`; answering with the pairs sends repeats.
        return list(self.pairs)


def parse_header_block(raw: bytes) -> HeaderPairs:
    """`Name: Value` CRLF lines -> HeaderPairs; same leniency as nats-py's own parser
    (lines without a colon, non-ASCII or blank-containing names are skipped)."""
    if len(raw) > _CACHED_BLOCK_MAX:
        return HeaderPairs(_pairs_of(raw))
    return HeaderPairs(_cached_pairs(raw))


# Messages of one source mostly carry the same header block (a content type, a schema
# name): parsing it once instead of per message was a fifth of the receive cost. Bounded
# in entries and in block size, so blocks that differ per message (trace ids) only cost a
# miss and large ones are not kept.
_CACHED_BLOCK_MAX = 1024


@lru_cache(maxsize=256)
def _cached_pairs(raw: bytes) -> tuple[tuple[str, str], ...]:
    return _pairs_of(raw)


def _pairs_of(raw: bytes) -> tuple[tuple[str, str], ...]:
    pairs: list[tuple[str, str]] = []
    for line in raw.split(b"\r\n"):
        name, sep, value = line.partition(b":")
        if not sep:
            continue
        try:
            key = name.strip().decode("ascii")
        except UnicodeDecodeError:
            continue
        if not key or any(c.isspace() for c in key):
            continue
        pairs.append((key, value.strip().decode("utf-8", "replace")))
    return tuple(pairs)


def header_pairs(headers: dict[str, str] | None) -> list[tuple[str, str]]:
    if not headers:
        return []
    if isinstance(headers, HeaderPairs):
        return list(headers.pairs)
    return list(headers.items())


# A JetStream delivery's reply (ack) subject: `$JS.ACK.<stream>.<consumer>.<delivered>.
# <stream seq>.<consumer seq>.<time>.<pending>` (9 tokens), or with a domain and account
# hash after ACK (11 or more tokens, as nats-py accepts them).
_V1_TOKENS = 9
_V2_MIN_TOKENS = 11


class JetStreamAck(NamedTuple):
    """What a JetStream delivery's ack subject says of it."""

    stream: str
    sequence: int  # the stream sequence: the record's position, and the event id's
    delivery: int  # the consumer's delivery sequence: what ack-all orders acks by


def jetstream_ack(reply: str | None) -> JetStreamAck | None:
    """The stream, stream sequence and delivery sequence of a JetStream ack subject, None
    if it is not one. Read once per message for the record and the ack bookkeeping:
    nats-py's `msg.metadata` also builds a datetime and three dataclasses, which was two
    fifths of the receive cost per message."""
    if not reply:
        return None
    tokens = reply.split(".")
    if len(tokens) < _V1_TOKENS or tokens[0] != "$JS" or tokens[1] != "ACK":
        return None
    if len(tokens) == _V1_TOKENS:
        stream, sequence, delivery = tokens[2], tokens[5], tokens[6]
    elif len(tokens) >= _V2_MIN_TOKENS:
        stream, sequence, delivery = tokens[4], tokens[7], tokens[8]
    else:
        return None
    try:
        return JetStreamAck(stream, int(sequence), int(delivery))
    except ValueError:
        return None


def to_record(msg: Msg, jetstream: bool, received_at: str | None = None,
              ack: JetStreamAck | None = None, parse: bool = True) -> NativeMessage:
    """The record of one received message; total (never raises on odd input). `ack`: the
    ack subject as the caller read it already (`jetstream_ack`); `parse=False`: its body
    is parsed when first read (`NativeMessage.from_wire`)."""
    fields: dict[str, JSON] = {"subject": msg.subject}
    if jetstream:
        # An odd ack subject must not lose the message: it just has no position.
        ack = ack or jetstream_ack(msg.reply)
        if ack is not None:
            fields["stream"], fields["sequence"] = ack.stream, ack.sequence
    elif msg.reply:
        fields["reply-to"] = msg.reply
    content_type: str | None = None
    traceparent: str | None = None
    specversion = False
    pairs = header_pairs(msg.headers)
    if pairs:
        # Only the names are read here, and the values of the headers the route needs at
        # once: the `headers` field is made when someone reads it (`PairsRecord`).
        for name, value in pairs:
            if content_type is None and name.lower() == "content-type":
                content_type = value
            elif not specversion and is_marker(name):  # as the binding reads it
                specversion = True
            elif traceparent is None and name.lower() == "traceparent":
                traceparent = value
    # Whether it carries a CloudEvent, its content type and trace parent, seen here once
    # rather than by a second pass over the headers for every message
    # (`NativeMessage.event_mode`, `header_facts`).
    return PairsRecord.received(NATS, fields, msg.data, content_type, received_at, parse,
                                pairs, mode_of(content_type, specversion), traceparent)


class PublishArgs:
    """What `publish` needs for one record: the headers as (name, value) pairs, in order
    and with repeats (`headers` is the same as nats-py takes them), and, where the
    binding wrote them already (`EncodedHeaders.lines`), the header block they make.
    With a block, the pairs are read from the record's headers only when asked for
    (a request-reply answer goes through nats-py's own `publish`)."""

    __slots__ = ("_added", "_encoded", "_pairs", "block", "payload", "reply", "subject")

    def __init__(
        self, subject: str, reply: str, payload: bytes, pairs: list[tuple[str, str]] | None,
        block: bytes | None = None, encoded: EncodedHeaders | None = None,
        added: tuple[tuple[str, str], ...] = (),
    ) -> None:
        self.subject = subject
        self.reply = reply
        self.payload = payload
        self._pairs = pairs
        self.block = block
        # With a block: the record's headers and what the producer added to them.
        self._encoded = encoded
        self._added = added

    @property
    def pairs(self) -> list[tuple[str, str]] | None:
        pairs = self._pairs
        if pairs is None and self._encoded is not None:
            pairs = self._pairs = [*self._encoded.text, *self._added]
        return pairs

    @property
    def headers(self) -> HeaderPairs | None:
        """For nats-py's own `publish` (request-reply answers); the frames use `pairs`."""
        pairs = self.pairs
        return None if pairs is None else HeaderPairs(pairs)


def to_publish(record: NativeMessage) -> PublishArgs:
    """Publish arguments for a record; raises ValueError when it cannot be sent.
    One pass over the headers (this runs for every published record)."""
    fields = record.wire_fields()
    subject = fields.get("subject")
    if not isinstance(subject, str) or not subject:
        raise ValueError("record has no subject")
    reply = fields.get("reply-to")
    reply = reply if isinstance(reply, str) else ""
    headers = record.header_pairs()
    # Say so, so that a consumer (ours included) reads the body back as JSON.
    add_json = not headers.typed and _says_json(record, headers)  # a typed one: not parsed
    lines = headers.lines
    if lines:  # the binding's block; the pairs only when asked for
        if add_json:
            return PublishArgs(subject, reply, record.body_bytes(), None,
                               _BLOCK_JSON % lines, headers, _JSON_ADDED)
        return PublishArgs(subject, reply, record.body_bytes(), None, _BLOCK % lines,
                           headers)
    pairs = list(headers.text)  # a copy: a content type may be added
    if add_json:
        pairs.append(_JSON_PAIR)
    return PublishArgs(subject, reply, record.body_bytes(), pairs or None)


#: Where a binary CloudEvent's record declares its body's content type (the binding's).
_DECLARED = WIRE.content_type_header


def _says_json(record: NativeMessage, headers: EncodedHeaders) -> bool:
    """Whether `record`'s body is JSON for a reader of its `Content-Type`: JSON data, or
    a body its record declares JSON (`ce-datacontenttype`, a binary CloudEvent's): the
    sender's word, as a receiver's body rule takes it. The declaration is read before
    the body: a body received declared JSON and sent on unparsed (`envelope/wirewriter.
    py`) is not parsed for this, and either path to the record gives the same answer."""
    if record.unparsed_body() is not None:  # not parsed yet (so a body): the declaration first
        return _declares_json(headers) or record.has_json_data
    if not record.has_body:
        return False
    return record.has_json_data or _declares_json(headers)


def _declares_json(headers: EncodedHeaders) -> bool:
    names = headers.names
    if names:  # as the binding wrote them: the content type, when there is one, is last
        return names[-1] == _DECLARED and is_json_type(headers.values[-1])
    for name, value in headers.text:
        if name.lower() == _DECLARED:
            return is_json_type(value)
    return False


# What nats-py's `publish` checks and writes, for `publish_frame` (nats-py 2.x,
# `nats.aio.client`: `_validate_subject`, `_HEADER_KEY_RE`, `_HEADER_VALUE_NEWLINES`,
# `nats.protocol.command.pub_cmd`/`hpub_cmd`). A property test holds the two to the same
# bytes and the same refusals.
_SUBJECT_INVALID = re.compile(r"[ \t\r\n]")
_HEADER_KEY = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_VALUE_NEWLINES = str.maketrans({"\r": " ", "\n": " "})
# Header names already found valid as they are: the same few names (the CloudEvents
# attributes, a content type) come on every message, and checking each again with the
# regex was a third of the framing cost. Bounded against a sender of endless new names.
_CHECKED_NAMES: set[str] = set()
_CHECKED_NAMES_MAX = 4096
_NAME = itemgetter(0)
_JSON_PAIR = ("Content-Type", "application/json")
_JSON_ADDED = (_JSON_PAIR,)
_JSON_LINE = f"{_JSON_PAIR[0]}: {_JSON_PAIR[1]}\r\n".encode()  # the pair as a block line
# The frames' one spelling of the header block around the binding's lines (with the
# producer's JSON content type, or without) and of the HPUB line before it.
_BLOCK = b"NATS/1.0\r\n%s\r\n"
_BLOCK_JSON = b"NATS/1.0\r\n%s" + _JSON_LINE + b"\r\n"
_HPUB = b"HPUB %s %s %d %d\r\n%s%s\r\n"
# `_HPUB` with the block `_BLOCK` or `_BLOCK_JSON` makes of the lines, in one format; the
# block's length beside the lines'.
_HPUB_BLOCK = b"HPUB %s %s %d %d\r\n" + _BLOCK + b"%s\r\n"
_HPUB_JSON = b"HPUB %s %s %d %d\r\n" + _BLOCK_JSON + b"%s\r\n"
_BLOCK_SIZE = len(_BLOCK % b"")
_BLOCK_JSON_SIZE = len(_BLOCK_JSON % b"")


def publish_frame(args: PublishArgs, reply: str = "") -> bytes:
    """The PUB or HPUB protocol line, header block and payload nats-py's `publish` would
    queue for `args` (`reply`: a reply subject that wins over the record's); raises
    ValueError for what nats-py refuses with BadSubjectError or BadHeaderError, and for
    text with no UTF-8 form. Built in one go: nats-py's `publish` costs about 3x as much,
    most of it per header (a regex, two encodes, a bytearray extend each)."""
    try:
        return _frame(args, reply)
    except UnicodeEncodeError as exc:  # a lone surrogate: no UTF-8 for it on the wire
        raise ValueError(f"NATS subject or header not encodable as UTF-8: {exc}") from None


def _header_block(pairs: Sequence[tuple[str, str]]) -> bytes:
    """The `NATS/1.0` header block of `pairs`, as nats-py writes it."""
    if _CHECKED_NAMES.issuperset(map(_NAME, pairs)):
        # The usual case, names seen valid before: one join, and the line breaks counted
        # once over the whole text instead of looked for in every value. (Joining the
        # lines in C and finding values to strip with a regular expression takes fewer
        # Python steps but twice the time: the scan costs more than the loop.)
        text = "".join([f"{name}: {value.strip()}\r\n" for name, value in pairs])
        if text.count("\n") == len(pairs) == text.count("\r"):
            return f"NATS/1.0\r\n{text}\r\n".encode()
    return _checked_block(pairs)


def _checked_block(pairs: Sequence[tuple[str, str]]) -> bytes:
    """`_header_block` header by header: names checked (and remembered), empty ones
    skipped, line breaks in values replaced."""
    lines = ["NATS/1.0\r\n"]
    checked = _CHECKED_NAMES
    for name, value in pairs:
        if name not in checked:
            key = name.strip()
            if not key:
                continue  # nats-py skips empty names
            if not _HEADER_KEY.fullmatch(key):
                raise ValueError(f"invalid NATS header name {key!r}")
            if key == name and len(checked) < _CHECKED_NAMES_MAX:
                checked.add(name)
            name = key
        value = value.strip()
        if "\r" in value or "\n" in value:
            value = value.translate(_VALUE_NEWLINES)
        lines.append(f"{name}: {value}\r\n")
    lines.append("\r\n")
    return "".join(lines).encode()


# Subjects found valid, as the bytes a frame carries: an output publishes to the same few
# subjects (its `subject`, or a template's values), and the check and the encoding of
# each again were a tenth of the framing. Bounded against a sender of endless subjects.
_SUBJECT_BYTES: dict[str, bytes] = {}
_SUBJECT_BYTES_MAX = 4096


def _subject_bytes(subject: str) -> bytes:
    """`subject` checked as nats-py checks it, and encoded (remembered while there is room)."""
    if not subject or _SUBJECT_INVALID.search(subject):
        raise ValueError(f"invalid NATS subject {subject!r}")
    encoded = subject.encode()
    if len(_SUBJECT_BYTES) < _SUBJECT_BYTES_MAX:
        _SUBJECT_BYTES[subject] = encoded
    return encoded


def _reply_bytes(reply: str) -> bytes:
    """A reply subject checked and encoded; not remembered: each request has its own."""
    if _SUBJECT_INVALID.search(reply):
        raise ValueError(f"invalid NATS reply subject {reply!r}")
    return reply.encode()


def written_frame(record: NativeMessage, reply: str) -> tuple[bytes, int] | None:
    """`publish_frame(to_publish(record), reply)` and the payload's length, with no
    `PublishArgs` made in between, for the usual record: a header block its binding
    wrote (`EncodedHeaders.lines`: the fused writers' and the binding's binary records),
    a subject already found valid, a payload within `max_payload` (the caller checks the
    frame). None for any other record, and wherever the two would refuse it or say
    something else first: the caller then takes them, and they say why. Per published
    record, the argument object and the calls between were a fifth of the framing."""
    fields = record.wire_fields()
    subject = fields.get("subject")
    encoded = _SUBJECT_BYTES.get(subject) if isinstance(subject, str) else None
    if encoded is None:
        return None
    headers = record.header_pairs()
    lines = headers.lines
    if not lines:  # no block of the binding's (`to_publish` then uses the pairs)
        return None
    if reply:
        if _SUBJECT_INVALID.search(reply) or not reply.isascii():
            return None
        reply_bytes = reply.encode()
    elif fields.get("reply-to"):
        return None  # the record's own reply subject: rare, the general way
    else:
        reply_bytes = b""
    payload = record.body_bytes()
    says_json = not headers.typed and _says_json(record, headers)
    # The frame with its header block in one formatting (`_HPUB` of `_BLOCK % lines`):
    # no block made and copied on its own.
    size = len(lines) + (_BLOCK_JSON_SIZE if says_json else _BLOCK_SIZE)
    return ((_HPUB_JSON if says_json else _HPUB_BLOCK) % (
        encoded, reply_bytes, size, size + len(payload), lines, payload), len(payload))


def _frame(args: PublishArgs, reply: str) -> bytes:
    subject = args.subject
    reply = reply or args.reply
    encoded = _SUBJECT_BYTES.get(subject) or _subject_bytes(subject)
    reply_bytes = _reply_bytes(reply) if reply else b""
    payload = args.payload
    block = args.block
    if block is None:
        pairs = args.pairs
        if pairs is None:
            return b"PUB %s %s %d\r\n%s\r\n" % (encoded, reply_bytes, len(payload), payload)
        block = _header_block(pairs)
    return _HPUB % (encoded, reply_bytes, len(block), len(block) + len(payload), block,
                    payload)
