"""Durations as operators write them: `500ms`, `30s`, `2m`, `1h`, `1m30s`.

One convention everywhere: a duration with a unit is accepted by every time value. A bare
number is accepted only where the spec writes time values as numbers, and means what the
spec means: the adapters' protocol options (seconds: `publish_timeout: 10`) and Kafka's
`*_ms` options (milliseconds: `session_timeout_ms: 10000`). The gateway's own keys
(`routes[].retry.initial_backoff`, `shutdown.grace` ...) want the unit: a bare `30` is
seconds to one reader and milliseconds to another, and the mistake only shows in
production. Values are returned as float seconds (int milliseconds for `*_ms`).
"""

from __future__ import annotations

import re

_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
DURATION_FIX = "write a number with a unit: 500ms, 30s, 2m, 1h (or combined: 1m30s)"
SECONDS_FIX = ("write a number of seconds such as 10 or 0.5, or a duration with a unit "
               "such as 10s, 500ms or 2m")
MILLIS_FIX = ("write a whole number of milliseconds such as 10000, or a duration with a "
              "unit such as 10s or 500ms")


def unit_fix(value: object) -> str:
    """The fix for a bare number where a unit is wanted, naming the value itself."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
        return (f"add the unit: {value:g}s for seconds, {value:g}ms for milliseconds "
                f"(units: ms, s, m, h)")
    return DURATION_FIX


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
