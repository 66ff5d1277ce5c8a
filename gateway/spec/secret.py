"""Secrets that never print: a wrapper for passwords and header values, and URI redaction.

A config object ends up in logs, tracebacks and problem messages; the only safe secret is
one whose `repr` and `str` cannot show it. Code that needs the value asks for it by name
(`reveal()`), which makes every use easy to find in review.
"""

from __future__ import annotations

import urllib.parse

MASK = "***"


class Secret:
    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return f"Secret('{MASK}')"

    def __str__(self) -> str:
        return MASK

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


def redact_uri(uri: str) -> str:
    """`mqtt://user:pw@host` -> `mqtt://user:***@host`; other URIs unchanged.

    Operators do put credentials into URIs, and we echo URIs in problems and reprs."""
    try:
        parts = urllib.parse.urlsplit(uri)
    except ValueError:
        return uri
    if parts.password is None:
        return uri
    user, _, host = parts.netloc.rpartition("@")
    name = user.split(":", 1)[0]
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{name}:{MASK}@{host}"))
