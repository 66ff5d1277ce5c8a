"""A record's body cut to a size, for the places that show records to people (the
conformance samples, `xrgw tap` lines): a body can be megabytes, a page or a stream
line should not be."""

from __future__ import annotations

from gateway.json.text import utf8_json
from gateway.json.values import JSONObject

#: Appended to a body that was cut, so that nobody reads it as the whole body.
ELLIPSIS = "…"


def cut_body(doc: JSONObject, limit: int) -> JSONObject:
    """`doc` (a record's JSON) with its body cut to `limit` bytes of UTF-8: a structured
    body as compact JSON text, a text body as its text, a `data_base64` body as its
    base64; `"truncated": true` when anything was cut. Changed in place."""
    data = doc.get("data")
    text: str | None = None
    if isinstance(data, str):
        text = data
    elif data is not None and not isinstance(data, int | float | bool):
        # utf8_json: a body with a lone surrogate must not raise on the message path.
        text = utf8_json(data, separators=(",", ":"))
    if text is not None:
        cut = _cut_text(text, limit)
        if cut is not None:
            doc["data"] = cut + ELLIPSIS
            doc["truncated"] = True
    encoded = doc.get("data_base64")
    if isinstance(encoded, str) and len(encoded) > limit:
        doc["data_base64"] = encoded[:limit]
        doc["truncated"] = True
    return doc


def _cut_text(text: str, limit: int) -> str | None:
    """`text` cut to at most `limit` bytes of UTF-8 (never inside a character), or None
    when it fits."""
    if len(text) * 4 <= limit:  # no character takes more than 4 bytes: it fits
        return None
    # "replace": a lone surrogate in a text body is one "?" byte, not an error.
    raw = text.encode("utf-8", "replace")
    if len(raw) <= limit:
        return None
    return raw[:limit].decode("utf-8", "ignore")


__all__ = ["ELLIPSIS", "cut_body"]
