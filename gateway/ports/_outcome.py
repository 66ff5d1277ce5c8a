"""The result of one write attempt of one message: what a producer hands the engine."""

from __future__ import annotations

from collections.abc import Sequence
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
    `too_large`: refused for its size (over the sink's limit, `SizeLimited`), never
    retryable; the engine dead-letters it as `too-large`.
    """

    delivered: bool
    retryable: bool = False
    reason: str | None = None
    retry_after: float | None = None
    # Request-reply (`Requester.request`): the answer the receiver sent back.
    reply: NativeMessage | None = None
    too_large: bool = False

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

    @classmethod
    def oversize(cls, size: int, limit: int, what: str = "message") -> Outcome:
        """Refused before it was sent (or by the receiver) for its size: `size` bytes
        over the sink's `limit`."""
        return cls(False, False, f"{what} of {size} bytes is over the limit of {limit} bytes",
                   too_large=True)

    @classmethod
    def refused_as_too_large(cls, reason: str) -> Outcome:
        """The receiver refused the message for its size (Kafka MESSAGE_TOO_LARGE, HTTP
        413, MQTT 5 reason 0x95) and said so in `reason`."""
        return cls(False, False, reason, too_large=True)


_DELIVERED = Outcome(True)


def all_delivered(outcomes: Sequence[Outcome]) -> bool:
    """Whether each of `outcomes` is a plain delivery (no answer): one pass in C, as the
    producers hand out the one `Outcome.ok()` object (others compare by value). A
    settled batch's outcomes are looked through several times (the metrics, the
    resend order); when they all say delivered, no loop of their own is needed."""
    return outcomes.count(_DELIVERED) == len(outcomes)
