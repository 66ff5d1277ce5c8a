"""JSON text that can always be written out as UTF-8.

A JSON escape such as `"\\ud800"` parses into a lone surrogate, which has no UTF-8 form:
`json.dumps(..., ensure_ascii=False)` of a hostile record's value, written to a UTF-8
stream, raised `UnicodeEncodeError` (an `xrgw match` of one such record ended in a
traceback). Such text falls back to ASCII escapes: the same JSON value, still readable
back by any JSON parser; text without lone surrogates keeps its characters.
"""

from __future__ import annotations

import json
from collections.abc import Callable

__all__ = ["compact_text", "utf8_json"]


def utf8_json(value: object, *, indent: int | None = None,
              separators: tuple[str, str] | None = None, sort_keys: bool = False,
              default: Callable[[object], object] | None = None) -> str:
    """`json.dumps(value, ensure_ascii=False, ...)`, or its ASCII-escaped form when the
    text holds a lone surrogate."""
    text = json.dumps(value, ensure_ascii=False, indent=indent, separators=separators,
                      sort_keys=sort_keys, default=default)
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value, indent=indent, separators=separators, sort_keys=sort_keys,
                          default=default)
    return text


def _compact_slow(value: object) -> str:
    return utf8_json(value, separators=(",", ":"))


# Where orjson's text differs from `json.dumps`'s, it holds one of these (found by
# comparing the two over random values, `tests/unit/core/test_jsontext.py`): NaN and the
# infinities written as `null`; floats below 1e-4 written `0.00001` or `1e-7` where
# `json.dumps` writes `1e-05`, `1e-07`. Such a text (or one merely containing the bytes,
# in a string) is made again by `json.dumps`.
_NOT_THE_SAME = (b"null", b"0.0000", b"e-")


def _compact() -> Callable[[object], str]:
    try:
        import orjson
    except ImportError:  # pragma: no cover - orjson is a dependency
        return _compact_slow
    dumps, refused = orjson.dumps, orjson.JSONEncodeError  # a TypeError

    def compact(value: object) -> str:
        try:
            text = dumps(value)
        except refused:  # an integer beyond 64 bits, a lone surrogate, a non-str key
            return _compact_slow(value)
        for mark in _NOT_THE_SAME:
            if mark in text:
                return _compact_slow(value)
        return text.decode()

    return compact


#: `utf8_json(value, separators=(",", ":"))`, the same text, made by orjson where orjson
#: writes that text: a third of the time for a CloudEvent's JSON form (1.2 against 3.9
#: µs, measured on a loaded host), which the Spark job's Python stage writes per record.
compact_text = _compact()
