"""The result of one write attempt of one message: what a producer hands the engine."""

from __future__ import annotations

from dataclasses import dataclass

from gateway.record import NativeMessage


@dataclass(frozen=True)
class Outcome:
    """The result of writing one message: delivered, or failed with a reason.

    `retryable` tells the engine whether sending the same message again may succeed
    (broker down, timeout) or not (rejected as malformed or unauthorized). `retry_after`
    is how long the receiver asked the sender to wait before trying again (HTTP
    `Retry-After`), in seconds; the engine waits at least that long, within its own
    retry policy. Producers never wait or retry themselves: the route owns retries.
    """

    delivered: bool
    retryable: bool = False
    reason: str | None = None
    retry_after: float | None = None
    # Request-reply (`Requester.request`): the answer the receiver sent back.
    reply: NativeMessage | None = None

    @classmethod
    def ok(cls) -> Outcome:
        return _DELIVERED

    @classmethod
    def answered(cls, reply: NativeMessage) -> Outcome:
        """Delivered, and the receiver answered with `reply`."""
        return cls(True, reply=reply)

    @classmethod
    def failed(cls, reason: str, retryable: bool = True,
               retry_after: float | None = None) -> Outcome:
        return cls(False, retryable, reason, retry_after)


_DELIVERED = Outcome(True)
