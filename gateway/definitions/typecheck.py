"""Whether a declared constant conforms to a property type (spec "Property Definitions").

Strict on purpose: these are values authors wrote in a catalog, not values read off the
wire, so `"1"` is not an integer here (the matcher is lenient for string-only bindings).

`symbol` is checked as an AMQP symbol (ASCII text), not as the Property Definitions'
"alphanumerics and underscore": the spec's own tables type AMQP `content-type` and MQTT
`content_type` as symbol and its AMQP example sets it to "application/json".
"""

from __future__ import annotations

import base64
import binascii
import re

from gateway.cloudevents.timestamps import parse_rfc3339
from gateway.jsontypes import JSON

TIME_SENTINEL = "0000-01-01T00:00:00Z"  # "the current time" (spec, Property Definitions)
STRING_TYPES = frozenset({"string", "uritemplate", "symbol", "uri", "urireference"})
_PLACEHOLDER = re.compile(r"\{[^{}]*\}")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
_DURATION = re.compile(
    r"-?P(?=\d|T\d)(\d+Y)?(\d+M)?(\d+W)?(\d+D)?(T(?=\d)(\d+H)?(\d+M)?(\d+(\.\d+)?S)?)?\Z"
)


def is_rfc3339(text: str) -> bool:
    try:
        parse_rfc3339(text)
    except ValueError:
        return False
    return True


def has_placeholder(text: str) -> bool:
    return bool(_PLACEHOLDER.search(text))


def value_problem(value: JSON, typ: str) -> str | None:
    """Why `value` is not a valid `typ` value, as a phrase ("is not an integer"), or None.
    Unknown types accept anything; the validator reports the type name itself."""
    if typ == "any":
        return None
    if typ in STRING_TYPES:
        if not isinstance(value, str):
            return "is not a string"
        if typ == "symbol" and not value.isascii():
            return "is not a symbol (ASCII characters only)"
        if typ == "uri" and not has_placeholder(value) and not _SCHEME.match(value):
            return "is not an absolute URI"
        return None
    if typ == "integer":
        return None if isinstance(value, int) and not isinstance(value, bool) else (
            "is not an integer")
    if typ == "number":
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return None if ok else "is not a number"
    if typ == "boolean":
        return None if isinstance(value, bool) else "is not a boolean (true or false)"
    if typ == "timestamp":
        ok = isinstance(value, str) and (value == TIME_SENTINEL or is_rfc3339(value))
        return None if ok else "is not an RFC 3339 timestamp"
    if typ == "duration":
        ok = isinstance(value, str) and bool(_DURATION.match(value))
        return None if ok else "is not an ISO 8601 duration (e.g. PT5M)"
    if typ == "binary":
        return None if isinstance(value, str) and _is_base64(value) else (
            "is not base64-encoded binary")
    return None


def _is_base64(text: str) -> bool:
    try:
        base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def compatible(declared: str, expected: str) -> bool:
    """Whether a declared type may stand for a protocol field's type (the spec lets
    authors narrow a type, e.g. `string` -> `uritemplate`)."""
    if declared == expected or "any" in (declared, expected):
        return True
    return declared in STRING_TYPES and expected in STRING_TYPES
