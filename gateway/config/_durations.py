"""Durations as operators write them: `500ms`, `30s`, `2m`, `1h`, `1m30s`.

A unit is required: a bare `30` is seconds to one reader and milliseconds to another, and
the mistake only shows in production. Values are returned as float seconds.
"""

from __future__ import annotations

import re

_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
DURATION_FIX = "write a number with a unit: 500ms, 30s, 2m, 1h (or combined: 1m30s)"


def parse_duration(text: str) -> float | None:
    """Seconds, or None when `text` is not a duration."""
    compact = text.strip()
    if not compact:
        return None
    total = 0.0
    pos = 0
    for match in _PART.finditer(compact):
        if match.start() != pos:
            return None
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    return total if pos == len(compact) else None


def format_duration(seconds: float) -> str:
    """The shortest exact spelling, for generated docs and reprs."""
    if seconds >= 1 and seconds == int(seconds):
        whole = int(seconds)
        if whole % 3600 == 0:
            return f"{whole // 3600}h"
        if whole % 60 == 0:
            return f"{whole // 60}m"
        return f"{whole}s"
    return f"{round(seconds * 1000, 3):g}ms"
