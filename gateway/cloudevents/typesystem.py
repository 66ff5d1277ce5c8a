"""The CloudEvents type system: native Python values and their canonical strings.

Attribute values are held as Python natives: str (String, URI, URI-reference), bool
(Boolean), int (Integer, 32-bit), bytes (Binary) and aware datetime (Timestamp).
String-only bindings carry canonical strings, so an extension's type is lost on the
wire; callers that know it (from xRegistry `envelopemetadata`) pass `extension_types`
to get typed values back.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Literal, TypeAlias

from gateway.cloudevents.timestamps import format_rfc3339, parse_rfc3339
from gateway.cloudevents.uri import is_uri, is_uri_reference

AttributeValue: TypeAlias = str | bool | int | bytes | datetime
AttributeType = Literal[
    "Boolean", "Integer", "String", "Binary", "URI", "URI-reference", "Timestamp"
]
ExtensionTypes: TypeAlias = Mapping[str, AttributeType]

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1

REQUIRED = ("specversion", "id", "source", "type")
# Core attributes whose value is a string on every wire; `time` is the only non-string.
CORE_STRINGS = frozenset(
    ("specversion", "id", "source", "type", "datacontenttype", "dataschema", "subject")
)
CORE = CORE_STRINGS | {"time"}

_INTEGER = re.compile(r"-?[0-9]+", re.ASCII)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def type_of(value: AttributeValue) -> AttributeType:
    """The CloudEvents type a native value stands for (str is taken as String)."""
    if isinstance(value, bool):
        return "Boolean"
    if isinstance(value, int):
        return "Integer"
    if isinstance(value, bytes):
        return "Binary"
    if isinstance(value, datetime):
        return "Timestamp"
    return "String"


def to_canonical(value: AttributeValue) -> str:
    """The canonical string form, as string-only bindings (HTTP, Kafka, MQTT, NATS) carry it."""
    if value.__class__ is datetime:
        # First: the one non-text attribute of nearly every event (its `time`), written
        # by every binary-mode output; text is passed over by those callers themselves.
        return _format_time(value)
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    return _format_time(value)


# The receive times of a burst are one datetime object (`envelope.render` reuses the
# parsed `received_at`): each output of each event writes it, so its text is remembered.
# A list holding the (time, text) pair: the generated writers read it in place
# (`bindings/wireform.py`), with no call for the time every message has.
LAST_TIME_TEXT: list[tuple[datetime | None, str]] = [(None, "")]


def _format_time(value: datetime) -> str:
    last = LAST_TIME_TEXT[0]
    if value is last[0]:
        return last[1]
    text = format_rfc3339(value)
    LAST_TIME_TEXT[0] = (value, text)
    return text


def to_json_value(value: AttributeValue) -> str | bool | int:
    """The JSON format's member value: Boolean and Integer stay native, the rest are strings."""
    if isinstance(value, (str, bool, int)):
        return value
    return to_canonical(value)


def coerce(value: object, kind: AttributeType) -> AttributeValue:
    """Convert a wire value (canonical string or native) to `kind`; ValueError if it is not one.

    Natives are accepted beside canonical strings because AMQP may carry either, and an
    AMQP Timestamp may arrive as epoch milliseconds (its native representation).
    """
    if kind == "Timestamp":
        if isinstance(value, datetime):
            if value.utcoffset() is None:
                raise ValueError("a Timestamp needs a timezone (naive datetime given)")
            return value
        if isinstance(value, str):
            return parse_rfc3339(value)
        if isinstance(value, int) and not isinstance(value, bool):
            try:
                return _EPOCH + timedelta(milliseconds=value)
            except OverflowError:
                raise ValueError(f"{value} ms since the epoch is out of range") from None
    elif kind == "Binary":
        if isinstance(value, bytes):
            return value
        if isinstance(value, str):
            try:
                return base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError):
                raise ValueError(f"{_show(value)} is not base64 (a Binary value)") from None
    elif kind == "Integer":
        if isinstance(value, str) and _INTEGER.fullmatch(value):
            value = int(value)
        if isinstance(value, int) and not isinstance(value, bool):
            if INT32_MIN <= value <= INT32_MAX:
                return value
            raise ValueError(f"{value} is outside the 32-bit Integer range")
    elif kind == "Boolean":
        if isinstance(value, bool):
            return value
        if value in ("true", "false"):
            return value == "true"
    elif isinstance(value, (str, bool, int, bytes, datetime)):
        text = to_canonical(value)
        if kind == "URI" and not is_uri(text):
            raise ValueError(f"{_show(text)} is not an absolute URI")
        if kind == "URI-reference" and not is_uri_reference(text):
            raise ValueError(f"{_show(text)} is not a URI-reference")
        return text
    raise ValueError(f"{_show(value)} is not a canonical {kind}")


def read_attributes(
    raw: Mapping[str, object], extension_types: ExtensionTypes | None = None
) -> tuple[dict[str, AttributeValue], list[str]]:
    """Turn wire or JSON attribute values into natives, collecting a problem per bad value.

    `None` means absent (the JSON format's null). Core strings must be strings; `time`
    and typed extensions are converted; an untyped extension keeps its JSON type, which
    must be String, Boolean or Integer. Value rules (ranges, syntax) are checked later by
    `validation.validate_attributes`.
    """
    attributes: dict[str, AttributeValue] = {}
    problems: list[str] = []
    for name, value in raw.items():
        if value is None:
            continue
        kind: AttributeType | None
        if name in CORE_STRINGS:
            if isinstance(value, str):
                attributes[name] = value
            else:
                problems.append(f"{name}: must be a string, got {json_kind(value)}")
            continue
        kind = "Timestamp" if name == "time" else (extension_types or {}).get(name)
        if kind is None:
            if isinstance(value, (str, bool, int, bytes, datetime)):
                attributes[name] = value
            else:
                problems.append(
                    f"{name}: an extension value must be a string, boolean or integer, "
                    f"got {json_kind(value)} {_show(value)}"
                )
            continue
        try:
            attributes[name] = coerce(value, kind)
        except ValueError as exc:
            problems.append(f"{name}: {exc}")
    return attributes, problems


def json_kind(value: object) -> str:
    """The JSON type name of a parsed value, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    return type(value).__name__


def _show(value: object, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
