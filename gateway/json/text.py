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
