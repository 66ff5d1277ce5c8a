"""NATS binding: structured, and binary (NATS 2.2+ headers) with `ce-` headers.

Unlike HTTP, `datacontenttype` is a `ce-datacontenttype` header too; we also read a
plain `Content-Type` (sdk-go JetStream sends that). A message without headers (or
without both Content-Type and ce-specversion) may be a pre-2.2 structured event, so
its payload is tried as JSON.
"""

from __future__ import annotations

from gateway.cloudevents import mediatype
from gateway.cloudevents.bindings import headers, unrolled, wireform
from gateway.cloudevents.bindings.common import (
    Binding,
    EncodeMode,
    Mode,
    binary_body,
    binary_event,
    body_fields,
    content_type_attribute,
    sniff_structured,
    structured_event,
    structured_message,
)
from gateway.cloudevents.event import CloudEvent
from gateway.cloudevents.headercodec import encode_header_value
from gateway.cloudevents.jsonformat import event_from_json
from gateway.cloudevents.typesystem import ExtensionTypes
from gateway.json.values import JSON
from gateway.protocols import NATS
from gateway.record import UNDETECTED, EventMode, NativeMessage

PREFIX = "ce-"
_MARKER = PREFIX + "specversion"
_MARKER_SIZE = len(_MARKER)
# The headers of each attribute layout, written by generated code (`unrolled`).
_UNROLLED = unrolled.Unrolled(PREFIX, percent_encode=True)
# Whole binary records of the usual events, by generated code (`wireform`).
WIRE = wireform.BinaryForm(NATS, PREFIX, True, "ce-datacontenttype", pairs=True, lines=True)


def _scan(record: NativeMessage) -> tuple[str | None, list[headers.Entry]]:
    return headers.scan(record.fields.get("headers"), PREFIX, lower_names=True)


def detect(record: NativeMessage) -> Mode | None:
    mode = record.event_mode  # what the adapter saw reading the headers (`event_mode`)
    if mode == UNDETECTED:
        content_type, specversion = headers.peek(record.fields.get("headers"), PREFIX,
                                                 lower_names=True)
        mode = mode_of(content_type, specversion)
    if mode == UNDETECTED:  # only the body can tell
        return "structured" if sniff_structured(record) is not None else None
    if mode is None:
        return None
    return "binary" if mode == "binary" else "structured"


def mode_of(content_type: str | None, specversion: bool) -> EventMode:
    """A message's mode from its content type and whether it has the binary-mode marker
    (`is_marker`); `UNDETECTED` where neither is there and only its body can tell (a
    structured event from before NATS 2.2 headers). What `detect` looks for, and what the
    adapter tells it (`NativeMessage.event_mode`) after its own pass over the headers."""
    if content_type is not None and mediatype.is_cloudevents(content_type):
        return "structured"
    if specversion:
        return "binary"
    return None if content_type is not None else UNDETECTED


def is_marker(name: str) -> bool:
    """Whether a header `name` is the binary-mode marker (`ce-specversion` in any case,
    as `headers.peek` reads it); a length comparison for the usual one."""
    return len(name) == _MARKER_SIZE and name.lower() == _MARKER


def decode(record: NativeMessage, extension_types: ExtensionTypes | None) -> CloudEvent | None:
    content_type, entries = _scan(record)
    if mediatype.is_cloudevents(content_type):
        return structured_event(record, content_type, extension_types)
    if not headers.has_specversion(entries):
        if content_type is not None:
            return None
        body = sniff_structured(record)
        return None if body is None else event_from_json(body, extension_types)
    problems: list[str] = []
    raw = headers.collect(entries, problems, percent_decode=True)
    content_type = content_type_attribute(
        content_type, raw.pop("datacontenttype", None), "ce-datacontenttype", problems
    )
    return binary_event(raw, content_type, record, extension_types, problems)


def encode(event: CloudEvent, mode: EncodeMode) -> NativeMessage:
    if mode == "structured":
        fields: dict[str, JSON] = {
            "headers": [{"name": "Content-Type", "value": mediatype.STRUCTURED_JSON_CONTENT_TYPE}]
        }
        return structured_message(NATS, fields, event)
    record = wireform.encode(WIRE, event)
    return record if record is not None else binary_record(event)


def binary_record(event: CloudEvent) -> NativeMessage:
    """The binary record of `event` by the binding's own steps, for what the wire form
    (`WIRE`) declines; also the reference it is held to."""
    content_type, body = binary_body(event)
    # The producer's (name, value) pairs are made in the same pass (see
    # `NativeMessage.encoded_headers`); no `content-type` among them: the binding
    # carries the content type as `ce-datacontenttype`.
    pairs: list[tuple[str, str]] = []
    header_list = unrolled.write(_UNROLLED, event.get_attributes(), pairs)
    if header_list is None:
        header_list = headers.write(event, PREFIX, percent_encode=True, pairs=pairs)
    if content_type is not None:
        value = encode_header_value(content_type)
        header_list.append({"name": "ce-datacontenttype", "value": value})
        pairs.append(("ce-datacontenttype", value))
    record = NativeMessage(NATS, {"headers": header_list}, **body_fields(body, event))
    record.set_encoded_headers(pairs, typed=False)
    return record


def extend(record: NativeMessage, name: str, value: str) -> NativeMessage:
    """A binary record with the extension `name` as one more `ce-` header."""
    header_list: list[JSON] = [{"name": n, "value": v} for n, v in record.pairs("headers")]
    header_list.append({"name": PREFIX + name, "value": encode_header_value(value)})
    return record.replace_fields({**record.fields, "headers": header_list})


BINDING = Binding(NATS, detect, decode, encode, extend)
