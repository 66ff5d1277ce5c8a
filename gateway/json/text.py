"""JSON text that can always be written out as UTF-8.

A JSON escape such as `"\\ud800"` parses into a lone surrogate, which has no UTF-8 form:
`json.dumps(..., ensure_ascii=False)` of a hostile record's value, written to a UTF-8
stream, raised `UnicodeEncodeError` (an `xrgw match` of one such record ended in a
traceback). Such text falls back to ASCII escapes: the same JSON value, still readable
back by any JSON parser; text without lone surrogates keeps its characters.
"""

from __future__ import annotations

import json
import re
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


# Where orjson's text differs from `json.dumps`'s (found by comparing the two over random
# values, `tests/unit/core/test_jsontext.py`): NaN and the infinities written as `null`;
# floats below 1e-4 written `0.00001` where `json.dumps` writes `1e-05`; and a negative
# exponent of one digit, `1e-7` where `json.dumps` writes `1e-07` (two digits or more,
# `1.5e-10`, are the same in both). Such a text (or one merely containing the bytes, in a
# string) is made again by `json.dumps`.
_NOT_THE_SAME = (b"null", b"0.0000")
# A one-digit negative exponent: a digit, `e-`, one digit, then no digit. A plain search
# for `e-` sent a quarter of all CloudEvents to `json.dumps`, for a random `id`'s hex
# (`...f7e-4307...`), 2.6 against 0.6 µs per event. The pattern starts with its literal,
# which `re` searches for fast (with the digit before it in the pattern, the search took
# 1.4 µs per event); the digit before is checked per match, and a hex group that still
# matches (`7e-4a07`) merely costs the slower text.
_E_DIGIT = re.compile(rb"e-[0-9](?![0-9])")


def _short_exponent(text: bytes) -> bool:
    """Whether orjson's `text` may hold a float with a one-digit negative exponent."""
    for found in _E_DIGIT.finditer(text):
        at = found.start()
        if at and 0x30 <= text[at - 1] <= 0x39:
            return True
    return False


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
        if b"e-" in text and _short_exponent(text):
            return _compact_slow(value)
        return text.decode()

    return compact


#: `utf8_json(value, separators=(",", ":"))`, the same text, made by orjson where orjson
#: writes that text: a third of the time for a CloudEvent's JSON form (1.2 against 3.9
#: µs, measured on a loaded host), which the Spark job's Python stage writes per record.
compact_text = _compact()
