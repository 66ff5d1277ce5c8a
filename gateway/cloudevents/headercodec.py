"""Percent-encoding of attribute values in HTTP and NATS headers (HTTP binding 3.1.3.2).

Kafka and MQTT carry raw UTF-8 and must not use this codec.
"""

from __future__ import annotations

import re

# Characters that go through unchanged: U+0021..U+007E except '"' and '%'.
_SAFE = re.compile(r"[\x21\x23\x24\x26-\x7e]*")
_HEX = frozenset("0123456789abcdefABCDEF")


class HeaderValueError(ValueError):
    """A header value that cannot be decoded (bad escape, bad quoting, invalid UTF-8)."""


# Whether a value needs no percent-encoding at all (None when it does): for callers that
# encode many values, most of them safe, without a call each.
needs_no_encoding = _SAFE.fullmatch


def encode_header_value(value: str) -> str:
    """Percent-encode space, `"`, `%` and everything outside U+0021..U+007E as UTF-8 `%XY`."""
    if _SAFE.fullmatch(value):
        return value
    out: list[str] = []
    for char in value:
        if "\x21" <= char <= "\x7e" and char not in '"%':
            out.append(char)
        else:
            # A lone surrogate raises UnicodeEncodeError (a ValueError): it has no UTF-8.
            out.extend(f"%{byte:02X}" for byte in char.encode("utf-8"))
    return "".join(out)


def decode_header_value(value: str) -> str:
    """Undo RFC 7230 quoting, then exactly one round of percent-decoding, strictly UTF-8."""
    if '"' in value:
        value = _unquote(value)
    if "%" not in value:
        return value
    raw = bytearray()
    index, length = 0, len(value)
    while index < length:
        char = value[index]
        if char == "%":
            pair = value[index + 1 : index + 3]
            if len(pair) != 2 or not (pair[0] in _HEX and pair[1] in _HEX):
                raise HeaderValueError(f"incomplete or invalid percent escape at {index}")
            raw.append(int(pair, 16))
            index += 3
        else:
            raw.extend(char.encode("utf-8", "surrogatepass"))
            index += 1
    try:
        # The strict codec rejects overlong forms, encoded surrogates and truncations.
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HeaderValueError(f"percent-decoded bytes are not UTF-8: {exc.reason}") from None


def _unquote(value: str) -> str:
    """Remove quoted-string syntax wherever it occurs; backslash escapes only inside quotes."""
    out: list[str] = []
    quoted = False
    chars = iter(value)
    for char in chars:
        if char == '"':
            quoted = not quoted
        elif char == "\\" and quoted:
            escaped = next(chars, None)
            if escaped is None:
                raise HeaderValueError("unterminated escape in quoted string")
            out.append(escaped)
        else:
            out.append(char)
    if quoted:
        raise HeaderValueError("unterminated quoted string")
    return "".join(out)
