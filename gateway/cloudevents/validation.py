"""Strict CloudEvents 1.0 validation (the checklist of the bindings digest, section 1.6).

Every check reports instead of raising, so a caller sees all problems of an event at
once; each message starts with the attribute (or member) it concerns.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from gateway.cloudevents import mediatype
from gateway.cloudevents.datacodec import EventData
from gateway.cloudevents.timestamps import format_rfc3339, parse_rfc3339
from gateway.cloudevents.typesystem import (
    CORE,
    INT32_MAX,
    INT32_MIN,
    REQUIRED,
    AttributeValue,
    ExtensionTypes,
    read_attributes,
)
from gateway.cloudevents.uri import is_uri, is_uri_reference

__all__ = [
    "format_rfc3339",
    "is_attribute_name",
    "parse_rfc3339",
    "read_json_event",
    "validate_attributes",
    "validate_data",
    "validate_event",
    "validate_json_event",
]

SPECVERSION = "1.0"
_NAME = re.compile(r"[a-z0-9]+", re.ASCII)


def is_attribute_name(name: str) -> bool:
    """`[a-z0-9]+` and not the reserved `data`."""
    return name != "data" and _NAME.fullmatch(name) is not None


def validate_attributes(attributes: Mapping[str, object]) -> list[str]:
    """Check native attribute values (see `typesystem`) against the core rules."""
    problems: list[str] = []
    for name in REQUIRED:
        if name not in attributes:
            problems.append(f"{name}: required attribute is missing")
    for name, value in attributes.items():
        check = _CORE_CHECKS.get(name)
        if check is not None:
            problem = check(name, value)
        else:
            problem = _check_name(name) or _check_extension(name, value)
        if problem is not None:
            problems.append(problem)
    return problems


def validate_data(
    data: object, has_data: bool, datacontenttype: object, deep: bool = True
) -> list[str]:
    """Data is bytes or a JSON value; a non-JSON content type needs bytes or text.

    `deep=False` skips walking a JSON value, for data that `json.loads` just produced
    (always a JSON value; the walk would cost as much as the parse).
    """
    if not has_data:
        return [] if data is None else ["data: a value was given but has_data is false"]
    if isinstance(data, bytes):
        return []
    content_type = datacontenttype if isinstance(datacontenttype, str) else None
    if not mediatype.is_json(content_type):
        if isinstance(data, str):
            return []
        return [
            f"data: must be a string or bytes for the non-JSON datacontenttype "
            f"{content_type!r}, got {type(data).__name__}"
        ]
    problem = _json_value_problem(data) if deep else None
    return [] if problem is None else [f"data: {problem}"]


def validate_event(attributes: Mapping[str, object], data: object, has_data: bool) -> list[str]:
    return validate_attributes(attributes) + validate_data(
        data, has_data, attributes.get("datacontenttype")
    )


def read_json_event(
    obj: Mapping[str, Any], extension_types: ExtensionTypes | None = None
) -> tuple[dict[str, AttributeValue], EventData, bool, list[str]]:
    """Read a JSON-format event object: (attributes, data, has_data, problems).

    This is where the JSON format's own rules live: null means absent, `data_base64` is
    strict base64 and excludes `data`, and `"data": null` is a present (null) payload.
    """
    raw = {key: value for key, value in obj.items() if key not in ("data", "data_base64")}
    attributes, problems = read_attributes(raw, extension_types)
    problems.extend(validate_attributes(attributes))
    data: EventData = None
    has_data = "data" in obj
    encoded = obj.get("data_base64")
    if encoded is not None:
        if has_data:
            problems.append("data_base64: data and data_base64 are mutually exclusive")
        elif not isinstance(encoded, str):
            problems.append("data_base64: must be a base64 string")
        else:
            try:
                data = base64.b64decode(encoded, validate=True)
                has_data = True
            except (binascii.Error, ValueError):
                problems.append("data_base64: not valid base64")
    elif has_data:
        data = obj["data"]
        problems.extend(validate_data(data, True, attributes.get("datacontenttype"), deep=False))
    return attributes, data, has_data, problems


def validate_json_event(obj: object, extension_types: ExtensionTypes | None = None) -> list[str]:
    """All problems of a parsed JSON-format event (an empty list means valid)."""
    if not isinstance(obj, dict):
        return [f"event: must be a JSON object, got {type(obj).__name__}"]
    return read_json_event(obj, extension_types)[3]


# Names seen valid; the set of extension names in traffic is small, the regex is not free.
_VALID_NAMES: set[str] = set()


def _check_name(name: object) -> str | None:
    if name in _VALID_NAMES:
        return None
    if not isinstance(name, str):
        return f"{name!r}: attribute names must be strings"
    if name == "data":
        return "data: 'data' is reserved and cannot be an attribute name"
    if _NAME.fullmatch(name) is None:
        return f"{name}: attribute names may only contain a-z and 0-9"
    if len(_VALID_NAMES) < 4096:
        _VALID_NAMES.add(name)
    return None


def _check_extension(name: str, value: object) -> str | None:
    if isinstance(value, bool | bytes):
        return None
    if isinstance(value, int):
        if INT32_MIN <= value <= INT32_MAX:
            return None
        return f"{name}: {value} is outside the 32-bit Integer range"
    if isinstance(value, str):
        return _check_string(name, value)
    if isinstance(value, datetime):
        return None if value.utcoffset() is not None else f"{name}: naive datetime"
    return f"{name}: {type(value).__name__} is not a CloudEvents attribute type"


def _check_time(name: str, value: object) -> str | None:
    if isinstance(value, datetime) and value.utcoffset() is not None:
        return None
    return f"{name}: must be a timezone-aware datetime"


def _check_text(name: str, value: object) -> str | None:
    """A core String: a string, non-empty, encodable."""
    if not isinstance(value, str):
        return f"{name}: must be a string, got {type(value).__name__}"
    if not value:
        return f"{name}: must not be empty"
    return _check_string(name, value)


def _check_specversion(name: str, value: object) -> str | None:
    if value == SPECVERSION:
        return None
    if not isinstance(value, str):
        return f"{name}: must be a string, got {type(value).__name__}"
    return f"specversion: {_short(value)} is not supported (only {SPECVERSION!r})"


def _check_syntax(rule: Callable[[str], bool], what: str) -> Callable[[str, object], str | None]:
    def check(name: str, value: object) -> str | None:
        problem = _check_text(name, value)
        if problem is None and isinstance(value, str) and not rule(value):
            return f"{name}: {_short(value)} is not {what}"
        return problem

    return check


_CORE_CHECKS: dict[str, Callable[[str, object], str | None]] = {
    "specversion": _check_specversion,
    "id": _check_text,
    "type": _check_text,
    "subject": _check_text,
    "source": _check_syntax(is_uri_reference, "a URI-reference"),
    "dataschema": _check_syntax(is_uri, "an absolute URI"),
    "datacontenttype": _check_syntax(mediatype.is_media_type, "an RFC 2046 media type"),
    "time": _check_time,
}
assert _CORE_CHECKS.keys() == CORE


def _check_string(name: str, value: str) -> str | None:
    # Unpaired surrogates (JSON allows "\ud800") cannot be written as UTF-8 by any binding.
    if value.isascii():
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return f"{name}: contains an unpaired surrogate"
    return None


def _json_value_problem(value: object, depth: int = 0) -> str | None:
    """Why `value` is not a JSON value, or None. Depth-limited like any JSON parser."""
    if depth > 500:
        return "nested too deeply"
    if value is None or isinstance(value, bool | int):
        return None
    if isinstance(value, str):
        return "contains an unpaired surrogate" if _check_string("data", value) else None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{value} is not a JSON number"
    if isinstance(value, list):
        for item in value:
            problem = _json_value_problem(item, depth + 1)
            if problem:
                return problem
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"object key {key!r} is not a string"
            problem = _json_value_problem(key, depth + 1) or _json_value_problem(item, depth + 1)
            if problem:
                return problem
        return None
    return f"{type(value).__name__} is not a JSON value"


def _short(value: str, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
