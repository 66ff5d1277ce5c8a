"""Structured JSON logs on stdout, one object per line, level from config or
XRGW_LOG_LEVEL.

stdout, as containers expect (`kubectl logs` and log shippers read both streams, but
only stdout is the convention every platform documents). What a log line is about goes
into its own JSON keys, not into the message text, so it can be filtered without
parsing prose:

    log.warning("endpoint not connected; retrying", extra=fields(endpoint="in", error=exc))
    {"time": ..., "level": "warning", "logger": ..., "message": "endpoint not connected;
     retrying", "endpoint": "in", "error_kind": "NotConnected", "error": "..."}
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable
from contextvars import ContextVar
from datetime import UTC, datetime

from gateway.json.text import utf8_json

#: The structured keys a log call may carry (through `fields()`), in output order;
#: `suppressed`: how many lines like this one the rate limit dropped before it.
FIELDS = ("route", "endpoint", "definition", "reason", "error_kind", "error", "file", "line",
          "column", "path", "fix", "suppressed")

#: The client libraries whose loggers speak for the adapters. Their connection trouble is
#: already the gateway's own warning, once, with the endpoint (the route's "endpoint not
#: connected"); what they add is detail: at most warning, and rate-limited.
THIRD_PARTY = ("aiokafka", "kafka", "nats", "proton", "paho", "aiohttp")
#: Seconds during which a repeated third-party line (same logger, same message template)
#: is dropped; the next one says how many were.
RATE_WINDOW = 60.0


def fields(*, route: str | None = None, endpoint: str | None = None,
           definition: str | None = None, reason: str | None = None,
           error: BaseException | str | None = None, file: str | None = None,
           path: str | None = None, fix: str | None = None, line: int | None = None,
           column: int | None = None) -> dict[str, object]:
    """`extra=` of a log call: the given keys become JSON keys of the line. An exception
    gives `error_kind` (its type) and `error` (its text)."""
    given: dict[str, object] = {
        "route": route, "endpoint": endpoint, "definition": definition, "reason": reason,
        "file": file, "path": path, "fix": fix, "line": line, "column": column,
    }
    if isinstance(error, BaseException):
        given["error_kind"] = type(error).__name__
        given["error"] = str(error)
    elif error is not None:
        given["error"] = error
    return {key: value for key, value in given.items() if value is not None}


def _structured(record: logging.LogRecord) -> dict[str, object]:
    found = {key: record.__dict__[key] for key in FIELDS if key in record.__dict__}
    if record.exc_info and record.exc_info[0] is not None and "error_kind" not in found:
        found["error_kind"] = record.exc_info[0].__name__
    return found


#: The endpoint whose client is being connected in this task: set by the route around an
#: adapter's `connect()`. The client's own tasks (aiokafka's sender and coordinator,
#: nats-py's reader) are created inside it and inherit the value, so a client library's
#: line says which endpoint it is about.
CLIENT_ENDPOINT: ContextVar[str | None] = ContextVar("xrgw_client_endpoint", default=None)


class RateGate:
    """Which repeats of a keyed event to let through: the first, then one per `window`
    seconds per key. `admit` answers how many repeats were held back since the last one
    let through (0 for a first), or None for a repeat to hold back. Shared by every
    rate-limited line (client libraries' lines here, Kafka fetch errors in the adapter),
    so "once a minute, then how many since" means the same everywhere."""

    MAX_KEYS = 1024  # a bound on what is remembered (keys are templates, partitions, kinds)

    def __init__(self, window: float = RATE_WINDOW,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.window = window
        self.clock = clock
        self._seen: dict[object, tuple[float, int]] = {}  # key: (when let through, held)

    def admit(self, key: object) -> int | None:
        now = self.clock()
        last = self._seen.get(key)
        if last is not None and now - last[0] < self.window:
            self._seen[key] = (last[0], last[1] + 1)
            return None
        if len(self._seen) >= self.MAX_KEYS:
            self._seen.clear()
        self._seen[key] = (now, 0)
        return 0 if last is None else last[1]


class ThirdPartyFilter(logging.Filter):
    """Client libraries' lines at sensible levels: an error of theirs is a warning (a
    reconnect is transient; the gateway reports what lasts), and the same line (logger +
    message template) at most once per `window` seconds, the next one carrying how many
    were dropped (`suppressed`). The gateway's own lines pass untouched."""

    def __init__(self, window: float = RATE_WINDOW,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self._gate = RateGate(window, clock)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name.partition(".")[0] not in THIRD_PARTY:
            return True
        if record.levelno > logging.WARNING:
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        endpoint = CLIENT_ENDPOINT.get()
        if endpoint is not None and "endpoint" not in record.__dict__:
            record.endpoint = endpoint
        held = self._gate.admit((record.name, str(record.msg)))
        if held is None:
            return False
        if held:
            record.suppressed = held
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat().replace(
                "+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update(_structured(record))
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return utf8_json(entry, default=str)


class TextFormatter(logging.Formatter):
    """`log.format: text`: the message, then the structured keys as key=value."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        extra = " ".join(f"{key}={value}" for key, value in _structured(record).items())
        if not extra:
            return line
        head, newline, trace = line.partition("\n")
        return f"{head} {extra}{newline}{trace}"


def configure(level: str | None = None, fmt: str = "json", *,
              override: str | None = None) -> None:
    """Log lines to stdout. The level: `override` (a command-line argument), else
    XRGW_LOG_LEVEL, else `level` (the config's), else info."""
    chosen = (override or os.environ.get("XRGW_LOG_LEVEL") or level or "info").upper()
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    handler.addFilter(ThirdPartyFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(getattr(logging, chosen, logging.INFO))
    # The client libraries' info lines (connected to a node, joined a group ...) are
    # noise beside the gateway's own; debug shows them.
    third_party = logging.DEBUG if chosen == "DEBUG" else logging.WARNING
    for name in THIRD_PARTY:
        logging.getLogger(name).setLevel(third_party)
