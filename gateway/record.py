"""The native message record: one protocol-neutral, typed view of a received message.

Field names are the spec's (see `gateway.protocols.RECORD_FIELDS`). The JSON form is one
flat object per message:

    {"protocol": "MQTT/5.0", "topic_name": "/store/12/cashierdesk/3", "qos": 1,
     "user_properties": [{"name": "eventType", "value": "sale"}],
     "data": {"amount": 12.5}}

The body is `data` (a JSON value, used when the content is JSON) or `data_base64` (any
other bytes). `received_at` (RFC 3339) is optional and, when given, is the receive time
used for CloudEvents `time`. `from_json(r.to_json()) == r` and
`from_json(x).to_json() == x` hold for every valid JSON form `x`.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol, cast

from gateway.json import knowntypes
from gateway.json.body import loads_body, loads_text
from gateway.json.values import JSON, JSONObject, as_text
from gateway.protocols import (
    MQTT5,
    MQTT311,
    NATS,
    PROTOCOLS,
    find_profile,
    normalize_protocol,
)
from gateway.protocols.accessors import ACCESSORS

_COMMON_FIELDS = ("protocol", "data", "data_base64", "received_at")


class RecordError(ValueError):
    """A record that does not have the shape of the native message record."""

    def __init__(self, message: str, path: str = "$") -> None:
        self.path = path
        super().__init__(f"{path}: {message}")


_NO_DATA: Any = object()
#: What an adapter saw of a record's CloudEvent (`NativeMessage.event_mode`): its mode,
#: None for none, or `UNDETECTED` (the binding looks).
EventMode = Literal["structured", "binary", "undetected"] | None
UNDETECTED: EventMode = "undetected"
#: The first `content-type` and `traceparent` header values of a record, as the adapter
#: saw them (`NativeMessage.header_facts`).
HeaderFacts = tuple["str | None", "str | None"]


def parse_body(body: bytes, declared: bool) -> tuple[JSON, bytes | None, bytes | None]:
    """(data, payload, raw) of a non-empty received body, by the body rule
    (`NativeMessage.from_wire`); `declared`: it came with a JSON-family content type."""
    try:
        value: JSON = loads_body(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        # RecursionError: JSON nested deeper than the interpreter's recursion limit
        # (`[[[[...` from a hostile sender). It used to escape every adapter's
        # to_record (found by tests/fuzz); such a body is kept as bytes like any other
        # body that does not parse, and the matcher/dead letter deal with it.
        return _NO_DATA, body, None
    if not declared and not isinstance(value, (dict, list)):
        return _NO_DATA, body, None
    return value, None, body


class EncodedHeaders:
    """A record's `headers` field as (name, value) pairs, the way `record.pairs("headers")`
    reads it (`text`), and as UTF-8 bytes where the binding made those too (`utf8`,
    Kafka's form); see `NativeMessage.encoded_headers`. `lines`: the same headers as
    the UTF-8 `name: value` lines, each ended by CRLF, that a NATS header block holds,
    where the binding made them (NATS, for values that need no trimming or escaping).

    `text` may be left to be read when first asked for (None): a binding that wrote the
    headers as text and made the form its producer sends (`utf8`, `lines`) need not make
    the pairs for every record, and usually no one asks (they were 8 of a record's ~46
    objects, made and freed per message).

    `entries`, the field's list of {name, value} objects these were made from (by
    identity), is None while nobody has read the record's fields (`WireRecord`): then the
    headers are `names` with `values`, one tuple each, the names shared by every record
    of the same attribute layout."""

    __slots__ = ("_text", "entries", "lines", "names", "size", "typed", "utf8", "values")

    def __init__(self, entries: list[JSON] | None, text: list[tuple[str, str]] | None,
                 utf8: list[tuple[str, bytes]] | None, typed: bool,
                 lines: bytes | None = None, names: tuple[str, ...] = (),
                 values: tuple[str, ...] = ()) -> None:
        self.entries = entries  # the field's list they were made from (by identity)
        self._text = text
        self.utf8 = utf8
        self.typed = typed  # one of them is a content type
        self.lines = lines
        self.names = names
        self.values = values
        # How many entries there were (are to be).
        self.size = len(names) if entries is None else len(entries)

    @property
    def text(self) -> list[tuple[str, str]]:
        text = self._text
        if text is None:
            entries = cast("list[dict[str, str]] | None", self.entries)  # as written
            text = self._text = (list(zip(self.names, self.values, strict=True))
                                 if entries is None
                                 else [(entry["name"], entry["value"]) for entry in entries])
        return text

    def make_entries(self) -> list[JSON]:
        """The {name, value} objects of the headers (`WireRecord.fields`), made now if
        the binding left them to be made."""
        entries = self.entries
        if entries is None:
            entries = self.entries = [{"name": name, "value": value}
                                      for name, value in zip(self.names, self.values,
                                                             strict=True)]
        return entries


@dataclass(frozen=True, eq=False, init=False)
class NativeMessage:
    """An immutable received message.

    `fields` holds the protocol metadata under the spec's names; `data` is the JSON body
    (or absent), `payload` the raw bytes of a non-JSON body. Exactly one of them is set,
    or neither when the message has no body.
    """

    protocol: str
    fields: Mapping[str, JSON]
    # Every field but perhaps the metadata entries (`ENTRY_FIELDS`): `fields` itself on
    # most records; on one that makes its entries when first read
    # (`PairsRecord`), the other fields alone. What the hot path reads of a record's
    # scalar fields (its address, identity, a key) it reads here, so that it never makes
    # those entries (docs/performance.md).
    head: Mapping[str, JSON] = field(repr=False)
    data: JSON
    payload: bytes | None
    received_at: str | None
    # The body's bytes as received when `data` was parsed from them (or as `body_bytes`
    # first serialised `data`): forwarding and dead letters send these, so a JSON body
    # leaves byte for byte as it came. Not part of the JSON form or of equality (it is
    # the same value).
    raw: bytes | None
    # The `headers` field as (name, value) pairs, made by the binding that built the
    # record while it had the values at hand (Kafka, NATS), with the list they were made
    # from and whether one is a content type. A producer uses them only while
    # `fields["headers"]` is that same list, of that length; otherwise it reads the field.
    # (Producers reached the entries only after the rest of their batch was rendered, and
    # reading them again then cost as much as writing them.) Not part of the JSON form or
    # of equality (the same headers). Set through `set_encoded_headers`, so it is an
    # instance attribute only where it was made.
    encoded_headers: ClassVar[EncodedHeaders | None] = None
    # Whether the record carries a CloudEvent, and in which mode ("structured", "binary"
    # or None), as the adapter that built it saw while it read the headers once anyway
    # (`PairsRecord.received`); `UNDETECTED` where it did not say, and the binding then looks
    # (`detect`). Not part of the JSON form or of equality, and not copied by
    # `replace_fields` (other fields may say otherwise).
    event_mode: ClassVar[EventMode] = "undetected"
    # The first `content-type` and `traceparent` header values (names compared ignoring
    # case; values as the entries' text), or None for one the headers lack, as the same
    # adapter saw them in that pass; None where it did not say, and a renderer then reads
    # the entries (`envelope/fastrender.py`). Not copied by `replace_fields` either.
    header_facts: ClassVar[HeaderFacts | None] = None
    #: The class `from_wire` makes of a body it leaves unparsed (`ReceivedRecord`, or
    #: its counterpart of a subclass that makes its entries when read).
    DEFERRED: ClassVar[Callable[[str, Mapping[str, JSON], bytes, str | None], NativeMessage]]

    def __init__(self, protocol: str, fields: Mapping[str, JSON] | None = None,
                 data: JSON = _NO_DATA, payload: bytes | None = None,
                 received_at: str | None = None, raw: bytes | None = None) -> None:
        # Plain attributes (`_inline` says why); the record itself at run time, with no
        # call (this runs for every record made).
        if TYPE_CHECKING:
            state = _own(self)
        else:
            state = self
        state.protocol = protocol
        state.head = state.fields = {} if fields is None else fields
        state.data = data
        state.payload = payload
        state.received_at = received_at
        state.raw = raw

    # -- body ---------------------------------------------------------------------------
    @property
    def has_json_data(self) -> bool:
        return self.data is not _NO_DATA

    @property
    def has_body(self) -> bool:
        return self.has_json_data or self.payload is not None

    def body_bytes(self) -> bytes:
        """The body as bytes: as received when known, compact JSON text for JSON data,
        else the payload.

        JSON data is serialised once: the text is kept as `raw` (the same value), so the
        producer that sends the record and the metric that counts its bytes
        (`body_length`) do not serialise it twice."""
        if self.raw is not None:
            return self.raw
        if self.has_json_data:
            encoded = _json_bytes(self.data)
            _own(self).raw = encoded  # a frozen record: its own cache, not a change
            return encoded
        return self.payload or b""

    def body_length(self) -> int:
        """The body's length in bytes, never serialising a JSON body again: received
        records and the binary-mode events rendered from them carry their bytes (`raw`),
        and a record sent without them was serialised once by its producer, which kept
        the text (`body_bytes`). What the metrics count and the size limits compare."""
        body = self.unparsed_body()
        if body is not None:  # the bytes received, whatever they parse to: not parsed here
            return len(body)
        raw = self.raw
        if raw is not None:
            return len(raw)
        if self.payload is not None and not self.has_json_data:
            return len(self.payload)
        return len(self.body_bytes())

    # -- metadata access -------------------------------------------------------------------
    def get(self, name: str) -> JSON:
        return self.fields.get(name)

    def pairs(self, name: str) -> list[tuple[str, str]]:
        """Entries of a list-of-{name,value} field (headers, user_properties)."""
        raw = self.fields.get(name)
        if not isinstance(raw, list):
            return []
        out: list[tuple[str, str]] = []
        for entry in raw:
            if isinstance(entry, dict):
                value = entry.get("value")
                # A str is its own text: the call is for the other JSON kinds (per header).
                text = value if value.__class__ is str else as_text(value)
                out.append((str(entry.get("name", "")), text))
        return out

    def header(self, name: str, case_insensitive: bool = False) -> str | None:
        entry = _first_entry(self.fields.get("headers"), name, case_insensitive)
        return None if entry is None else as_text(entry.get("value"))

    def metadata(self, name: str) -> str | None:
        """The first application-metadata entry `name`, wherever the protocol's profile
        keeps them (headers, MQTT 5 user properties, AMQP application properties); None
        when absent, or when the protocol has no metadata (MQTT 3.1.1)."""
        return ACCESSORS[self.protocol].metadata(self.fields, name)

    @property
    def content_type(self) -> str | None:
        """The protocol's content type of the body, where the protocol has one."""
        return ACCESSORS[self.protocol].content_type(self.fields)

    # -- from the wire ------------------------------------------------------------------------
    @classmethod
    def from_wire(
        cls,
        protocol: str,
        fields: Mapping[str, JSON],
        body: bytes,
        content_type: str | None,
        received_at: str | None = None,
        *,
        parse: bool = True,
    ) -> NativeMessage:
        """A record from a received body, by the one body rule every adapter follows.

        - empty body: no body;
        - a JSON-family content type (`application/json`, `text/json`, `*+json`): `data`
          when it parses, else the bytes;
        - any other content type: the bytes;
        - no content type (MQTT 3.1.1, bare Kafka or NATS): `data` only when it parses as a
          JSON object or array; bare scalars such as `21.5` stay bytes (sensors send those
          as plain text).

        `parse=False`: a body declared JSON is parsed when first read instead
        (`ReceivedRecord`), for a route that may never read it (`ports.defer_bodies`). A
        body with no content type is parsed at once all the same: only parsing tells
        whether it is JSON, which every route that converts it must know (the event's
        content type depends on it), and parsed now its bytes are still in the
        processor's caches.
        """
        if not body:
            return cls(protocol, fields, received_at=received_at)
        if content_type is not None:
            # `is_json_media_type`, its table read here first: this runs per message.
            json_type = _JSON_TYPES.get(content_type)
            if json_type is None:
                json_type = is_json_media_type(content_type)
            if not json_type:
                return cls(protocol, fields, payload=body, received_at=received_at)
            if not parse:
                return cls.DEFERRED(protocol, fields, body, received_at)
        data, payload, raw = parse_body(body, content_type is not None)
        return cls(protocol, fields, data, payload, received_at, raw)

    def unparsed_body(self) -> bytes | None:
        """The received body while it is not parsed yet (its bytes, whatever they parse
        to: `ReceivedRecord`), else None. What needs only the bytes reads them here, not
        through `raw`, which would parse them. Only a body declared JSON is left
        unparsed (`from_wire`)."""
        return None

    def replace_fields(self, fields: Mapping[str, JSON], protocol: str | None = None
                       ) -> NativeMessage:
        """The same body (raw bytes included) under other metadata. Encoded headers go
        along: they only count while `fields` still holds the list they were made from."""
        record = NativeMessage(protocol or self.protocol, fields, self.data, self.payload,
                               self.received_at, self.raw)
        encoded = self.encoded_headers
        if encoded is not None:
            _own(record).encoded_headers = encoded
        return record

    def set_encoded_headers(self, text: list[tuple[str, str]], typed: bool,
                            utf8: list[tuple[str, bytes]] | None = None) -> None:
        """Keep `text` (and `utf8`), the pairs of `fields["headers"]` as it is now (see
        `encoded_headers`); `typed`: one of them is a content type."""
        entries = self.fields.get("headers")
        if (isinstance(entries, list) and len(entries) == len(text)
                and (utf8 is None or len(utf8) == len(text))):
            _own(self).encoded_headers = EncodedHeaders(entries, text, utf8, typed)

    def header_pairs(self) -> EncodedHeaders:
        """The `headers` field as (name, value) pairs and whether one is a content type,
        for a producer: the binding's own (`encoded_headers`) while they still describe
        the field, else read from the field now (as `pairs("headers")`; no `utf8`)."""
        encoded = self.current_encoded_headers()
        if encoded is not None:
            return encoded
        entries = self.fields.get("headers")
        text = self.pairs("headers")
        return EncodedHeaders(entries if isinstance(entries, list) else [], text, None,
                              any(name.lower() == "content-type" for name, _ in text))

    def current_encoded_headers(self) -> EncodedHeaders | None:
        """The encoded headers, if `fields["headers"]` is still what they were made from."""
        encoded = self.encoded_headers
        if encoded is None:
            return None
        entries = self.fields.get("headers")
        if entries is encoded.entries and isinstance(entries, list) \
                and len(entries) == encoded.size:
            return encoded
        return None

    def wire_fields(self) -> Mapping[str, JSON]:
        """The fields a producer reads besides the headers, which it takes from
        `header_pairs()`: `fields` (a `WireRecord` has them without its headers until
        someone reads `fields`)."""
        return self.fields

    # -- JSON form ---------------------------------------------------------------------------
    def to_json(self) -> JSONObject:
        out: JSONObject = {"protocol": self.protocol}
        out.update(self.fields)
        if self.has_json_data:
            out["data"] = self.data
        elif self.payload is not None:
            out["data_base64"] = base64.b64encode(self.payload).decode("ascii")
        if self.received_at is not None:
            out["received_at"] = self.received_at
        return out

    def to_line(self) -> str:
        return json.dumps(self.to_json(), separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_json(cls, obj: object) -> NativeMessage:
        """Build a record from its JSON form; raises `RecordError` naming the bad path."""
        if not isinstance(obj, dict):
            raise RecordError("a native message record must be a JSON object")
        raw_protocol = obj.get("protocol")
        if not isinstance(raw_protocol, str):
            raise RecordError(
                f'missing "protocol"; use one of {", ".join(PROTOCOLS)}',
                "$.protocol",
            )
        protocol = normalize_protocol(raw_protocol)
        prof = find_profile(protocol)
        if protocol is None or prof is None:
            raise RecordError(f"unknown protocol {raw_protocol!r}", "$.protocol")
        known = prof.record_fields
        fields: dict[str, JSON] = {}
        for key, value in obj.items():
            if key in _COMMON_FIELDS:
                continue
            kind = known.get(key)
            if kind is None:
                raise RecordError(
                    f"{key!r} is not a field of a {protocol} record "
                    f"(fields: {', '.join(sorted(known))})",
                    f"$.{key}",
                )
            # A parsed value of the kind's one type needs no other check (`type`, not
            # `isinstance`: a bool is no integer); this runs per field of every record
            # the Spark job's Python stage reads.
            if type(value) is not _PLAIN_KINDS.get(kind):
                _check_field(kind, value, f"$.{key}")
            fields[key] = value
        for rule in prof.definitions.exclusive:
            if rule.first in fields and rule.second in fields:
                raise RecordError(f"{rule.first} and {rule.second} are mutually exclusive",
                                  f"$.{rule.second}")
        if "data" in obj and "data_base64" in obj:
            raise RecordError("data and data_base64 are mutually exclusive", "$.data_base64")
        data: JSON = obj.get("data", _NO_DATA)
        payload: bytes | None = None
        if "data_base64" in obj:
            encoded = obj["data_base64"]
            if not isinstance(encoded, str):
                raise RecordError("data_base64 must be a base64 string", "$.data_base64")
            try:
                payload = base64.b64decode(encoded, validate=True)
            except (binascii.Error, ValueError) as exc:
                raise RecordError(
                    f"data_base64 is not valid base64: {exc}", "$.data_base64"
                ) from exc
        received_at = obj.get("received_at")
        if received_at is not None and not isinstance(received_at, str):
            raise RecordError("received_at must be an RFC 3339 string", "$.received_at")
        return cls(protocol, fields, data, payload, received_at)

    @classmethod
    def from_line(cls, line: str) -> NativeMessage:
        try:
            obj = loads_text(line)
        except json.JSONDecodeError as exc:
            raise RecordError(f"not JSON: {exc.msg} at column {exc.colno}") from exc
        return cls.from_json(obj)

    # -- equality follows the JSON form --------------------------------------------------------
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, NativeMessage):
            return NotImplemented
        return self.to_json() == other.to_json()

    def __hash__(self) -> int:
        return hash(self.to_line())


def _inline(cls: type[NativeMessage]) -> None:
    """Take the frozen dataclass's attribute guards off `cls` at run time.

    A record is immutable to the type checker (`frozen=True`: mypy refuses any assignment
    to its attributes). At run time the guards cost more than they catch: with them, every
    attribute had to be written through `object.__setattr__` or the instance dict, and on
    CPython 3.11 touching `__dict__` turns the object's inline attribute values into a
    real dict -- one more object per record to make and free, and every later attribute
    read goes through it. Without them the record's own code writes plain attributes
    (`_own`): 0.63 -> 0.31 µs to make and free a six-attribute object, and its attribute
    reads 2.4x faster; 8-9% of the instructions of a Kafka route's in-process stages
    (bench/README.md, "fourteenth round")."""
    del cls.__setattr__
    del cls.__delattr__


class _OwnState(Protocol):
    """A record's attributes as its own code writes them (`_own`): the type checker's
    view of a record is frozen, and only the record's methods set its state."""

    protocol: str
    fields: Mapping[str, JSON]
    head: Mapping[str, JSON]
    data: JSON
    payload: bytes | None
    received_at: str | None
    raw: bytes | None
    encoded_headers: EncodedHeaders | None
    event_mode: EventMode
    header_facts: HeaderFacts | None


def _own(record: NativeMessage) -> _OwnState:
    """`record`, writable: for its own methods only (see `_inline`)."""
    return cast(_OwnState, record)


_inline(NativeMessage)


class WireRecord(NativeMessage):
    """A binary-mode record as a binding wrote it for its producer
    (`cloudevents/bindings/wireform.py`): the producer sends its `encoded_headers` (Kafka's
    UTF-8 pairs, NATS's header lines) and reads the other fields from `wire_fields()`, so
    the `headers` field -- a {name, value} object per header, 7 of them and their list for
    a usual CloudEvent, made and freed for every message -- is made only if something
    reads `fields` (a dead letter, the tap, a trace header, a reply). It is then the same
    field, in the same place among the others, as the binding's own steps write; the
    record is the same record (`tests/unit/cloudevents/test_wireform.py`).

    `head`: the fields the binding wrote before the headers (`lead` of them) and any a
    renderer adds to `wire_fields()` before anyone reads `fields` (defaults, a key)."""

    # Its own state (plain attributes: `_inline`), besides the record's; its `head` is the
    # `head` above (the binding's fields and those added before `fields` is read).
    _lead: int
    _fields: dict[str, JSON] | None = None  # made when first read

    def __init__(self, protocol: str, head: dict[str, JSON], data: JSON,
                 payload: bytes | None, raw: bytes | None,
                 encoded: EncodedHeaders) -> None:
        if TYPE_CHECKING:
            state = _own(self)
        else:  # once per record written: no call
            state = self
        state.data = data
        state.payload = payload
        state.raw = raw
        # `_wire`'s lines, inline: a call per record written saved.
        state.protocol = protocol
        state.received_at = None
        state.encoded_headers = encoded
        state.head = head
        self._lead = len(head)

    @property  # read-only, as the frozen field it stands for
    def fields(self) -> Mapping[str, JSON]:
        made = self._fields
        if made is None:
            items = list(self.head.items())
            lead = self._lead
            made = dict(items[:lead])
            encoded = self.encoded_headers
            assert encoded is not None  # a wire record is made with its headers
            made["headers"] = encoded.make_entries()
            made.update(items[lead:])
            self._fields = made
        return made

    def wire_fields(self) -> Mapping[str, JSON]:
        made = self._fields
        return self.head if made is None else made

    def current_encoded_headers(self) -> EncodedHeaders | None:
        if self._fields is None:  # nobody has read (or changed) the fields
            return self.encoded_headers
        return super().current_encoded_headers()


class _ParsedWhenRead:
    """A record's body as received, parsed by the body rule (`parse_body`) when its
    `data`, `payload` or `raw` is first read; its bytes, their length and whether there
    is a body are known without parsing. The record reads as the record `from_wire`
    parsing at once would make (`tests/unit/test_record.py`).

    Parsing makes it the plain record it stands for (`PARSED`, its class changed in
    place): from then on its body is read as any record's is, from its own attributes,
    not through these properties. A class of its own rather than a `__getattr__` on
    every record: CPython specialises attribute reads only on classes without one."""

    #: The class a record of this one becomes once parsed (set by each subclass).
    PARSED: ClassVar[type[NativeMessage]]
    _body: bytes  # as received, not parsed yet

    @property
    def data(self) -> JSON:
        data: JSON = self._parse()["data"]
        return data

    @property
    def payload(self) -> bytes | None:
        payload: bytes | None = self._parse()["payload"]
        return payload

    @property
    def raw(self) -> bytes | None:
        raw: bytes | None = self._parse()["raw"]
        return raw

    def _parse(self) -> dict[str, Any]:
        # Into the instance dict: until the class changes, the properties above stand for
        # these three (the dict is made here, once per record parsed late). The two
        # classes have the same layout. Another thread that read the properties before
        # this parses again, the same.
        state = self.__dict__
        data, payload, raw = parse_body(self._body, True)  # declared JSON: `from_wire`
        state["payload"] = payload
        state["raw"] = raw
        state["data"] = data
        object.__setattr__(self, "__class__", self.PARSED)
        return state

    @property
    def has_body(self) -> bool:
        return True  # `from_wire` keeps no empty body

    def body_bytes(self) -> bytes:
        return self._body  # `raw` or `payload`, whichever it parses to

    def unparsed_body(self) -> bytes | None:
        return self._body  # not parsed: the class changes when it is

    def body_length(self) -> int:
        return len(self._body)  # as `NativeMessage.body_length` finds it, with no call


class ReceivedRecord(_ParsedWhenRead, NativeMessage):
    """A record `from_wire` made of a body declared JSON (a JSON-family content type) for
    a route that may never read it: parsed when first read, a `NativeMessage` from then
    on."""

    PARSED = NativeMessage

    def __init__(self, protocol: str, fields: Mapping[str, JSON], body: bytes,
                 received_at: str | None = None) -> None:
        if TYPE_CHECKING:
            state = _own(self)
        else:  # once per record received: no call
            state = self
        state.protocol = protocol
        state.head = state.fields = fields
        state.received_at = received_at
        self._body = body

    def replace_fields(self, fields: Mapping[str, JSON], protocol: str | None = None
                       ) -> NativeMessage:
        # The body stays unparsed (a parsed record is a NativeMessage).
        record = ReceivedRecord(protocol or self.protocol, fields, self._body,
                                self.received_at)
        encoded = self.encoded_headers
        if encoded is not None:
            _own(record).encoded_headers = encoded
        return record


class UnparsedWireRecord(_ParsedWhenRead, WireRecord):
    """A `WireRecord` whose body is a received one sent on unparsed (JSON declared, plain
    UTF-8: `envelope/wirewriter.py`), given as `raw`; `data` and `payload` are not read.
    It reads as the record made of the body's value would, and becomes a `WireRecord`
    once parsed."""

    PARSED = WireRecord

    def __init__(self, protocol: str, head: dict[str, JSON], data: JSON,
                 payload: bytes | None, raw: bytes | None,
                 encoded: EncodedHeaders) -> None:
        # Until it is parsed, the body's parts are the properties' to give (they take
        # precedence over the instance's own entries, which parsing then replaces).
        # `_wire`'s lines, inline: this runs for every record the fused path writes.
        if TYPE_CHECKING:
            state = _own(self)
        else:
            state = self
        state.protocol = protocol
        state.received_at = None
        state.encoded_headers = encoded
        state.head = head
        self._lead = len(head)
        assert raw is not None  # a received body, sent on unparsed
        self._body = raw


#: The fields a record may make when they are first read (`PairsRecord`): never in
#: its `head`.
ENTRY_FIELDS = frozenset({"headers"})


class PairsRecord(NativeMessage):
    """A received record whose headers came as the client's (name, value) pairs (Kafka's,
    values as bytes; NATS's, as text) and whose `headers` field -- a {name, value} object
    per header and their list, each value as text -- is made when its fields are first
    read (the general path, a dead letter, the tap), from the pairs `received` keeps. The hot path
    reads `head` and the adapter's `header_facts` and never makes them: 2 objects (and a
    decode) per header of every record, made and freed unread. The field it makes is the
    one the adapters made before (text as it came, valid UTF-8 bytes as text, other bytes
    as base64 text, a header without a value as ""), after the other fields
    (`tests/unit/adapters/test_kafka_event_mode.py`, `test_nats_event_mode.py`)."""

    _pairs: Sequence[tuple[str, bytes | str | None]] = ()
    _made: Mapping[str, JSON] | None = None

    @property  # read-only to the type checker, as the frozen field it stands for
    def fields(self) -> Mapping[str, JSON]:
        made = self._made
        if made is None:
            pairs = self._pairs
            if not pairs:
                made = self.head
            else:
                whole = dict(self.head)
                whole["headers"] = [
                    {"name": name,
                     "value": value if isinstance(value, str) else byte_text(value)}
                    for name, value in pairs]
                made = whole
            self._made = made
        return made

    @fields.setter
    def fields(self, fields: Mapping[str, JSON]) -> None:
        # Only the record's own constructors set it (`_inline`): what they are given is
        # its head, the entries come later.
        if TYPE_CHECKING:
            _own(self).head = fields
        else:
            self.head = fields

    @classmethod
    def received(cls, protocol: str, fields: Mapping[str, JSON], body: bytes,
                 content_type: str | None, received_at: str | None, parse: bool,
                 pairs: Sequence[tuple[str, bytes | str | None]], mode: EventMode,
                 traceparent: str | None) -> NativeMessage:
        """`from_wire`, keeping the client's header `pairs` to make the `headers` field
        of when it is read, and what the adapter saw reading them: whether the record
        carries a CloudEvent (`event_mode`), its content type and trace parent
        (`header_facts`). One call per record received."""
        record = cls.from_wire(protocol, fields, body, content_type, received_at,
                               parse=parse)
        if TYPE_CHECKING:
            state = _own(record)
            kept = cast(PairsRecord, record)  # `from_wire` makes one of `cls`
        else:  # once per record received: no calls
            state = kept = record
        if pairs:
            kept._pairs = pairs
        state.event_mode = mode
        state.header_facts = (content_type, traceparent)
        return record


class PairsReceivedRecord(ReceivedRecord, PairsRecord):
    """A `PairsRecord` whose body is a declared JSON one, parsed when first read
    (`ReceivedRecord`), a `PairsRecord` from then on."""

    PARSED = PairsRecord


def byte_text(value: bytes | None) -> str:
    """A header value that came as bytes, as its entry's text: valid UTF-8 as text, other
    bytes as base64 text, no value as ""."""
    if value is None:
        return ""
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return base64.b64encode(value).decode("ascii")


def _json_bytes(data: JSON) -> bytes:
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    try:
        return text.encode()
    except UnicodeEncodeError:
        # Lone surrogates (JSON escapes such as "\ud800" parse into them) have no UTF-8
        # form; escaped JSON is the same value. Raising here made records unsendable,
        # even as dead letters (found by tests/fuzz).
        return json.dumps(data, separators=(",", ":")).encode()


def is_json_media_type(content_type: str) -> bool:
    """Whether a content type is of the JSON family; asked of every received record
    with one (`from_wire`), so each type's answer is kept (`knowntypes`)."""
    known = _JSON_TYPES.get(content_type)
    if known is None:
        essence = content_type.split(";", 1)[0].strip().lower()
        known = essence in ("application/json", "text/json") or essence.endswith("+json")
        knowntypes.keep(_JSON_TYPES, content_type, known)
    return known


_JSON_TYPES: dict[str, bool] = {}


def _first_entry(entries: JSON, name: str, case_insensitive: bool) -> dict[str, JSON] | None:
    """The first {name, value} entry of a pairs field with this name."""
    if not isinstance(entries, list):
        return None
    wanted = name.lower() if case_insensitive else name
    for entry in entries:  # no intermediate list: this runs for every message
        if not isinstance(entry, dict):
            continue
        key = entry.get("name")
        if isinstance(key, str) and (key.lower() if case_insensitive else key) == wanted:
            return entry
    return None


# The kinds of field whose value is right exactly when it is of one JSON type.
_PLAIN_KINDS: dict[str, type] = {"string": str, "integer": int, "boolean": bool,
                                 "object": dict}


def _check_field(kind: str, value: object, path: str) -> None:
    if kind == "string":
        ok = isinstance(value, str)
    elif kind == "integer":
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif kind == "boolean":
        ok = isinstance(value, bool)
    elif kind == "object":
        ok = isinstance(value, dict)
    elif kind == "strmap":
        ok = isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
    elif kind == "pairs":
        ok = isinstance(value, list)
        if ok:
            for index, entry in enumerate(cast(list[object], value)):
                # name and value, nothing else: two keys, both of them
                if not (
                    isinstance(entry, dict)
                    and len(entry) == 2
                    and isinstance(entry.get("name"), str)
                    and "value" in entry
                ):
                    raise RecordError(
                        'each entry must be an object {"name": string, "value": ...}',
                        f"{path}[{index}]",
                    )
    else:  # pragma: no cover - table and checker are kept in step
        raise AssertionError(kind)
    if not ok:
        raise RecordError(f"expected {kind}, got {type(value).__name__}", path)


def read_records(lines: Iterator[str]) -> Iterator[tuple[int, NativeMessage | RecordError]]:
    """Parse JSON Lines, yielding (line number, record or error); blank lines are skipped."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield number, NativeMessage.from_line(line)
        except RecordError as exc:
            yield number, exc


__all__ = [
    "MQTT5", "MQTT311", "NATS", "UNDETECTED", "EventMode", "NativeMessage", "ReceivedRecord",
    "RecordError", "UnparsedWireRecord", "WireRecord", "is_json_media_type", "parse_body",
    "read_records",
]


NativeMessage.DEFERRED = ReceivedRecord
PairsRecord.DEFERRED = PairsReceivedRecord
