"""The result of writing one message: what a producer hands the engine."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Outcome:
    """The result of writing one message: delivered, or failed with a reason.

    `retryable` tells the engine whether sending the same message again may succeed
    (broker down, timeout) or not (rejected as malformed or unauthorized).
    """

    delivered: bool
    retryable: bool = False
    reason: str | None = None

    @classmethod
    def ok(cls) -> Outcome:
        return _DELIVERED

    @classmethod
    def failed(cls, reason: str, retryable: bool = True) -> Outcome:
        return cls(False, retryable, reason)


_DELIVERED = Outcome(True)
