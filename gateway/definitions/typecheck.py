"""Whether a declared constant conforms to a property type (spec "Property Definitions").

Strict on purpose: these are values authors wrote in a catalog, not values read off the
wire, so `"1"` is not an integer here (the matcher is lenient for string-only bindings).

`symbol` is the Property Definitions' "alphanumerical characters and underscores",
except for the protocol fields the spec's own tables type `symbol` to carry media types
(AMQP `content-type`/`content-encoding`, MQTT `content_type`; its AMQP example sets
"application/json"): those are AMQP symbols, ASCII text (`protocol_field=True`).
`integer` is the CloudEvents Integer, 32-bit signed, except for protocol fields with a
range of their own (MQTT message expiry, AMQP ttl are unsigned 32-bit), which the
validator checks against that range. `uri` is an absolute URI and `urireference` a URI
or relative reference (RFC 3986), as CloudEvents defines URI and URI-reference.
A string with placeholders is a template; its characters are not checked against the
type (the filled-in value is, when a message is matched or rendered).
"""

from __future__ import annotations

import base64
import binascii
import re

from gateway.cloudevents.timestamps import parse_rfc3339
from gateway.cloudevents.typesystem import INT32_MAX, INT32_MIN
from gateway.cloudevents.uri import is_uri, is_uri_reference
from gateway.json.values import JSON

TIME_SENTINEL = "0000-01-01T00:00:00Z"  # "the current time" (spec, Property Definitions)
STRING_TYPES = frozenset({"string", "uritemplate", "symbol", "uri", "urireference"})
_PLACEHOLDER = re.compile(r"\{[^{}]*\}")
_SYMBOL = re.compile(r"[A-Za-z0-9_]*\Z")
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


def value_problem(value: JSON, typ: str, *, protocol_field: bool = False,
                  own_range: bool = False) -> str | None:
    """Why `value` is not a valid `typ` value, as a phrase ("is not an integer"), or None.
    Unknown types accept anything; the validator reports the type name itself.
    `protocol_field`: the type is a protocol table's; `own_range`: the protocol gives the
    field a range of its own, checked instead of the 32-bit one (see the module doc)."""
    if typ == "any":
        return None
    if typ in STRING_TYPES:
        if not isinstance(value, str):
            return "is not a string"
        if has_placeholder(value):
            return None  # a template: the value filled in is checked
        if typ == "symbol" and protocol_field and not value.isascii():
            return "is not a symbol (ASCII characters only)"
        if typ == "symbol" and not protocol_field and not _SYMBOL.match(value):
            return "is not a symbol (letters, digits and underscore only)"
        if typ == "uri" and not is_uri(value):
            return "is not an absolute URI (RFC 3986; a relative one is a uri-reference)"
        if typ == "urireference" and not is_uri_reference(value):
            return "is not a URI reference (RFC 3986)"
        return None
    if typ == "integer":
        if not isinstance(value, int) or isinstance(value, bool):
            return "is not an integer"
        if not own_range and not INT32_MIN <= value <= INT32_MAX:
            return "is outside the 32-bit signed integer range (CloudEvents Integer)"
        return None
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
