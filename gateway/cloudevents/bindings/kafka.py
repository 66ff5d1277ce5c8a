"""Kafka binding: structured and binary (`ce_` headers, raw UTF-8, no percent-encoding).

Record key: the opt-in `partitionkey` mapper of the partitioning extension is applied
on encode (the attribute is still sent as `ce_partitionkey`). On decode the key is left
alone: turning a key into `partitionkey` would add an attribute the sender never set.
"""

from __future__ import annotations

from typing import Literal

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
    structured_event,
    structured_message,
)
from gateway.cloudevents.event import CloudEvent
from gateway.cloudevents.typesystem import ExtensionTypes, to_canonical
from gateway.json.values import JSON
from gateway.protocols import KAFKA
from gateway.record import UNDETECTED, NativeMessage

PREFIX = "ce_"
_PREFIX_SIZE = len(PREFIX)
_MARKER_SIZE = len(PREFIX + "specversion")
# The headers of each attribute layout, written by generated code (`unrolled`).
_UNROLLED = unrolled.Unrolled(PREFIX, percent_encode=False)
CONTENT_TYPE = "content-type"
# Whole binary records of the usual events, by generated code (`wireform`).
WIRE = wireform.BinaryForm(KAFKA, PREFIX, False, CONTENT_TYPE, key_field="key", pairs=True,
                             utf8=True, typed_pairs=True)


def _mode(content_type: str | None, entries: list[headers.Entry]) -> Mode | None:
    if mediatype.is_cloudevents(content_type):
        return "structured"
    return "binary" if headers.has_specversion(entries) else None


def _scan(record: NativeMessage) -> tuple[str | None, list[headers.Entry]]:
    return headers.scan(record.fields.get("headers"), PREFIX, lower_names=False)


def detect(record: NativeMessage) -> Mode | None:
    marked = record.event_mode  # what the adapter saw reading the headers (`event_mode`)
    if marked is None:
        return None
    if marked != UNDETECTED:
        return "binary" if marked == "binary" else "structured"
    content_type, specversion = headers.peek(record.fields.get("headers"), PREFIX,
                                             lower_names=False)
    return mode_of(content_type, specversion)


def mode_of(content_type: str | None,
            specversion: bool) -> Literal["structured", "binary"] | None:
    """A record's mode from its content type and whether it has the binary-mode marker
    (`is_marker`): what `detect` looks for, and what the adapter tells it
    (`NativeMessage.event_mode`) after its own pass over the headers."""
    if content_type is not None and mediatype.is_cloudevents(content_type):
        return "structured"
    return "binary" if specversion else None


def is_marker(name: str) -> bool:
    """Whether a header `name` is the binary-mode marker (`ce_specversion`, the prefix
    in any case, as `headers.peek` reads it); a length comparison for the usual one."""
    return (len(name) == _MARKER_SIZE and name[_PREFIX_SIZE:] == "specversion"
            and name[:_PREFIX_SIZE].lower() == PREFIX)


def decode(record: NativeMessage, extension_types: ExtensionTypes | None) -> CloudEvent | None:
    content_type, entries = _scan(record)
    mode = _mode(content_type, entries)
    if mode is None:
        return None
    if mode == "structured":
        return structured_event(record, content_type, extension_types)
    problems: list[str] = []
    raw = headers.collect(entries, problems, percent_decode=False)
    # The binding neither requires nor forbids ce_datacontenttype (sdk-javascript sends it).
    content_type = content_type_attribute(
        content_type, raw.pop("datacontenttype", None), "ce_datacontenttype", problems
    )
    return binary_event(raw, content_type, record, extension_types, problems)


def encode(event: CloudEvent, mode: EncodeMode) -> NativeMessage:
    if mode == "structured":
        fields = _keyed(event)
        fields["headers"] = [
            {"name": CONTENT_TYPE, "value": mediatype.STRUCTURED_JSON_CONTENT_TYPE}
        ]
        return structured_message(KAFKA, fields, event)
    record = wireform.encode(WIRE, event)
    return record if record is not None else binary_record(event)


def _keyed(event: CloudEvent) -> dict[str, JSON]:
    """A record's fields with its key: the event's `partitionkey`, if it has one."""
    fields: dict[str, JSON] = {}
    key = event.get("partitionkey")
    if key is not None:
        fields["key"] = to_canonical(key)
    return fields


def binary_record(event: CloudEvent) -> NativeMessage:
    """The binary record of `event` by the binding's own steps, for what the wire form
    (`WIRE`) declines; also the reference it is held to."""
    fields = _keyed(event)
    content_type, body = binary_body(event)
    # The producer's form of the headers is made here, in the same pass: the values are
    # at hand now, while the producer reaches the record only after the rest of its
    # batch is rendered (and was measured spending as long again re-reading them).
    pairs: list[tuple[str, str]] = []
    utf8: list[tuple[str, bytes]] = []
    header_list = unrolled.write(_UNROLLED, event.get_attributes(), pairs, utf8)
    if header_list is None:
        header_list = headers.write(event, PREFIX, percent_encode=False, pairs=pairs,
                                    utf8=utf8)
    if content_type is not None:
        header_list.append({"name": CONTENT_TYPE, "value": content_type})
        pairs.append((CONTENT_TYPE, content_type))
        utf8.append((CONTENT_TYPE, content_type.encode()))
    fields["headers"] = header_list
    # No data -> no body: a null-value record (a tombstone on compacted topics).
    record = NativeMessage(KAFKA, fields, **body_fields(body, event))
    record.set_encoded_headers(pairs, content_type is not None, utf8)
    return record


def extend(record: NativeMessage, name: str, value: str) -> NativeMessage:
    """A binary record with the extension `name` as one more `ce_` header."""
    header_list: list[JSON] = [{"name": n, "value": v} for n, v in record.pairs("headers")]
    header_list.append({"name": PREFIX + name, "value": value})
    return record.replace_fields({**record.fields, "headers": header_list})


BINDING = Binding(KAFKA, detect, decode, encode, extend)
