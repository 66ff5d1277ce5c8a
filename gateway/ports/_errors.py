"""The exceptions of the adapter contract: what the engine acts on when a port fails."""

from __future__ import annotations


class AdapterError(Exception):
    """Base of the adapter vocabulary."""


class NotConnected(AdapterError):
    """No usable connection; the caller should call `connect()` again after a backoff."""


class EndOfInput(AdapterError):
    """The consumer was closed or its input is exhausted; stop reading."""


class AlreadySettled(AdapterError):
    """A delivery was settled twice. Raised rather than ignored: a second settlement means
    the caller's bookkeeping is wrong (e.g. a fan-out tracker settling per part), and
    silently ignoring it would hide an ack that stands in for a failed send."""
