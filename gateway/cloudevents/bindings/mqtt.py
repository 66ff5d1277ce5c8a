"""MQTT bindings: 5.0 (structured, binary with bare user-property names) and 3.1.1.

MQTT 3.1.1 has no metadata, so it carries structured JSON only; on receive a JSON
object with `specversion` is taken as a CloudEvent, anything else as a raw message.
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
    sniff_structured,
    structured_event,
    structured_message,
)
from gateway.cloudevents.event import CloudEvent
from gateway.cloudevents.jsonformat import event_from_json
from gateway.cloudevents.typesystem import ExtensionTypes, to_canonical
from gateway.cloudevents.validation import is_attribute_name
from gateway.json.values import JSON
from gateway.protocols import MQTT5, MQTT311
from gateway.record import NativeMessage

# sdk-go prefixes user properties with "ce-"; the spec uses bare names. We accept both
# on input (one style per message) and emit bare names.
_GO_PREFIX = "ce-"
_GO_SPECVERSION = _GO_PREFIX + "specversion"
CONTENT_TYPE = "content_type"
USER_PROPERTIES = "user_properties"


def _prefix(record: NativeMessage) -> str | None:
    """"" for bare names, "ce-" for sdk-go's, None when no user property is a
    `specversion`. Reads the entries as `record.pairs()` does, without building that list
    of every value's text: most messages are not CloudEvents."""
    raw = record.fields.get(USER_PROPERTIES)
    if not isinstance(raw, list):
        return None
    found = None
    for entry in raw:
        if not isinstance(entry, dict):
            continue
        name = entry.get("name", "")
        if name.__class__ is not str:
            name = str(name)
        if name == "specversion":
            return ""
        if name == _GO_SPECVERSION:
            found = _GO_PREFIX
    return found


def detect5(record: NativeMessage) -> Mode | None:
    fields = record.fields
    content_type = fields.get(CONTENT_TYPE)  # `record.content_type`, read directly
    if isinstance(content_type, str) and mediatype.is_cloudevents(content_type):
        return "structured"
    # `_prefix(record) is not None`, inline: every received MQTT 5 message is asked.
    raw = fields.get(USER_PROPERTIES)
    if isinstance(raw, list):
        for entry in raw:
            if isinstance(entry, dict):
                name = entry.get("name", "")
                if name.__class__ is not str:
                    name = str(name)
                if name == "specversion" or name == _GO_SPECVERSION:
                    return "binary"
    return None


def decode5(record: NativeMessage, extension_types: ExtensionTypes | None) -> CloudEvent | None:
    content_type = record.content_type
    if mediatype.is_cloudevents(content_type):
        return structured_event(record, content_type, extension_types)
    prefix = _prefix(record)
    if prefix is None:
        return None
    problems: list[str] = []
    raw: dict[str, object] = {}
    for key, value in record.pairs("user_properties"):
        if not key.startswith(prefix):
            continue
        name = key[len(prefix) :]
        if not prefix and not is_attribute_name(name):
            # Bare names: properties that cannot be attributes are transport metadata.
            continue
        if name in raw:
            # MQTT allows repeated names; a CloudEvents attribute occurs once.
            problems.append(f"{name}: appears more than once (user property {key})")
            continue
        raw[name] = value
    content_type = content_type_attribute(
        content_type, raw.pop("datacontenttype", None), "user property", problems
    )
    return binary_event(raw, content_type, record, extension_types, problems)


def encode5(event: CloudEvent, mode: EncodeMode) -> NativeMessage:
    if mode == "structured":
        fields: dict[str, JSON] = {"content_type": mediatype.STRUCTURED_JSON_CONTENT_TYPE}
        return structured_message(MQTT5, fields, event)
    content_type, body = binary_body(event)
    # datacontenttype travels as the PUBLISH Content Type, so it is not a user property.
    fields = {
        "user_properties": [
            {"name": name, "value": value if value.__class__ is str else to_canonical(value)}
            for name, value in event.get_attributes().items()
            if name != "datacontenttype"
        ]
    }
    if content_type is not None:
        fields["content_type"] = content_type
    return NativeMessage(MQTT5, fields, **body_fields(body, event))


def detect311(record: NativeMessage) -> Mode | None:
    return "structured" if sniff_structured(record) is not None else None


def decode311(record: NativeMessage, extension_types: ExtensionTypes | None) -> CloudEvent | None:
    body = sniff_structured(record)
    return None if body is None else event_from_json(body, extension_types)


def encode311(event: CloudEvent, mode: EncodeMode) -> NativeMessage:
    if mode != "structured":
        raise ValueError(
            "MQTT 3.1.1 has no message metadata, so CloudEvents binary mode is impossible; "
            "use structured mode"
        )
    return structured_message(MQTT311, {}, event)


def extend5(record: NativeMessage, name: str, value: str) -> NativeMessage:
    """A binary record with the extension `name` as one more user property, named in
    the record's own style (bare, or sdk-go's `ce-`)."""
    pairs = [*record.pairs(USER_PROPERTIES), ((_prefix(record) or "") + name, value)]
    properties: list[JSON] = [{"name": n, "value": v} for n, v in pairs]
    return record.replace_fields({**record.fields, USER_PROPERTIES: properties})


BINDING5 = Binding(MQTT5, detect5, decode5, encode5, extend5)
BINDING311 = Binding(MQTT311, detect311, decode311, encode311)
