"""A route's retry policy: how often a failed send is tried again, and how long to wait."""

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

    def delay(self, attempt: int) -> float:
        """The wait before retry number `attempt + 1`: full-jitter exponential backoff,
        uniform in [base/2, base], so senders that failed together spread out."""
        base = min(self.max_backoff, self.initial_backoff * (2**attempt))
        return float(base * (0.5 + random.random() / 2))
