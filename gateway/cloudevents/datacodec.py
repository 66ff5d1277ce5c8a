"""Event data on the wire: JSON-format members, binary-mode bodies, and content equality.

One place decides, from `datacontenttype`, how data is written and read, so the JSON
format and every binding agree (JSON format section 3.1 and its binary-mode examples).
"""

from __future__ import annotations

import base64
import json
from typing import Any, TypeAlias

from gateway.cloudevents import mediatype
from gateway.cloudevents.errors import NOT_JSON, CloudEventError
from gateway.json.values import JSON

# Data of an event: bytes (a binary payload) or a JSON value. For a non-JSON content
# type the JSON value is a str holding the text. None doubles as JSON null; `has_data`
# tells it apart from "no data".
EventData: TypeAlias = "JSON | bytes"


class NoBody:
    """Marker for "the message has no body" (a Kafka tombstone, an empty HTTP body)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NO_BODY"


NO_BODY = NoBody()
# A binary-mode body: NO_BODY, raw bytes, or a JSON value (the body is its JSON text).
Body: TypeAlias = "NoBody | bytes | JSON"


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not valid JSON")


# One decoder for all calls: `json.loads` with options builds a new one every time.
_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def loads(text: str | bytes) -> Any:
    """Strict JSON parsing: NaN and Infinity, which Python accepts, are not JSON.

    Bytes must be UTF-8 (RFC 8259 section 8.1); UnicodeDecodeError is a ValueError.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    return _DECODER.decode(text)


def dumps(value: object) -> bytes:
    """Compact UTF-8 JSON text.

    `ensure_ascii=False` keeps non-ASCII text small; a lone surrogate (legal in JSON text
    as an escape, not encodable as UTF-8) falls back to ASCII escapes instead of failing.
    """
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value, separators=(",", ":"), allow_nan=False).encode("ascii")


def json_members(data: EventData, has_data: bool) -> dict[str, JSON]:
    """The `data` / `data_base64` member of the JSON format (validated events only)."""
    if not has_data:
        return {}
    if isinstance(data, bytes):
        return {"data_base64": base64.b64encode(data).decode("ascii")}
    return {"data": data}


def binary_content_type(content_type: str | None, data: EventData, has_data: bool) -> str | None:
    """The content type a binary-mode message carries.

    JSON data without `datacontenttype` gets the implied `application/json` written
    out (spec: make the implied type explicit when changing binding); bytes without one
    get none, because a base64 payload must not be assumed to be JSON.
    """
    if content_type is None and has_data and not isinstance(data, bytes):
        return mediatype.JSON_CONTENT_TYPE
    return content_type


def to_body(content_type: str | None, data: EventData, has_data: bool) -> Body:
    """The binary-mode body. Empty data has no body (the bindings' "no data" form)."""
    if not has_data:
        return NO_BODY
    if isinstance(data, bytes):
        return data if data else NO_BODY
    if mediatype.is_json(content_type):
        return data
    # Validated events hold text for non-JSON content types.
    text = data if isinstance(data, str) else str(data)
    return text.encode("utf-8") if text else NO_BODY


def from_body(content_type: str | None, body: Body) -> tuple[EventData, bool]:
    """Data from a binary-mode body: (data, has_data).

    JSON content is parsed (a body that is not JSON stays bytes rather than failing the
    whole event: the gateway forwards data it does not understand). Text content types
    in UTF-8 become str; everything else, including a body without content type, is
    bytes. An empty body means no data.
    """
    if isinstance(body, NoBody):
        return None, False
    if not isinstance(body, bytes):
        if mediatype.is_json(content_type):
            # The record's JSON body is taken as is: re-checking it would cost a full walk.
            return body, True
        try:
            body = dumps(body)
        except ValueError:  # NaN or Infinity: a record parsed by a lenient reader
            raise CloudEventError(NOT_JSON, ["body: contains NaN or Infinity"]) from None
    if not body:
        return None, False
    if content_type is not None and mediatype.is_json(content_type):
        try:
            return loads(body), True
        except (ValueError, RecursionError):
            return body, True
    if mediatype.is_text(content_type):
        try:
            return body.decode("utf-8"), True
        except UnicodeDecodeError:
            return body, True
    return body, True


def data_equal(a: EventData, b: EventData, content_type: str | None) -> bool:
    """Equality of content, not of representation.

    The same payload can be held as bytes (from `data_base64` or a binary body) or as
    text / a JSON value (from `data`). Two data are equal when they put the same
    content on the wire: bytes against text by UTF-8, bytes against a JSON value by
    parsing the bytes when the content type is JSON.
    """
    if isinstance(a, bytes) and isinstance(b, bytes):
        return a == b
    if isinstance(a, bytes) or isinstance(b, bytes):
        raw, other = (a, b) if isinstance(a, bytes) else (b, a)
        assert isinstance(raw, bytes)
        if mediatype.is_json(content_type):
            try:
                parsed = loads(raw)
            except (ValueError, RecursionError):
                return False
            return json_equal(parsed, other)
        return isinstance(other, str) and other.encode("utf-8", "surrogatepass") == raw
    return json_equal(a, b)


def json_equal(a: object, b: object) -> bool:
    """JSON value equality that, unlike `==`, keeps `true` apart from `1`."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict):
        return (
            isinstance(b, dict)
            and a.keys() == b.keys()
            and all(json_equal(value, b[key]) for key, value in a.items())
        )
    if isinstance(a, list):
        return (
            isinstance(b, list)
            and len(a) == len(b)
            and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
        )
    if isinstance(a, (int, float)):
        return isinstance(b, (int, float)) and a == b
    return type(a) is type(b) and a == b
