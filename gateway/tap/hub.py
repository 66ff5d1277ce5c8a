"""The tap's one contact with the data path, and its bounded queues.

A route holds the gateway's `TapHub` and, once per batch, after the batch settled:

    if tap.attached:
        tap.offer_batch(route_name, tapped_items, redactor)

`attached` is a plain attribute, true while at least one tap is open, so a gateway
nobody taps pays one attribute check per batch. `offer_batch` never waits: each
subscriber (one `/tap` request) has a deque of at most `capacity` entries; what does not
fit is dropped and counted (`Subscription.dropped`, `xrgw_tap_dropped_total{route}`),
and the subscriber's stream says how many it lost. The entries keep the records as they
are: the JSON line, redaction included, is made by the reader's task (`line.py`).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import NamedTuple

from prometheus_client import CollectorRegistry, Counter, Gauge

from gateway.redaction.redactor import Redactor
from gateway.tap.filter import Sampler, TapFilter
from gateway.tap.item import Tapped

log = logging.getLogger("xrgw.tap")

#: Entries one subscriber may have waiting before new ones are dropped.
CAPACITY = 1000
#: The most a subscriber may ask for (`/tap?queue=N`).
MAX_CAPACITY = 100_000


class Entry(NamedTuple):
    """One tapped message on its way to a subscriber."""

    route: str
    at: datetime
    item: Tapped
    redactor: Redactor
    observe: bool


class Subscription:
    """One open tap: its filter, sampler, queue and counts."""

    def __init__(self, tap_filter: TapFilter, capacity: int = CAPACITY,
                 on_drop: Counter | None = None) -> None:
        self.filter = tap_filter
        self.sampler = Sampler(tap_filter.sample)
        self.capacity = max(1, min(capacity, MAX_CAPACITY))
        self.queue: deque[Entry] = deque()
        self.accepted = 0  # entries queued (counted against `limit`)
        self.dropped = 0  # entries that found the queue full
        self.closed = False  # the gateway stops: the stream ends
        self._on_drop = on_drop
        # Every item offered is wanted (no definition or outcome filter, no sampling).
        f = tap_filter
        self._every = not f.definitions and not f.outcomes and f.sample == 1
        self._ready = asyncio.Event()

    @property
    def full(self) -> bool:
        """The limit is reached: nothing more is queued."""
        limit = self.filter.limit
        return limit is not None and self.accepted >= limit

    @property
    def saturated(self) -> bool:
        """Every item offered now would be dropped: each is wanted, the queue is full."""
        return self._every and len(self.queue) >= self.capacity

    def offer(self, route: str, at: datetime, items: Sequence[Tapped], redactor: Redactor,
              observe: bool) -> None:
        if self.full:
            return
        if self.saturated:
            # Nothing of it can be queued, and each item would be taken: counted at once.
            self.drop(route, len(items))
            return
        wants, take, limit = self.filter.wants, self.sampler.take, self.filter.limit
        for item in items:
            if limit is not None and self.accepted >= limit:
                break
            if not wants(item) or not take():
                continue
            if len(self.queue) >= self.capacity:
                self.drop(route, 1)
                continue
            self.queue.append(Entry(route, at, item, redactor, observe))
            self.accepted += 1
        if self.queue:
            self._ready.set()

    def drop(self, route: str, count: int) -> None:
        """`count` entries found the queue full: counted, not queued."""
        self.dropped += count
        if self._on_drop is not None:
            self._on_drop.labels(route).inc(count)

    def close(self) -> None:
        self.closed = True
        self._ready.set()

    def take(self) -> list[Entry]:
        """Everything queued now (the queue is empty afterwards)."""
        entries = list(self.queue)
        self.queue.clear()
        self._ready.clear()
        return entries

    async def wait(self, timeout: float) -> bool:
        """Until something is queued (True) or `timeout` seconds passed (False)."""
        if self.queue or self.closed:
            return True
        try:
            await asyncio.wait_for(self._ready.wait(), timeout)
        except TimeoutError:
            return bool(self.queue)
        return True


class TapHub:
    """The taps of one gateway (one per process, shared by every route and reload)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.attached = False
        self.subscriptions: list[Subscription] = []
        self.errors = 0  # batches a tap failed on (logged; the route never sees it)
        self._dropped: Counter | None = None
        self._open: Gauge | None = None
        if registry is not None:
            self._dropped = Counter(
                "xrgw_tap_dropped", "Tapped messages a tap's reader was too slow for: "
                "dropped from its queue (the route never waits for a tap)", ["route"],
                registry=registry)
            self._open = Gauge("xrgw_tap_open", "Taps attached now (`/tap` streams)",
                               registry=registry)

    def subscribe(self, tap_filter: TapFilter, capacity: int = CAPACITY) -> Subscription:
        subscription = Subscription(tap_filter, capacity, self._dropped)
        self.subscriptions = [*self.subscriptions, subscription]
        self._changed()
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        self.subscriptions = [s for s in self.subscriptions if s is not subscription]
        self._changed()

    def _changed(self) -> None:
        self.attached = bool(self.subscriptions)
        if self._open is not None:
            self._open.set(len(self.subscriptions))

    def close(self) -> None:
        """End every open tap (the admin server stops)."""
        for subscription in self.subscriptions:
            subscription.close()

    def wants(self, route: str) -> bool:
        return any(s.filter.wants_route(route) and not s.full for s in self.subscriptions)

    def offer_batch(self, route: str, items: Iterable[Tapped], redactor: Redactor,
                    *, observe: bool = False, count: Callable[[], int] | None = None) -> None:
        """A settled batch of `route`: each subscriber queues what it wants of it.
        `items` is read only when some subscriber wants the route and has room (a
        generator costs nothing otherwise); `count`, when given, says how many items it
        holds without building them, so that a stalled reader's drops are counted for
        the price of a count, not of every item (the route pays it per batch)."""
        wanting = [s for s in self.subscriptions
                   if s.filter.wants_route(route) and not s.full]
        if not wanting:
            return
        if count is not None and all(s.saturated for s in wanting):
            dropped = count()
            for subscription in wanting:
                subscription.drop(route, dropped)
            return
        try:
            listed = items if isinstance(items, Sequence) else list(items)
            at = datetime.now(UTC)
            for subscription in wanting:
                subscription.offer(route, at, listed, redactor, observe)
        except Exception:  # a tap is never worth a route's batch
            self.errors += 1
            if self.errors == 1 or self.errors % 1000 == 0:
                log.exception("tap failed on a batch of %s (%d time(s)); the route goes on",
                              route, self.errors)


__all__ = ["CAPACITY", "MAX_CAPACITY", "Entry", "Subscription", "TapHub"]
