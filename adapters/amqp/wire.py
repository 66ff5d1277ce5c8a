"""AMQP 1.0 messages read straight from their encoded sections, for the common case.

proton's `Message.decode` walks the encoded message through proton-c's `pn_data_t`, one
cffi call per value, and every attribute `record.to_record` then reads is another: about
20 µs per message on the event loop (measured on the bench's ~300-byte message), with
the GIL handed over at each call. The sections of what brokers deliver are a handful of
simple values -- a header list, a properties list, a map or two of strings and numbers,
one data section -- which Python reads with `struct` in a fraction of that.

`sections` reads the message into the values proton's `Message` attributes give (the
same Python types: `symbol`, `timestamp`, `uuid.UUID`, bytes ...) and returns None for
anything it does not read exactly as proton does: a described value inside a section,
arrays, decimals, chars, a section out of order or repeated, more than one data section,
an amqp-sequence body, bytes left over or missing. The caller then decodes with proton, so
a record is always what `to_record(Message.decode(...))` makes of it;
`tests/unit/adapters/test_amqp_wire.py` holds the two to the same records.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any, NamedTuple

from proton import byte, float32, int32, short, symbol, timestamp, ubyte, uint, ulong, ushort

__all__ = ["Decoded", "Sections", "decoded", "sections"]


class Unreadable(Exception):
    """Something `sections` does not read as proton does: proton decodes it."""


class Sections(NamedTuple):
    """The values of one message, as proton's `Message` attributes give them."""

    header: list[Any] | None
    delivery_annotations: dict[Any, Any] | None
    message_annotations: dict[Any, Any] | None
    properties: list[Any] | None
    application_properties: dict[Any, Any] | None
    body: Any  # None also when there is no body: proton's `Message.body` says the same


_HEADER, _DELIVERY_ANN, _MESSAGE_ANN, _PROPERTIES, _APP_PROPS = 0x70, 0x71, 0x72, 0x73, 0x74
_DATA, _SEQUENCE, _VALUE, _FOOTER = 0x75, 0x76, 0x77, 0x78

_U16, _U32, _U64 = struct.Struct(">H"), struct.Struct(">I"), struct.Struct(">Q")
_I16, _I32, _I64 = struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")
_F32, _F64 = struct.Struct(">f"), struct.Struct(">d")


def sections(data: bytes) -> Sections | None:
    """The sections of an encoded message, or None: proton decodes it (see the module
    docstring)."""
    try:
        return _sections(bytes(data))
    except (Unreadable, IndexError, struct.error, ValueError):  # ValueError: UTF-8, uuid
        return None


def _sections(buf: bytes) -> Sections:
    found: dict[int, Any] = {}
    last = 0
    at = 0
    end = len(buf)
    while at < end:
        # Each section: 0x00, its descriptor (a small ulong), its value.
        if buf[at] != 0x00 or buf[at + 1] != 0x53:
            raise Unreadable
        code = buf[at + 2]
        if code <= last or not _HEADER <= code <= _FOOTER:
            raise Unreadable  # out of order, repeated (two data sections) or unknown
        if code == _SEQUENCE:
            raise Unreadable
        last = code
        value, at = _value(buf, at + 3)
        found[code] = value
    header = found.get(_HEADER)
    props = found.get(_PROPERTIES)
    if (header is not None and not isinstance(header, list)) or (
            props is not None and not isinstance(props, list)):
        raise Unreadable
    maps = [found.get(code) for code in (_DELIVERY_ANN, _MESSAGE_ANN, _APP_PROPS)]
    if any(m is not None and not isinstance(m, dict) for m in maps):
        raise Unreadable
    body = found.get(_DATA, found.get(_VALUE))
    if _DATA in found and (_VALUE in found or not isinstance(body, bytes)):
        raise Unreadable  # a data section holds binary, and is the only body
    return Sections(header, maps[0], maps[1], props, maps[2], body)


def _value(buf: bytes, at: int) -> tuple[Any, int]:
    """The value encoded at `at` and where the next one starts."""
    code = buf[at]
    at += 1
    if code == 0x40:  # null: most members of a properties list
        return None, at
    if code == 0xa1:  # str8: most strings
        end = at + 1 + buf[at]
        if end > len(buf):
            raise Unreadable  # truncated
        return buf[at + 1:end].decode(), end
    reader = _FIXED.get(code)
    if reader is not None:
        size, read = reader
        return read(buf, at), at + size
    if code == 0xa3:  # sym8
        end = at + 1 + buf[at]
        return _checked(symbol(buf[at + 1:end].decode("ascii")), end, buf)
    if code == 0xb1 or code == 0xb3:  # str32, sym32
        end = at + 4 + _U32.unpack_from(buf, at)[0]
        text = buf[at + 4:end].decode("utf-8" if code == 0xb1 else "ascii")
        return _checked(text if code == 0xb1 else symbol(text), end, buf)
    if code == 0xa0:  # vbin8
        end = at + 1 + buf[at]
        return _checked(buf[at + 1:end], end, buf)
    if code == 0xb0:  # vbin32
        end = at + 4 + _U32.unpack_from(buf, at)[0]
        return _checked(buf[at + 4:end], end, buf)
    if code == 0x45:  # list0
        return [], at
    if code == 0xc0 or code == 0xc1:  # list8, map8
        return _compound(buf, at + 2, at + 1 + buf[at], buf[at + 1], code == 0xc1)
    if code == 0xd0 or code == 0xd1:  # list32, map32
        size, count = _U32.unpack_from(buf, at)[0], _U32.unpack_from(buf, at + 4)[0]
        return _compound(buf, at + 8, at + 4 + size, count, code == 0xd1)
    raise Unreadable  # described values, arrays, decimals, chars, unknown codes


def _checked(value: Any, after: int, buf: bytes) -> tuple[Any, int]:
    if after > len(buf):
        raise Unreadable  # truncated
    return value, after


def _compound(buf: bytes, at: int, end: int, count: int,
              is_map: bool) -> tuple[Any, int]:
    items = []
    for _ in range(count):
        item, at = _value(buf, at)
        items.append(item)
    if at != end or end > len(buf):
        raise Unreadable  # the size and the items disagree
    if not is_map:
        return items, at
    if count % 2:
        raise Unreadable
    keys = items[0::2]
    if any(isinstance(k, (list, dict)) for k in keys):
        raise Unreadable  # proton's map keys are hashable
    mapped = dict(zip(keys, items[1::2], strict=True))
    if len(mapped) != len(keys):
        raise Unreadable  # a repeated key: left to proton
    return mapped, at


# The fixed-size encodings: (size, reader). Integers come as proton's own int types, so
# that the header's and properties' members can be held to the types proton-c reads them
# as (a priority must be a ubyte ...); JSON makes plain integers of them all the same.
_FIXED: dict[int, tuple[int, Any]] = {
    0x40: (0, lambda b, a: None),
    0x41: (0, lambda b, a: True),
    0x42: (0, lambda b, a: False),
    0x56: (1, lambda b, a: _bool(b[a])),
    0x43: (0, lambda b, a: uint(0)),  # uint0
    0x44: (0, lambda b, a: ulong(0)),  # ulong0
    0x50: (1, lambda b, a: ubyte(b[a])),
    0x52: (1, lambda b, a: uint(b[a])),  # smalluint
    0x53: (1, lambda b, a: ulong(b[a])),  # smallulong
    0x60: (2, lambda b, a: ushort(_U16.unpack_from(b, a)[0])),
    0x70: (4, lambda b, a: uint(_U32.unpack_from(b, a)[0])),
    0x80: (8, lambda b, a: ulong(_U64.unpack_from(b, a)[0])),
    0x51: (1, lambda b, a: byte(b[a] - 256 if b[a] > 127 else b[a])),
    0x54: (1, lambda b, a: int32(b[a] - 256 if b[a] > 127 else b[a])),  # smallint
    0x55: (1, lambda b, a: b[a] - 256 if b[a] > 127 else b[a]),  # smalllong
    0x61: (2, lambda b, a: short(_I16.unpack_from(b, a)[0])),
    0x71: (4, lambda b, a: int32(_I32.unpack_from(b, a)[0])),
    0x81: (8, lambda b, a: _I64.unpack_from(b, a)[0]),
    0x72: (4, lambda b, a: float32(_F32.unpack_from(b, a)[0])),
    0x82: (8, lambda b, a: _F64.unpack_from(b, a)[0]),
    0x83: (8, lambda b, a: timestamp(_I64.unpack_from(b, a)[0])),
    0x98: (16, lambda b, a: uuid.UUID(bytes=b[a:a + 16])),
}


def _bool(value: int) -> bool:
    if value > 1:
        raise Unreadable
    return value == 1


def decoded(data: bytes) -> Decoded | None:
    """The message encoded in `data` as `record.to_record` reads it, or None: proton
    decodes it (see the module docstring)."""
    found = sections(data)
    if found is None:
        return None
    try:
        return Decoded(found)
    except Unreadable:
        return None


_ID_TYPES = (ulong, uuid.UUID, bytes, str)  # message-id and correlation-id, exactly
_NO_SYMBOL = symbol("None")  # what proton's content_type gives for none


def _of(value: Any, kind: type) -> Any:
    """`value` when it is None or exactly of `kind` (what proton-c reads the member as)."""
    if value is not None and type(value) is not kind:
        raise Unreadable
    return value


def _c_string(value: Any, kind: type) -> Any:
    """`_of` for a member proton-c hands over as a C string (to, subject, reply-to, the
    content type and encoding, the group ids): one holding a NUL would reach Python cut
    short there, so it is left to proton."""
    if _of(value, kind) is not None and "\x00" in value:
        raise Unreadable
    return value


def _seconds(value: Any) -> float:
    """proton's `millis2secs` of a member in milliseconds (0 when absent)."""
    return float(value or 0) / 1000.0


class Decoded:
    """The attributes of proton's `Message` that `record.to_record` reads, with the values
    and types proton gives them, from the sections of one message."""

    __slots__ = ("address", "annotations", "body", "content_encoding", "content_type",
                 "correlation_id", "creation_time", "delivery_count", "durable",
                 "expiry_time", "first_acquirer", "group_id", "group_sequence", "id",
                 "instructions", "priority", "properties", "reply_to", "reply_to_group_id",
                 "subject", "ttl", "user_id")

    def __init__(self, found: Sections) -> None:
        props = found.properties or []
        header = found.header or []
        if len(props) > 13 or len(header) > 5:
            raise Unreadable
        props = props + [None] * (13 - len(props))
        header = header + [None] * (5 - len(header))
        (message_id, user_id, to, subject, reply_to, correlation_id, content_type,
         content_encoding, expiry, creation, group_id, group_sequence, reply_group) = props
        for ident in (message_id, correlation_id):
            if ident is not None and type(ident) not in _ID_TYPES:
                raise Unreadable
        self.id: Any = message_id
        self.correlation_id: Any = correlation_id
        self.user_id: bytes = _of(user_id, bytes) or b""
        self.address: str | None = _c_string(to, str)
        self.subject: str | None = _c_string(subject, str)
        self.reply_to: str | None = _c_string(reply_to, str)
        self.content_type: symbol = _c_string(content_type, symbol) or _NO_SYMBOL
        self.content_encoding: symbol = _c_string(content_encoding, symbol) or _NO_SYMBOL
        self.expiry_time = _seconds(_of(expiry, timestamp))
        self.creation_time = _seconds(_of(creation, timestamp))
        self.group_id: str | None = _c_string(group_id, str)
        sequence = _of(group_sequence, uint)
        if sequence is not None and sequence >= 2**31:
            raise Unreadable  # proton-c keeps it as a signed 32-bit number
        self.group_sequence = int(sequence or 0)
        self.reply_to_group_id: str | None = _c_string(reply_group, str)
        durable, priority, ttl, first_acquirer, delivery_count = header
        self.durable = bool(_of(durable, bool))
        self.priority = 4 if priority is None else int(_of(priority, ubyte))
        self.ttl = _seconds(_of(ttl, uint))
        self.first_acquirer = bool(_of(first_acquirer, bool))
        self.delivery_count = int(_of(delivery_count, uint) or 0)
        self.properties: dict[Any, Any] | None = found.application_properties
        self.annotations: dict[Any, Any] | None = found.message_annotations
        self.instructions: dict[Any, Any] | None = found.delivery_annotations
        self.body: Any = found.body
