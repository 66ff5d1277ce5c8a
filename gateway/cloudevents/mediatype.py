"""Media types (RFC 2046 / RFC 9110 syntax) and the classifications CloudEvents needs.

Consumers compare type, subtype and parameter names case-insensitively, so every
classification works on the lower-cased essence (`type/subtype`, parameters dropped).
"""

from __future__ import annotations

import re
from functools import lru_cache

from gateway.json import knowntypes

_TOKEN = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_QUOTED = r'"(?:[^"\\\x00-\x08\x0a-\x1f\x7f]|\\[^\x00-\x08\x0a-\x1f\x7f])*"'
_MEDIA_TYPE = re.compile(
    rf"{_TOKEN}/{_TOKEN}(?:[ \t]*;[ \t]*{_TOKEN}=(?:{_TOKEN}|{_QUOTED}))*", re.ASCII
)
_CHARSET = re.compile(r';\s*charset\s*=\s*"?([^";\s]+)', re.IGNORECASE)

JSON_CONTENT_TYPE = "application/json"
CLOUDEVENTS_PREFIX = "application/cloudevents"
CLOUDEVENTS_BATCH_PREFIX = "application/cloudevents-batch"
# What we emit in structured mode and accept as the JSON format. charset makes the body's
# encoding explicit for HTTP intermediaries that would otherwise guess.
STRUCTURED_JSON = "application/cloudevents+json"
BATCH_JSON = "application/cloudevents-batch+json"
STRUCTURED_JSON_CONTENT_TYPE = STRUCTURED_JSON + "; charset=utf-8"
BATCH_JSON_CONTENT_TYPE = BATCH_JSON + "; charset=utf-8"

_UTF8_CHARSETS = frozenset({"utf-8", "utf8", "us-ascii", "ascii"})


@lru_cache(maxsize=512)
def is_media_type(text: str) -> bool:
    """True when `text` is `type/subtype` with optional `; name=value` parameters."""
    return _MEDIA_TYPE.fullmatch(text) is not None


@lru_cache(maxsize=512)
def essence(content_type: str) -> str:
    """`Type/Sub+Json; charset=x` -> `type/sub+json`; total, for any input string."""
    return content_type.split(";", 1)[0].strip().lower()


@lru_cache(maxsize=512)
def comparable(content_type: str) -> str:
    """The form two media types are compared in: type, subtype and parameter names
    lower-cased, spaces around `;` and `=` dropped, parameter values kept
    (`TEXT/Plain; CharSet=utf-8` and `text/plain;charset=utf-8` are the same)."""
    head, *params = content_type.split(";")
    parts = [head.strip().lower()]
    for param in params:
        name, sep, value = param.partition("=")
        parts.append(f"{name.strip().lower()}{sep}{value.strip()}")
    return ";".join(parts)


@lru_cache(maxsize=512)
def is_json(content_type: str | None) -> bool:
    """The JSON format's family test: `*/json` or `*/*+json`; absent counts as JSON."""
    if content_type is None:
        return True
    main = essence(content_type)
    subtype = main.partition("/")[2]
    return subtype == "json" or subtype.endswith("+json")


@lru_cache(maxsize=512)
def is_text(content_type: str | None) -> bool:
    """Non-JSON content we hand to applications as `str`: text/*, XML, in UTF-8.

    Anything else (or a charset we would have to transcode) stays bytes, so no content
    is ever altered on its way through the gateway.
    """
    if content_type is None or is_json(content_type):
        return False
    main = essence(content_type)
    kind, _, subtype = main.partition("/")
    if not (kind == "text" or subtype == "xml" or subtype.endswith("+xml")):
        return False
    charset = _CHARSET.search(content_type)
    return charset is None or charset.group(1).lower() in _UTF8_CHARSETS


def is_cloudevents(content_type: str | None) -> bool:
    """Structured-mode (or batch) marker, compared case-insensitively. Asked of every
    received record with a content type: each type's answer is kept (`knowntypes`)."""
    if content_type is None:
        return False
    known = _CLOUDEVENTS.get(content_type)
    if known is None:
        known = essence(content_type).startswith(CLOUDEVENTS_PREFIX)
        knowntypes.keep(_CLOUDEVENTS, content_type, known)
    return known


_CLOUDEVENTS: dict[str, bool] = {}


def is_cloudevents_batch(content_type: str | None) -> bool:
    return content_type is not None and essence(content_type).startswith(CLOUDEVENTS_BATCH_PREFIX)
