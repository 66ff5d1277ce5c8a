"""HTTP binding: structured, binary (`ce-` headers, percent-encoded values) and batch modes."""

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
    reject_batch,
    structured_event,
    structured_message,
)
from gateway.cloudevents.errors import UNSUPPORTED_FORMAT, CloudEventError
from gateway.cloudevents.event import CloudEvent
from gateway.cloudevents.jsonformat import batch_from_json, load_json
from gateway.cloudevents.typesystem import ExtensionTypes
from gateway.json.values import JSON
from gateway.protocols import HTTP
from gateway.record import NativeMessage

METHOD = "POST"
PREFIX = "ce-"
# The headers of each attribute layout, written by generated code (`unrolled`).
_UNROLLED = unrolled.Unrolled(PREFIX, percent_encode=True)
# Whole binary records of the usual events, by generated code (`wireform`).
WIRE = wireform.BinaryForm(HTTP, PREFIX, True, "content-type", fixed={"method": METHOD})


def _mode(content_type: str | None, entries: list[headers.Entry]) -> Mode | None:
    # The batch prefix must be tested first: the structured prefix also matches it.
    if mediatype.is_cloudevents_batch(content_type):
        return "batch"
    if mediatype.is_cloudevents(content_type):
        return "structured"
    return "binary" if headers.has_specversion(entries) else None


def _scan(record: NativeMessage) -> tuple[str | None, list[headers.Entry]]:
    return headers.scan(record.fields.get("headers"), PREFIX, lower_names=True)


def detect(record: NativeMessage) -> Mode | None:
    content_type, specversion = headers.peek(record.fields.get("headers"), PREFIX,
                                             lower_names=True)
    if content_type is not None and mediatype.is_cloudevents(content_type):
        # Batch or structured: the batch prefix must be tested first (see `_mode`).
        return "batch" if mediatype.is_cloudevents_batch(content_type) else "structured"
    return "binary" if specversion else None


def decode(record: NativeMessage, extension_types: ExtensionTypes | None) -> CloudEvent | None:
    content_type, entries = _scan(record)
    mode = _mode(content_type, entries)
    if mode is None:
        return None
    if mode == "batch":
        return reject_batch(HTTP)
    if mode == "structured":
        # ce- headers may be duplicated on a structured message; the body is authoritative.
        return structured_event(record, content_type, extension_types)
    problems: list[str] = []
    raw = headers.collect(entries, problems, percent_decode=True)
    # ce-datacontenttype MUST NOT be sent, but is harmless when it agrees.
    content_type = content_type_attribute(
        content_type, raw.pop("datacontenttype", None), "ce-datacontenttype", problems
    )
    return binary_event(raw, content_type, record, extension_types, problems)


def decode_batch(record: NativeMessage, extension_types: ExtensionTypes | None) -> list[CloudEvent]:
    content_type = record.content_type or ""
    if mediatype.essence(content_type) != mediatype.BATCH_JSON:
        raise CloudEventError(
            UNSUPPORTED_FORMAT,
            [f"content type {content_type!r}: only {mediatype.BATCH_JSON} is supported"],
        )
    body = record.data if record.has_json_data else load_json(record.payload or b"")
    return batch_from_json(body, extension_types)


def encode(event: CloudEvent, mode: EncodeMode) -> NativeMessage:
    if mode == "structured":
        fields: dict[str, JSON] = {
            "method": METHOD,
            "headers": [{"name": "content-type", "value": mediatype.STRUCTURED_JSON_CONTENT_TYPE}],
        }
        return structured_message(HTTP, fields, event)
    record = wireform.encode(WIRE, event)
    return record if record is not None else binary_record(event)


def binary_record(event: CloudEvent) -> NativeMessage:
    """The binary record of `event` by the binding's own steps, for what the wire form
    (`WIRE`) declines; also the reference it is held to."""
    content_type, body = binary_body(event)
    header_list = unrolled.write(_UNROLLED, event.get_attributes())
    if header_list is None:
        header_list = headers.write(event, PREFIX, percent_encode=True)
    if content_type is not None:
        header_list.append({"name": "content-type", "value": content_type})
    return NativeMessage(HTTP, {"method": METHOD, "headers": header_list},
                         **body_fields(body, event))


def encode_batch(events: list[CloudEvent]) -> NativeMessage:
    fields: dict[str, JSON] = {
        "method": METHOD,
        "headers": [{"name": "content-type", "value": mediatype.BATCH_JSON_CONTENT_TYPE}],
    }
    return NativeMessage(HTTP, fields, data=[event.to_dict() for event in events])


BINDING = Binding(HTTP, detect, decode, encode)
