"""A route's retry policy: how often a failed send is tried again, and how long to wait.

One owner for retries: the route's send loop. Producers make one attempt per message and
report why it failed; when the receiver named a wait (HTTP `Retry-After`, carried as
`Outcome.retry_after`), the next attempt waits at least that long, but never longer than
the policy's `max_backoff`, so one slow receiver cannot stretch the retry budget that
`routes[].retry` sets.

Only *transient* failures (`Outcome.retryable`: broker unreachable, timeouts, HTTP 5xx,
429) are retried; a permanent rejection is dead-lettered at once. The default budget
is unlimited (`attempts: 0`): a transient failure is back-pressure, not a reason to
dead-letter a good message. A rolling broker restart, a Kafka leader election or a
NATS cluster upgrade takes from seconds to minutes; any fixed budget shorter than the
longest of them turns an ordinary maintenance window into dead letters that someone has
to re-drive (measured before: a 15 s Kafka outage dead-lettered 11-16 messages under the
old ~3 s budget). While the route retries, its window fills and intake stops, and after
`routes[].stall_after` the route reports itself stalled (`/readyz`,
`xrgw_route_stalled{cause="output-unavailable"}`, one log line with the error).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

__all__ = ["UNLIMITED", "RetryPolicy"]

#: `attempts` that never gives up on a transient failure.
UNLIMITED = 0
#: Doubling stops here: 2**30 times any initial backoff is past every sensible cap, and a
#: float overflows long before an unlimited retry's attempt count would.
_MAX_DOUBLINGS = 30


@dataclass(frozen=True)
class RetryPolicy:
    """`routes[].retry` of the configuration: sends in total (the first included; 0: no
    limit while the failure is transient), the wait before the first retry (doubling
    per retry) and the longest wait."""

    attempts: int = UNLIMITED
    initial_backoff: float = 0.2
    max_backoff: float = 10.0

    @property
    def unlimited(self) -> bool:
        return self.attempts == UNLIMITED

    def allows(self, attempt: int) -> bool:
        """Whether send number `attempt + 1` (counting from 0: the first send) is within
        the budget."""
        return self.unlimited or attempt < self.attempts

    def delay(self, attempt: int, at_least: float | None = None) -> float:
        """The wait before retry number `attempt + 1`: full-jitter exponential backoff,
        uniform in [base/2, base] (senders that failed together spread out), raised to
        `at_least` (the receiver's Retry-After) capped at `max_backoff`."""
        base = min(self.max_backoff,
                   self.initial_backoff * (2 ** min(attempt, _MAX_DOUBLINGS)))
        wait = float(base * (0.5 + random.random() / 2))
        if at_least is not None:
            wait = max(wait, min(at_least, self.max_backoff))
        return wait
