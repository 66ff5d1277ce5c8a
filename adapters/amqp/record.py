"""AMQP 1.0 message (proton `Message`) <-> native message record, both directions, no I/O.

Run these on proton's thread: a `Message` is a proton object.

Record fields (section names of the AMQP spec, member names with dashes):
* `properties`: only the members that are present. proton cannot tell an absent
  `creation-time`/`absolute-expiry-time` from 0 or an absent `group-sequence` from 0, so
  those are left out when 0 (group-sequence is kept when a group-id is set);
* `header`: `durable`, `priority`, `first-acquirer`, `delivery-count` always (proton
  fills in the defaults of an absent header), `ttl` (milliseconds) only when set;
* `application-properties`, `message-annotations`, `delivery-annotations`: maps;
* `footer`: never present (proton's Message does not expose the footer).

Value mapping (AMQP -> JSON): timestamps become RFC 3339 strings (UTC, milliseconds,
`...Z`; outside the years 1-9999 the milliseconds as text), binary becomes a base64
string, uuid its canonical text, symbols/chars text,
lists and maps recursively, non-finite floats and other exotic types their text. Sending
maps JSON back: strings, integers (AMQP long), floats (double), booleans, null; members
with a fixed AMQP type are converted (`user-id` from base64, falling back to UTF-8 text;
`creation-time` / `absolute-expiry-time` from RFC 3339 or epoch milliseconds).
So a timestamp or binary *application property* comes back as a string: lossy, like
every JSON rendering of AMQP's richer types.

Body rule (receive), `properties.content-type` decides as for MQTT:
* data section (bytes) or amqp-value binary: the shared rule — JSON-family type ->
  `data` when it parses; no type -> `data` only for a JSON object/array; else bytes;
* amqp-value string: its UTF-8 bytes under the same rule (text stays text unless JSON);
* amqp-value map/list/number/bool (and amqp-sequence): `data` = the value as JSON;
* amqp-value null / no body: no body.
Sending always writes one data section (the record's bytes or compact JSON text) and
sets `content-type: application/json` for JSON data without a declared type.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import math
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING

from proton import Described, Message, symbol, timestamp

from adapters.amqp.wire import Decoded
from gateway.json.values import JSON
from gateway.protocols import AMQP
from gateway.record import NativeMessage
from gateway.record import is_json_media_type as is_json_type

if TYPE_CHECKING:
    from proton._data import PythonAMQPData  # the type of AMQP values; not exported

__all__ = ["is_json_type", "to_message", "to_record"]


# -------------------------------------------------------------------- AMQP -> JSON


def rfc3339(seconds: float) -> str:
    """RFC 3339 text of a time in seconds since the epoch (milliseconds kept); a time
    outside the years 1-9999, which AMQP's 64-bit milliseconds can hold and a sender can
    write, becomes its milliseconds as text (it made `to_record` raise, found by
    tests/unit/adapters/test_amqp_wire.py)."""
    try:
        moment = dt.datetime.fromtimestamp(seconds, dt.UTC)
    except (OverflowError, OSError, ValueError):
        return str(round(seconds * 1000))
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def to_json(value: object) -> JSON:
    """A JSON rendering of any decoded AMQP value (see the module docstring)."""
    if value is None or isinstance(value, (bool, str)):
        return str(value) if isinstance(value, str) else value  # symbol/char -> plain str
    if isinstance(value, timestamp):  # an int subclass: test before int
        return rfc3339(int(value) / 1000)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else str(value)
    if isinstance(value, (bytes, memoryview)):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, Mapping):
        return {str(to_json(k)): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, Described):
        return {"descriptor": to_json(value.descriptor), "value": to_json(value.value)}
    elements = getattr(value, "elements", None)  # proton Array
    if isinstance(elements, list):
        return [to_json(v) for v in elements]
    return str(value)


def _properties(msg: Message | Decoded) -> dict[str, JSON]:
    # Each Message attribute is a call into proton-c (through cffi, which releases the
    # GIL): every member is read once.
    props: dict[str, JSON] = {}

    def put(name: str, value: object) -> None:
        if value is not None and value != "":
            props[name] = to_json(value)

    put("message-id", msg.id)
    user_id = msg.user_id
    if user_id:
        put("user-id", bytes(user_id))
    put("to", msg.address)
    put("subject", msg.subject)
    put("reply-to", msg.reply_to)
    put("correlation-id", msg.correlation_id)
    # proton returns symbol("None") for an absent content type/encoding.
    content_type = msg.content_type
    if content_type != "None":
        put("content-type", content_type)
    content_encoding = msg.content_encoding
    if content_encoding != "None":
        put("content-encoding", content_encoding)
    expiry_time = msg.expiry_time
    if expiry_time:
        props["absolute-expiry-time"] = rfc3339(expiry_time)
    creation_time = msg.creation_time
    if creation_time:
        props["creation-time"] = rfc3339(creation_time)
    group_id = msg.group_id
    put("group-id", group_id)
    group_sequence = msg.group_sequence
    if group_sequence or group_id is not None:
        props["group-sequence"] = int(group_sequence)
    put("reply-to-group-id", msg.reply_to_group_id)
    return props


def _header(msg: Message | Decoded) -> dict[str, JSON]:
    header: dict[str, JSON] = {
        "durable": bool(msg.durable),
        "priority": int(msg.priority),
        "first-acquirer": bool(msg.first_acquirer),
        "delivery-count": int(msg.delivery_count),
    }
    if msg.ttl:
        header["ttl"] = round(msg.ttl * 1000)
    return header


def to_record(msg: Message | Decoded, received_at: str | None = None,
              parse: bool = True) -> NativeMessage:
    """The record of one received message (proton's, or as `wire.decoded` read it); total
    (never raises on odd input). `parse=False`: a data body is parsed when first read
    (`NativeMessage.from_wire`)."""
    props = _properties(msg)
    fields: dict[str, JSON] = {}
    if props:
        fields["properties"] = props
    for name, section in (
        ("application-properties", msg.properties),
        ("message-annotations", msg.annotations),
        ("delivery-annotations", msg.instructions),
    ):
        if section:
            fields[name] = to_json(section)
    fields["header"] = _header(msg)
    content_type = props.get("content-type")
    ctype = content_type if isinstance(content_type, str) else None
    body = msg.body
    if isinstance(body, (bytes, memoryview, str)):  # proton decodes binary as memoryview
        raw = body.encode("utf-8") if isinstance(body, str) else bytes(body)
        return NativeMessage.from_wire(AMQP, fields, raw, ctype, received_at, parse=parse)
    if body is not None:  # an amqp-value map, list or scalar is JSON data already
        return NativeMessage(AMQP, fields, to_json(body), received_at=received_at)
    return NativeMessage(AMQP, fields, received_at=received_at)


# -------------------------------------------------------------------- JSON -> AMQP


def _section(record: NativeMessage, name: str) -> dict[str, JSON]:
    value = record.get(name)
    return value if isinstance(value, dict) else {}


def _binary(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return text.encode("utf-8")


def _seconds(name: str, value: JSON) -> float:
    if isinstance(value, int) and not isinstance(value, bool):
        return value / 1000  # epoch milliseconds, AMQP's own unit
    if isinstance(value, str):
        try:
            moment = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            pass
        else:
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=dt.UTC)
            return moment.timestamp()
    raise ValueError(f"properties.{name}: expected an RFC 3339 time, got {value!r}")


def _int(section: str, name: str, value: JSON) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise ValueError(f"{section}.{name}: expected a non-negative integer, got {value!r}")


def _text(section: str, name: str, value: JSON) -> str:
    if isinstance(value, str):
        return value
    raise ValueError(f"{section}.{name}: expected a string, got {value!r}")


def _apply_properties(msg: Message, props: Mapping[str, JSON]) -> None:
    for name, value in props.items():
        if value is None:
            continue
        if name in ("message-id", "correlation-id"):
            ident: str | int
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                ident = value  # ulong
            else:
                ident = _text("properties", name, value)
            if name == "message-id":
                msg.id = ident
            else:
                msg.correlation_id = ident
        elif name == "user-id":
            msg.user_id = _binary(_text("properties", name, value))
        elif name in ("absolute-expiry-time", "creation-time"):
            seconds = _seconds(name, value)
            if name == "creation-time":
                msg.creation_time = seconds
            else:
                msg.expiry_time = seconds
        elif name == "group-sequence":
            msg.group_sequence = _int("properties", name, value)
        elif name in _TEXT_PROPERTIES:
            setattr(msg, _TEXT_PROPERTIES[name], _text("properties", name, value))
        else:
            raise ValueError(f"properties.{name}: not a member of the AMQP properties section")


_TEXT_PROPERTIES = {
    "to": "address",
    "subject": "subject",
    "reply-to": "reply_to",
    "content-type": "content_type",
    "content-encoding": "content_encoding",
    "group-id": "group_id",
    "reply-to-group-id": "reply_to_group_id",
}


def _apply_header(msg: Message, header: Mapping[str, JSON]) -> None:
    for name, value in header.items():
        if value is None:
            continue
        if name in ("durable", "first-acquirer"):
            if not isinstance(value, bool):
                raise ValueError(f"header.{name}: expected a boolean, got {value!r}")
            if name == "durable":
                msg.durable = value
            else:
                msg.first_acquirer = value
        elif name == "priority":
            msg.priority = _int("header", name, value)
        elif name == "ttl":
            msg.ttl = _int("header", name, value) / 1000
        elif name == "delivery-count":
            msg.delivery_count = _int("header", name, value)
        else:
            raise ValueError(f"header.{name}: not a member of the AMQP header section")


def _annotations(section: Mapping[str, JSON]) -> dict[str | int, PythonAMQPData]:
    # Annotation keys are symbols on the wire (proton would send strings otherwise).
    return {symbol(k): _amqp(v) for k, v in section.items()}


def _amqp(value: JSON) -> PythonAMQPData:
    # JSON values are AMQP values already; this only restates the type for mypy.
    if isinstance(value, dict):
        return {k: _amqp(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_amqp(v) for v in value]
    return value


def to_message(record: NativeMessage, default_durable: bool) -> Message:
    """A proton Message for a record; raises ValueError when the record cannot be sent."""
    msg = Message()
    msg.durable = default_durable
    _apply_header(msg, _section(record, "header"))
    props = _section(record, "properties")
    _apply_properties(msg, props)
    if record.has_json_data and "content-type" not in props:
        # Say so, so that a consumer (ours included) reads the body back as JSON.
        msg.content_type = "application/json"
    app = _section(record, "application-properties")
    if app:
        msg.properties = {k: _amqp(v) for k, v in app.items()}  # type: ignore[assignment]
    annotations = _section(record, "message-annotations")
    if annotations:
        msg.annotations = _annotations(annotations)
    instructions = _section(record, "delivery-annotations")
    if instructions:
        msg.instructions = _annotations(instructions)
    if record.has_body:
        msg.body = record.body_bytes()
        msg.inferred = True  # bytes as a data section, not an amqp-value binary
    return msg
