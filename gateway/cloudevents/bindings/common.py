"""Pieces every protocol binding shares: modes, bodies, and building decoded events."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from gateway.cloudevents import datacodec, mediatype
from gateway.cloudevents.datacodec import NO_BODY, Body, NoBody
from gateway.cloudevents.errors import (
    INVALID_CLOUDEVENT,
    UNEXPECTED_BATCH,
    UNSUPPORTED_FORMAT,
    CloudEventError,
)
from gateway.cloudevents.event import CloudEvent
from gateway.cloudevents.jsonformat import event_from_json, load_json
from gateway.cloudevents.typesystem import ExtensionTypes, read_attributes
from gateway.cloudevents.validation import validate_attributes
from gateway.json.values import JSON
from gateway.record import NativeMessage

Mode: TypeAlias = Literal["structured", "binary", "batch"]
EncodeMode: TypeAlias = Literal["binary", "structured"]


@dataclass(frozen=True)
class Binding:
    """One protocol's binding, as plain functions (one module per protocol provides it)."""

    protocol: str
    detect: Callable[[NativeMessage], Mode | None]
    decode: Callable[[NativeMessage, ExtensionTypes | None], CloudEvent | None]
    encode: Callable[[CloudEvent, EncodeMode], NativeMessage]
    # A binary-mode record with one more extension attribute (name, text value), written
    # where and how this binding writes extensions. None: the binding cannot add one to
    # a record it did not encode (`with_extension` returns the record unchanged).
    extend: Callable[[NativeMessage, str, str], NativeMessage] | None = None


def record_body(record: NativeMessage) -> Body:
    if record.has_json_data:
        return record.data
    if record.payload is not None:
        return record.payload
    return NO_BODY


def body_fields(body: Body, event: CloudEvent | None = None) -> dict[str, Any]:
    """NativeMessage keyword arguments for a body: JSON goes to `data`, bytes to `payload`.

    When the body is `event`'s data and the event knows the bytes that data was parsed
    from (it was rendered from a received message), they go along as the record's `raw`:
    producers and metrics read them instead of serialising the same JSON again, and the
    body leaves as it came."""
    if isinstance(body, NoBody):
        return {}
    if isinstance(body, bytes):
        return {"payload": body}
    if event is not None and body is event.data:
        raw = event.raw
        if raw is not None and _plain_utf8(raw):
            return {"data": body, "raw": raw}
    return {"data": body}


def plain_utf8_code(name: str) -> str:
    """`_plain_utf8(name)` as a Python expression, for generated code that asks it of
    every message (`bindings/wireform.py`, `envelope/wirewriter.py`): no call."""
    return f"({name} and 0 < {name}[0] < 0x80 and (len({name}) < 2 or {name}[1] != 0))"


def _plain_utf8(raw: bytes) -> bool:
    """Whether JSON text is UTF-8 without a byte order mark: `json.loads` also reads
    UTF-16 and UTF-32 (NUL bytes among the first two) and a UTF-8 BOM, which must not be
    sent as `application/json`; every JSON text in UTF-8 starts with an ASCII character."""
    return bool(raw) and 0 < raw[0] < 0x80 and (len(raw) < 2 or raw[1] != 0)


def binary_body(event: CloudEvent) -> tuple[str | None, Body]:
    """(content type to send, body) of an event in binary mode."""
    content_type = event.datacontenttype
    data, has_data = event.data, event.has_data
    return (
        datacodec.binary_content_type(content_type, data, has_data),
        datacodec.to_body(content_type, data, has_data),
    )


def structured_message(protocol: str, fields: dict[str, JSON], event: CloudEvent) -> NativeMessage:
    """A structured-mode record: the JSON-format object is the (JSON) body."""
    return NativeMessage(protocol, fields, data=event.to_dict())


def reject_batch(protocol: str) -> CloudEvent:
    raise CloudEventError(
        UNEXPECTED_BATCH, [f"{protocol}: message is a CloudEvents batch; use decode_batch"]
    )


def structured_event(
    record: NativeMessage, content_type: str | None, extension_types: ExtensionTypes | None
) -> CloudEvent:
    """Decode a structured-mode body; only the JSON format is supported."""
    if content_type is not None and mediatype.essence(content_type) != mediatype.STRUCTURED_JSON:
        raise CloudEventError(
            UNSUPPORTED_FORMAT,
            [f"content type {content_type!r}: only {mediatype.STRUCTURED_JSON} is supported"],
        )
    body = record.data if record.has_json_data else load_json(record.payload or b"")
    return event_from_json(body, extension_types)


def sniff_structured(record: NativeMessage) -> dict[str, JSON] | None:
    """The JSON object of a body that looks like a structured event, else None.

    For bindings with no content type (MQTT 3.1.1, NATS without headers): a JSON object
    with a `specversion` member claims to be a CloudEvent; anything else is a raw message.
    """
    if record.has_json_data:
        body = record.data
    else:
        payload = record.payload
        if not payload or payload.lstrip()[:1] != b"{":  # cheap exit for non-JSON payloads
            return None
        try:
            body = load_json(payload)
        except CloudEventError:
            return None
    if isinstance(body, dict) and "specversion" in body:
        return body
    return None


def binary_event(
    raw: Mapping[str, object],
    content_type: str | None,
    record: NativeMessage,
    extension_types: ExtensionTypes | None,
    problems: list[str],
) -> CloudEvent:
    """Build a binary-mode event from wire attribute values and the record's body.

    `problems` holds what the binding already found (duplicates, undecodable headers);
    all problems are raised together.
    """
    values = dict(raw)
    if content_type is not None:
        values["datacontenttype"] = content_type
    attributes, found = read_attributes(values, extension_types)
    problems = problems + found + validate_attributes(attributes)
    if problems:
        raise CloudEventError(INVALID_CLOUDEVENT, problems)
    declared = attributes.get("datacontenttype")
    data, has_data = datacodec.from_body(
        declared if isinstance(declared, str) else None, record_body(record)
    )
    # The record's parsed body taken as is: the event keeps the bytes it came from.
    received = record.raw if record.has_json_data and data is record.data else None
    return CloudEvent.trusted(attributes, data, has_data, received)


def content_type_attribute(
    carried: str | None, attribute: object, where: str, problems: list[str]
) -> str | None:
    """Reconcile the protocol content type with a redundant `datacontenttype` attribute.

    Some senders (MQTT examples, sdk-javascript, NATS) carry both; accept that when they
    agree or when only the attribute is present.
    """
    if attribute is None:
        return carried
    if not isinstance(attribute, str):
        problems.append(f"datacontenttype: must be a string ({where})")
        return carried
    if carried is not None and carried != attribute:
        problems.append(
            f"datacontenttype: {attribute!r} ({where}) contradicts content type {carried!r}"
        )
    return carried if carried is not None else attribute
