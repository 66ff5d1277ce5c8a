"""The route's window (gateway/runtime/window.py): the no-progress clock the stall watch
reads, without a route."""

from __future__ import annotations

import time

from gateway.observability.metrics import Metrics
from gateway.runtime.stalls import Stalls
from gateway.runtime.stats import RouteStats
from gateway.runtime.window import Window


def _window(limit: int = 8) -> Window:
    metrics = Metrics()
    return Window(limit, None, RouteStats("r", "src", metrics, None, limit, []),
                  Stalls("r", metrics, 60.0))


def test_the_no_progress_clock_starts_with_the_first_in_flight_and_each_settlement() -> None:
    window = _window()
    before = time.monotonic()
    first = window.take(2)
    assert before <= window.settled_at == first  # idle until now: the clock starts here
    window.take(1)
    assert window.settled_at == first  # more in flight: still no progress since `first`
    settled = time.monotonic()
    window.free(2, first)
    assert window.inflight == 1
    assert settled <= window.settled_at <= time.monotonic()  # progress: the clock restarts
