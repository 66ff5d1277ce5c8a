"""Strict RFC 3339 timestamps, the CloudEvents `Timestamp` type.

`datetime.fromisoformat` is not used for checking: on Python 3.11 it accepts forms RFC
3339 forbids (no seconds, hour-only offsets, basic format, naive times) and rejects
lower-case `t`/`z`, which RFC 3339 allows. A regex decides the syntax; `datetime` only
checks the calendar (days per month, leap years).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?"
    r"(?:[Zz]|([+-])(\d{2}):(\d{2}))",
    re.ASCII,  # \d must not match non-ASCII digits, which int() would happily accept
)

# Offsets seen in practice are few; reusing tzinfo objects keeps parsing cheap.
_OFFSETS: dict[tuple[str, str, str], timezone] = {}


def parse_rfc3339(text: str) -> datetime:
    """Parse an RFC 3339 date-time into an aware datetime; raise ValueError otherwise.

    Fractions beyond microseconds are truncated (datetime has no finer unit). A leap
    second (`:60`) is rejected because datetime cannot represent it.
    """
    match = _RFC3339.fullmatch(text)
    if match is None:
        raise ValueError(f"{text!r} is not an RFC 3339 timestamp (seconds and offset are required)")
    year, month, day, hour, minute, second, fraction, sign, off_h, off_m = match.groups()
    if int(hour) > 23 or int(minute) > 59:
        raise ValueError(f"{text!r} is not an RFC 3339 timestamp (time out of range)")
    if second == "60":
        raise ValueError(f"{text!r}: leap seconds are not supported")
    if int(second) > 59:
        raise ValueError(f"{text!r} is not an RFC 3339 timestamp (time out of range)")
    tz = UTC if sign is None else _offset(text, sign, off_h, off_m)
    micros = int(fraction[:6].ljust(6, "0")) if fraction else 0
    try:
        return datetime(
            int(year), int(month), int(day), int(hour), int(minute), int(second), micros, tz
        )
    except ValueError as exc:  # month 13, 30 February, year 0
        raise ValueError(f"{text!r} is not a valid RFC 3339 date ({exc})") from None


def _offset(text: str, sign: str, hours: str, minutes: str) -> timezone:
    key = (sign, hours, minutes)
    tz = _OFFSETS.get(key)
    if tz is None:
        if int(hours) > 23 or int(minutes) > 59:
            raise ValueError(f"{text!r} is not an RFC 3339 timestamp (offset out of range)")
        delta = timedelta(hours=int(hours), minutes=int(minutes))
        tz = timezone(-delta if sign == "-" else delta)
        if len(_OFFSETS) < 256:
            _OFFSETS[key] = tz
    return tz


def format_rfc3339(value: datetime) -> str:
    """Render an aware datetime as RFC 3339.

    A zero offset is written `Z`; another whole-minute offset is kept, so the producer's
    local offset survives a round trip. Microseconds appear only when non-zero, without
    trailing zeros.
    """
    offset = value.utcoffset()
    if offset is None:
        raise ValueError("a CloudEvents Timestamp needs a timezone (naive datetime given)")
    if offset.microseconds or offset.seconds % 60:
        # RFC 3339 offsets have minute resolution; fall back to UTC rather than lie.
        value = value.astimezone(UTC)
        offset = timedelta(0)
    text = (
        f"{value.year:04d}-{value.month:02d}-{value.day:02d}T"
        f"{value.hour:02d}:{value.minute:02d}:{value.second:02d}"
    )
    if value.microsecond:
        text += f".{value.microsecond:06d}".rstrip("0")
    if not offset:
        return text + "Z"
    total = int(offset.total_seconds()) // 60
    sign = "-" if total < 0 else "+"
    hours, minutes = divmod(abs(total), 60)
    return f"{text}{sign}{hours:02d}:{minutes:02d}"
