"""AMQP 1.0 binding: structured, and binary with `cloudEvents_` application properties.

The native record is JSON, which has no AMQP timestamp or binary type. We therefore
write Boolean and Integer natively and every other type as its canonical string (the
binding allows either form), so `time` keeps full precision instead of AMQP's
milliseconds. On receive a Timestamp may also arrive as epoch milliseconds (an
adapter's rendering of the native AMQP timestamp).
"""

from __future__ import annotations

from gateway.cloudevents import mediatype
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
from gateway.cloudevents.typesystem import ExtensionTypes, to_json_value
from gateway.json.values import JSON
from gateway.protocols import AMQP
from gateway.record import NativeMessage

PREFIX = "cloudEvents_"  # what we emit: JMS selectors cannot use ':'
# Consumers SHOULD accept both separators; v1.0.2 and most SDKs still send ':'.
_PREFIXES = ("cloudevents_", "cloudevents:")
_SIZE = len(PREFIX)
APPLICATION_PROPERTIES = "application-properties"


def _properties(record: NativeMessage) -> dict[str, JSON]:
    value = record.fields.get(APPLICATION_PROPERTIES)
    return value if isinstance(value, dict) else {}


def detect(record: NativeMessage) -> Mode | None:
    if mediatype.is_cloudevents(record.content_type):
        return "structured"
    for key in _properties(record):
        if key[:_SIZE].lower() in _PREFIXES and key[_SIZE:] == "specversion":
            return "binary"
    return None


def decode(record: NativeMessage, extension_types: ExtensionTypes | None) -> CloudEvent | None:
    mode = detect(record)
    if mode is None:
        return None
    content_type = record.content_type
    if mode == "structured":
        return structured_event(record, content_type, extension_types)
    problems: list[str] = []
    raw: dict[str, object] = {}
    for key, value in _properties(record).items():
        if key[:_SIZE].lower() not in _PREFIXES:
            continue
        name = key[_SIZE:]
        if name in raw:
            problems.append(f"{name}: appears more than once (both separators used)")
            continue
        raw[name] = value
    content_type = content_type_attribute(
        content_type, raw.pop("datacontenttype", None), "application property", problems
    )
    return binary_event(raw, content_type, record, extension_types, problems)


def encode(event: CloudEvent, mode: EncodeMode) -> NativeMessage:
    if mode == "structured":
        fields: dict[str, JSON] = {
            "properties": {"content-type": mediatype.STRUCTURED_JSON_CONTENT_TYPE}
        }
        return structured_message(AMQP, fields, event)
    content_type, body = binary_body(event)
    properties: dict[str, JSON] = {
        PREFIX + name: to_json_value(value)
        for name, value in event.get_attributes().items()
        if name != "datacontenttype"
    }
    fields = {APPLICATION_PROPERTIES: properties}
    if content_type is not None:
        fields["properties"] = {"content-type": content_type}
    return NativeMessage(AMQP, fields, **body_fields(body, event))


def extend(record: NativeMessage, name: str, value: str) -> NativeMessage:
    """A binary record with the extension `name` as one more application property."""
    properties = {**_properties(record), PREFIX + name: value}
    return record.replace_fields({**record.fields, APPLICATION_PROPERTIES: properties})


BINDING = Binding(AMQP, detect, decode, encode, extend)
