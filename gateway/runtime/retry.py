"""A route's retry policy: how often a failed send is tried again, and how long to wait.

One owner for retries: the route's send loop. Producers make one attempt per message and
report why it failed; when the receiver named a wait (HTTP `Retry-After`, carried as
`Outcome.retry_after`), the next attempt waits at least that long, but never longer than
the policy's `max_backoff`, so one slow receiver cannot stretch the retry budget that
`routes[].retry` sets.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

__all__ = ["RetryPolicy"]


@dataclass(frozen=True)
class RetryPolicy:
    """`routes[].retry` of the configuration: sends in total (the first included), the
    wait before the first retry (doubling per retry) and the longest wait."""

    attempts: int = 5
    initial_backoff: float = 0.2
    max_backoff: float = 10.0

    def delay(self, attempt: int, at_least: float | None = None) -> float:
        """The wait before retry number `attempt + 1`: full-jitter exponential backoff,
        uniform in [base/2, base] (senders that failed together spread out), raised to
        `at_least` (the receiver's Retry-After) capped at `max_backoff`."""
        base = min(self.max_backoff, self.initial_backoff * (2**attempt))
        wait = float(base * (0.5 + random.random() / 2))
        if at_least is not None:
            wait = max(wait, min(at_least, self.max_backoff))
        return wait
