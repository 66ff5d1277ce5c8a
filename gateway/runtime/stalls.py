"""A route's stuck states: what `/readyz`, `xrgw_route_stalled` and the logs say when a
route stops making progress.

A *condition* is something wrong that the route noticed (an output's sends keep failing,
the dead letter refuses, reads from the source keep failing, nothing settles). It becomes
a *stall* when it has lasted `stall_after` seconds -- brief trouble (one reconnect, a
broker restart shorter than that) is ordinary back-pressure and stays quiet -- or at once
when it cannot heal by itself (the dead letter refused a letter for good). A stall:

- sets `xrgw_route_stalled{route,cause}` to 1 (every cause of every route is exported
  from the start, at 0, so an alert's expression has a series to look at);
- is logged once with its underlying error when it begins, then at most once per
  `REPEAT_SECONDS` while it lasts (with how long, and how many failures since), and once
  more when it ends -- never a line per retry;
- is listed in the `/readyz` body, and makes the route not ready.

Causes (the label's whole vocabulary), and when each ends:

- `output-unavailable`: an output's sends fail and are retried (broker down, timeouts);
  ends when the retry is confirmed.
- `deadletter-held`: the dead letter cannot take a letter, so messages are held and
  intake stops; ends when the letter is written.
- `source-failing`: reads from the source keep failing (a reconnect loop); ends when a
  read returns messages, or no read failed for `stall_after`.
- `no-progress`: messages are in flight and none has settled, and no other condition
  explains it (a wedged client); ends when one settles.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Literal

from gateway.observability.logs import fields
from gateway.observability.metrics import Metrics

log = logging.getLogger("xrgw.route")

Cause = Literal["output-unavailable", "deadletter-held", "source-failing", "no-progress"]
OUTPUT_UNAVAILABLE: Final = "output-unavailable"
DEADLETTER_HELD: Final = "deadletter-held"
SOURCE_FAILING: Final = "source-failing"
NO_PROGRESS: Final = "no-progress"
CAUSES: Final[tuple[Cause, ...]] = (OUTPUT_UNAVAILABLE, DEADLETTER_HELD, SOURCE_FAILING,
                                    NO_PROGRESS)

#: A stall that goes on is logged again at most this often.
REPEAT_SECONDS = 60.0


@dataclass
class _Condition:
    cause: Cause
    endpoint: str
    error: str
    since: float  # when it began
    last: float  # the latest failure
    failures: int = 1
    at_once: bool = False  # a stall as soon as it is noticed (cannot heal by itself)
    stalled: bool = False  # reported as a stall (metric, log)
    logged: float = 0.0  # when it was last logged


@dataclass(frozen=True)
class Stall:
    """One stall as `/readyz` shows it: no error text (it may quote a message's own
    fields); the log line has that."""

    cause: Cause
    endpoint: str
    seconds: float

    def to_json(self) -> dict[str, object]:
        return {"cause": self.cause, "endpoint": self.endpoint,
                "seconds": round(self.seconds, 1)}


class Stalls:
    """The conditions of one route and which of them are stalls."""

    def __init__(self, route: str, metrics: Metrics, stall_after: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.route = route
        self.stall_after = stall_after
        self._clock = clock
        self._conditions: dict[tuple[Cause, str], _Condition] = {}
        self._gauges = {cause: metrics.route_stalled.labels(route, cause) for cause in CAUSES}
        for gauge in self._gauges.values():
            gauge.set(0)

    # -- what the route reports --------------------------------------------------------
    def failing(self, cause: Cause, endpoint: str, error: str, *, at_once: bool = False
                ) -> None:
        """`cause` (at `endpoint`) happened (again), with `error`."""
        now = self._clock()
        key = (cause, endpoint)
        condition = self._conditions.get(key)
        if condition is None:
            condition = self._conditions[key] = _Condition(cause, endpoint, error, now, now,
                                                           at_once=at_once)
        else:
            condition.failures += 1
            condition.last = now
            condition.error = error
            condition.at_once = condition.at_once or at_once
        if at_once and not condition.stalled:
            self._begin(condition, now)

    def cleared(self, cause: Cause, endpoint: str) -> None:
        condition = self._conditions.pop((cause, endpoint), None)
        if condition is None:
            return
        if condition.stalled:
            # pragma: no mutate start
            log.info("route recovered: %s at %s ended after %.0f s", cause, endpoint,
                     self._clock() - condition.since,
                     extra=fields(route=self.route, endpoint=endpoint, reason=cause))
            # pragma: no mutate end
        self._show(cause)

    def quiet(self, cause: Cause, endpoint: str) -> None:
        """Clear `cause` at `endpoint` if it has not failed for `stall_after` (a condition
        whose end is no event of its own, e.g. reads that stopped failing)."""
        condition = self._conditions.get((cause, endpoint))
        if condition is not None and self._clock() - condition.last >= self.stall_after:
            self.cleared(cause, endpoint)

    def active(self, cause: Cause, endpoint: str) -> bool:
        return (cause, endpoint) in self._conditions

    def explained(self) -> bool:
        """Whether a condition other than `no-progress` is under way (an output or the
        dead letter failing): it explains why nothing settles."""
        return any(c.cause != NO_PROGRESS for c in self._conditions.values())

    # -- evaluation ---------------------------------------------------------------------
    def check(self) -> list[Stall]:
        """Turn conditions that lasted `stall_after` into stalls (log, metric), repeat
        the log of long ones; the stalls now."""
        now = self._clock()
        stalls = []
        for condition in list(self._conditions.values()):
            if not condition.stalled and now - condition.since >= self.stall_after:
                self._begin(condition, now)
            if not condition.stalled:
                continue
            if now - condition.logged >= REPEAT_SECONDS:
                condition.logged = now
                # pragma: no mutate start
                log.error("route still stalled: %s at %s for %.0f s (%d failure(s))",
                          condition.cause, condition.endpoint, now - condition.since,
                          condition.failures, extra=fields(
                              route=self.route, endpoint=condition.endpoint,
                              reason=condition.cause, error=condition.error))
                # pragma: no mutate end
            stalls.append(Stall(condition.cause, condition.endpoint, now - condition.since))
        return stalls

    @property
    def stalls(self) -> list[Stall]:
        """The stalls now, without evaluating (what `check` found last)."""
        now = self._clock()
        return [Stall(c.cause, c.endpoint, now - c.since)
                for c in self._conditions.values() if c.stalled]

    def _begin(self, condition: _Condition, now: float) -> None:
        condition.stalled = True
        condition.logged = now
        self._gauges[condition.cause].set(1)
        # pragma: no mutate start
        log.error("route stalled: %s at %s", condition.cause, condition.endpoint,
                  extra=fields(route=self.route, endpoint=condition.endpoint,
                               reason=condition.cause, error=condition.error))
        # pragma: no mutate end

    def _show(self, cause: Cause) -> None:
        stalled = any(c.stalled for c in self._conditions.values() if c.cause == cause)
        self._gauges[cause].set(1 if stalled else 0)

    def close(self) -> None:
        """The route is gone (stopped, replaced by a reload): its stalls end. Only the
        series it set are reset -- a reload's new route of the same name shares them."""
        for cause in {c.cause for c in self._conditions.values() if c.stalled}:
            self._gauges[cause].set(0)
        self._conditions.clear()


__all__ = ["CAUSES", "DEADLETTER_HELD", "NO_PROGRESS", "OUTPUT_UNAVAILABLE", "REPEAT_SECONDS",
           "SOURCE_FAILING", "Cause", "Stall", "Stalls"]
