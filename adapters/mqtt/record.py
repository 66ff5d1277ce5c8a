"""MQTT PUBLISH <-> native message record, both directions, no I/O.

Body rule (receive):
* empty payload -> no body;
* a content type is given (MQTT 5): JSON-family types (`application/json`, `text/json`,
  `*/*+json`) become `data` when the payload parses; anything else stays `payload` bytes,
  so a declared non-JSON type is never reinterpreted;
* no content type (always so in 3.1.1): `data` only when the payload parses as a JSON
  object or array. Bare scalars (`21.5`, `true`, `"x"`) stay bytes: sensors send those as
  plain text, and guessing would change the type a definition's schema sees.
A JSON-family payload that does not parse stays bytes (the matcher reports it, nothing is
lost here).

`correlation_data` is binary in MQTT but a string in the record: valid UTF-8 is kept as
text, other bytes become base64 (documented lossy spot; the producer encodes UTF-8).

The wire codec at the end decodes received PUBLISH / PUBACK packets and encodes PUBLISH
properties faster than paho does, into the same paho objects (see its comment).
"""

from __future__ import annotations

import base64

import paho.mqtt.client as paho
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode

from gateway.json.values import JSON
from gateway.protocols import MQTT5, MQTT311
from gateway.record import NativeMessage
from gateway.record import is_json_media_type as is_json_type

__all__ = [
    "ACK_PROPERTIES",
    "PublishArgs",
    "UnusualPacket",
    "ack_success",
    "decode_publish",
    "is_json_type",
    "publish_properties",
    "to_publish",
    "to_record",
]

#: MQTT 5 PUBLISH properties copied as they are: (paho attribute, record field).
_SIMPLE_PROPERTIES = (
    ("PayloadFormatIndicator", "payload_format"),
    ("MessageExpiryInterval", "message_expiry_interval"),
    ("ResponseTopic", "response_topic"),
    ("ContentType", "content_type"),
)


def _text(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return base64.b64encode(raw).decode("ascii")


def to_record(message: paho.MQTTMessage, v5: bool, received_at: str | None = None,
              parse: bool = True) -> NativeMessage:
    """The record of one received PUBLISH; total (never raises on odd input). `parse=False`:
    its body is parsed when first read (`NativeMessage.from_wire`)."""
    fields: dict[str, JSON] = {
        "topic_name": message.topic,
        "qos": int(message.qos),
        "retain": bool(message.retain),
    }
    content_type: str | None = None
    props = message.properties if v5 else None
    if props is not None:
        # paho keeps the properties present as instance attributes: one dict look-up
        # each instead of a getattr raising AttributeError for every absent one.
        present = vars(props)
        content_type = present.get("ContentType")
        for attr, name in _SIMPLE_PROPERTIES:
            value = present.get(attr)
            if value is not None:
                fields[name] = value
        correlation = present.get("CorrelationData")
        if correlation is not None:
            fields["correlation_data"] = _text(bytes(correlation))
        pairs = present.get("UserProperty")
        if pairs:
            fields["user_properties"] = [{"name": n, "value": v} for n, v in pairs]
    protocol = MQTT5 if v5 else MQTT311
    payload = message.payload
    return NativeMessage.from_wire(
        protocol, fields, payload if type(payload) is bytes else bytes(payload), content_type,
        received_at, parse=parse)


class PublishArgs:
    """What `PahoLink.publish_batch` needs for one record."""

    __slots__ = ("payload", "properties", "qos", "retain", "topic")

    def __init__(
        self, topic: str, payload: bytes, qos: int, retain: bool, properties: Properties | None
    ) -> None:
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.retain = retain
        self.properties = properties


def _int(value: JSON, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def to_publish(record: NativeMessage, v5: bool, default_qos: int,
               default_retain: bool = False, correlation: bytes | None = None) -> PublishArgs:
    """PUBLISH arguments for a record; raises ValueError when it cannot be sent.
    `correlation` (request-reply: the request's correlation data as received) replaces
    the record's `correlation_data`, byte for byte.

    On a 3.1.1 connection the MQTT 5 properties are dropped: the protocol has no place
    for them (the caller chose the protocol version).
    """
    fields = record.fields  # read directly: this runs once per message sent
    topic = fields.get("topic_name")
    if not isinstance(topic, str) or not topic:
        raise ValueError("record has no topic_name")
    if "\x00" in topic:
        # The broker would close the connection (MQTT 5.0, 1.5.4), failing every message
        # in flight with this one, on every retry: refuse it alone instead.
        raise ValueError("topic_name contains U+0000, which MQTT forbids")
    qos = _int(fields.get("qos"), default_qos)
    if qos not in (0, 1, 2):
        raise ValueError(f"invalid qos {qos}")
    own_retain = fields.get("retain")
    retain = own_retain if isinstance(own_retain, bool) else default_retain
    if not v5:
        return PublishArgs(topic, record.body_bytes(), qos, retain, None)
    values: dict[str, object] = {}
    content_type = fields.get("content_type")
    if isinstance(content_type, str):
        values["ContentType"] = content_type
    elif record.has_json_data:
        # Say so, so that a consumer (ours included) reads the body back as JSON.
        values["ContentType"] = "application/json"
    for name, attr in (
        ("payload_format", "PayloadFormatIndicator"),
        ("message_expiry_interval", "MessageExpiryInterval"),
    ):
        value = fields.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            values[attr] = value
    response_topic = fields.get("response_topic")
    if isinstance(response_topic, str):
        values["ResponseTopic"] = response_topic
    own_correlation = fields.get("correlation_data")
    if correlation is not None:
        values["CorrelationData"] = correlation
    elif isinstance(own_correlation, str):
        values["CorrelationData"] = own_correlation.encode()
    pairs = record.pairs("user_properties")
    if pairs:
        values["UserProperty"] = pairs
    props = publish_properties(**values) if values else None
    return PublishArgs(topic, record.body_bytes(), qos, retain, props)


def packet_size(args: PublishArgs, v5: bool) -> int:
    """The size of the PUBLISH packet for `args`, in bytes, as a broker's (MQTT 5 CONNACK)
    Maximum Packet Size counts it: fixed header, topic, packet id, properties, payload."""
    remaining = 2 + len(args.topic.encode("utf-8", "surrogatepass")) + len(args.payload)
    if args.qos:
        remaining += 2  # packet identifier
    if v5:
        props = args.properties
        remaining += 1 if props is None else len(props.pack())  # type: ignore[no-untyped-call]
    return 1 + len(_varint(remaining)) + remaining


# ====================================================================== wire codec
# paho builds a Properties object per packet -- its constructor fills two 27-entry
# tables, its pack()/unpack() walk them per property -- and a PUBACK costs two of them
# plus two ReasonCodes: on a busy link, most of the CPU. `adapters/mqtt/paho_loop.py`
# handles the common packets with the functions below instead, which build the same
# objects paho would. Anything unusual (another property, a repeated one, a value paho
# rejects, a malformed packet) raises UnusualPacket and the link leaves the packet to
# paho, so paho's behaviour on odd input is unchanged. tests/unit/adapters/
# test_mqtt_wire.py checks both directions against paho's own codec.

#: Property value encodings (MQTT 5.0, 2.2.2.2).
_BYTE, _INT16, _INT32, _VARINT, _BINARY, _TEXT, _PAIR = range(7)

#: The PUBLISH properties: identifier -> (paho attribute, encoding), in paho's order
#: (which is the order pack() writes them in).
_PUBLISH_PROPERTIES: dict[int, tuple[str, int]] = {
    1: ("PayloadFormatIndicator", _BYTE),
    2: ("MessageExpiryInterval", _INT32),
    3: ("ContentType", _TEXT),
    8: ("ResponseTopic", _TEXT),
    9: ("CorrelationData", _BINARY),
    11: ("SubscriptionIdentifier", _VARINT),
    35: ("TopicAlias", _INT16),
    38: ("UserProperty", _PAIR),
}
_FIXED_SIZE = {_BYTE: 1, _INT16: 2, _INT32: 4}
_PUBLISH_IDS = {name: (ident, kind) for ident, (name, kind) in _PUBLISH_PROPERTIES.items()}
#: Properties that may occur more than once (paho keeps them as a list).
_REPEATABLE = frozenset(("SubscriptionIdentifier", "UserProperty"))
#: Characters MQTT forbids in a UTF-8 string, which paho reports as a malformed packet.
_FORBIDDEN_CHARS = ("\x00", "\ufeff")

#: paho's Properties tables (shared: paho only reads them), per packet type.
_TABLES = {kind: dict(vars(Properties(kind)))  # type: ignore[no-untyped-call]
           for kind in (PacketTypes.PUBLISH, PacketTypes.PUBACK, PacketTypes.PUBCOMP)}
#: What a successful PUBACK/PUBCOMP hands on_publish (read-only there), by reason code:
#: Success, and (PUBACK) No matching subscribers, which MQTT 5 brokers send for a topic
#: nobody subscribes to.
_ACK_SUCCESS: dict[tuple[str, int], ReasonCode] = {
    ("PUBACK", 0x00): ReasonCode(PacketTypes.PUBACK),
    ("PUBACK", 0x10): ReasonCode(PacketTypes.PUBACK, identifier=0x10),
    ("PUBCOMP", 0x00): ReasonCode(PacketTypes.PUBCOMP),
}


class UnusualPacket(Exception):
    """A packet the fast path leaves to paho (which decodes it, or refuses it, its way)."""


def _blank_properties(packet_type: int) -> Properties:
    """An empty paho Properties, without running its constructor."""
    props: Properties = Properties.__new__(Properties)
    vars(props).update(_TABLES[packet_type])
    return props


ACK_PROPERTIES = {"PUBACK": _blank_properties(PacketTypes.PUBACK),
                  "PUBCOMP": _blank_properties(PacketTypes.PUBCOMP)}


def _read_varint(data: bytes | bytearray, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    for _ in range(4):
        if pos >= end:
            raise UnusualPacket
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
    raise UnusualPacket


def _read_chunk(data: bytes | bytearray, pos: int, end: int) -> tuple[bytes, int]:
    """A two-byte length and that many bytes."""
    start = pos + 2
    if start > end:
        raise UnusualPacket
    stop = start + ((data[pos] << 8) | data[pos + 1])
    if stop > end:
        raise UnusualPacket
    return bytes(data[start:stop]), stop


def _read_text(data: bytes | bytearray, pos: int, end: int) -> tuple[str, int]:
    raw, pos = _read_chunk(data, pos, end)
    text = raw.decode("utf-8")  # UnicodeDecodeError: paho's, via UnusualPacket handling
    if any(c in text for c in _FORBIDDEN_CHARS):
        raise UnusualPacket
    return text, pos


def _read_property(data: bytes | bytearray, pos: int, end: int, kind: int) -> tuple[object, int]:
    if kind == _TEXT:
        return _read_text(data, pos, end)
    if kind == _PAIR:
        name, pos = _read_text(data, pos, end)
        value, pos = _read_text(data, pos, end)
        return (name, value), pos
    if kind == _BINARY:
        return _read_chunk(data, pos, end)
    if kind == _VARINT:
        return _read_varint(data, pos, end)
    size = _FIXED_SIZE[kind]
    if pos + size > end:
        raise UnusualPacket
    return int.from_bytes(data[pos:pos + size], "big"), pos + size


def _valid(name: str, value: object) -> bool:
    """The values paho's Properties refuses (it raises while decoding)."""
    if name == "PayloadFormatIndicator":
        return value in (0, 1)
    if name in ("TopicAlias", "SubscriptionIdentifier"):
        return value != 0
    return True


def _decode_properties(data: bytes | bytearray, pos: int) -> tuple[Properties, int]:
    """PUBLISH properties at `pos`: the paho Properties and the position after them."""
    length, pos = _read_varint(data, pos, len(data))
    end = pos + length
    if end > len(data):
        raise UnusualPacket
    props = _blank_properties(PacketTypes.PUBLISH)
    present = vars(props)
    while pos < end:
        spec = _PUBLISH_PROPERTIES.get(data[pos])
        if spec is None:
            raise UnusualPacket
        name, kind = spec
        value, pos = _read_property(data, pos + 1, end, kind)
        if not _valid(name, value):
            raise UnusualPacket
        if name in _REPEATABLE:
            present.setdefault(name, []).append(value)
        elif name in present:
            raise UnusualPacket
        else:
            present[name] = value
    return props, end


def decode_publish(header: int, data: bytes | bytearray, v5: bool) -> paho.MQTTMessage:
    """paho's decode_publish for a QoS 0/1 PUBLISH (variable header and payload)."""
    size = len(data)
    if size < 2:
        raise UnusualPacket
    pos = 2 + ((data[0] << 8) | data[1])
    if pos > size or (pos == 2 and not v5):
        raise UnusualPacket
    topic = bytes(data[2:pos])
    qos = (header >> 1) & 0x03
    mid = 0
    if qos:
        if pos + 2 > size:
            raise UnusualPacket
        mid = (data[pos] << 8) | data[pos + 1]
        pos += 2
    props = None
    if v5:
        props, pos = _decode_properties(data, pos)
    message = paho.MQTTMessage(mid, topic)
    message.dup = bool(header & 0x08)
    message.qos = qos
    message.retain = bool(header & 0x01)
    message.properties = props
    message.payload = bytes(data[pos:])
    return message


def ack_success(cmd: str, data: bytes | bytearray, v5: bool) -> ReasonCode | None:
    """The reason code of a PUBACK/PUBCOMP body (after the fixed header) that says
    success and carries no properties, as paho would build it; None for anything else
    (a failure, properties, a malformed body: paho's to decode)."""
    if len(data) == 2:
        code = 0
    elif v5 and (len(data) == 3 or (len(data) == 4 and data[3] == 0)):
        code = data[2]
    else:
        return None
    return _ACK_SUCCESS.get((cmd, code))


def _encode_property(ident: int, kind: int, value: object) -> bytes:
    """One property as paho's writeProperty writes it; ValueError when not encodable."""
    if kind == _BYTE and value in (0, 1):
        return bytes((ident, value))
    if kind == _INT32 and isinstance(value, int) and 0 <= value <= 0xFFFFFFFF:
        return bytes((ident,)) + value.to_bytes(4, "big")
    if kind == _TEXT:
        return bytes((ident,)) + _chunk(_utf8(value))
    if kind == _BINARY and isinstance(value, bytes):
        return bytes((ident,)) + _chunk(value)
    if kind == _PAIR and isinstance(value, tuple) and len(value) == 2:
        return bytes((ident,)) + _chunk(_utf8(value[0])) + _chunk(_utf8(value[1]))
    raise ValueError(f"invalid MQTT 5 property {ident}: {value!r}")


def _utf8(value: object) -> bytes:
    if not isinstance(value, str):
        raise ValueError(f"an MQTT string must be text, not {type(value).__name__}")
    if "\x00" in value:
        # A broker answers U+0000 by closing the connection (MQTT 5.0, 1.5.4), which
        # would fail every message in flight with this one, again on every retry.
        raise ValueError("an MQTT string cannot contain U+0000")
    return value.encode("utf-8")  # UnicodeEncodeError (a ValueError): lone surrogates


def _chunk(data: bytes) -> bytes:
    if len(data) > 0xFFFF:
        raise ValueError("an MQTT string or binary value is at most 65535 bytes")
    return len(data).to_bytes(2, "big") + data


class _PackedProperties(Properties):
    """PUBLISH properties encoded once, when made (see `publish_properties`)."""

    def pack(self) -> bytes:
        packed: bytes = vars(self)["_packed"]
        return packed


def publish_properties(**values: object) -> Properties:
    """MQTT 5 PUBLISH properties (paho attribute names; UserProperty: a list of pairs),
    encoded as paho would, once. Raises ValueError for a value MQTT cannot carry."""
    props: Properties = _PackedProperties.__new__(_PackedProperties)
    present = vars(props)
    present.update(_TABLES[PacketTypes.PUBLISH])
    body = bytearray()
    for name, (ident, kind) in _PUBLISH_IDS.items():  # paho's order
        value = values.get(name)
        if value is None:
            continue
        if kind == _PAIR:  # a list of (name, value) pairs, kept as a list as paho does
            value = _pairs(value)
            body += b"".join(_encode_property(ident, kind, pair) for pair in value)
        else:
            body += _encode_property(ident, kind, value)
        present[name] = value
    unknown = set(values) - set(_PUBLISH_IDS)
    if unknown:
        raise ValueError(f"not PUBLISH properties: {sorted(unknown)}")
    present["_packed"] = _varint(len(body)) + bytes(body)
    return props


def _pairs(value: object) -> list[tuple[object, ...]]:
    if not isinstance(value, (list, tuple)) or not all(
            isinstance(pair, (list, tuple)) for pair in value):
        raise ValueError(f"UserProperty must be a list of (name, value) pairs, not {value!r}")
    return [tuple(pair) for pair in value]


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        value, digit = divmod(value, 128)
        out.append(digit | (0x80 if value else 0))
        if not value:
            return bytes(out)
