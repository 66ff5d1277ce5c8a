"""The route's in-flight window: messages read and not yet settled, bounded.

The intake takes slots for what it reads and waits while none is free; the settler
frees a batch's slots when its messages are settled (acked, nacked or given back). So
at most `limit` messages are between the source and their settlement, and a sink that
stops confirming stops intake: back-pressure, passed on to the broker by the adapter.
The window also keeps when a message last settled, for the `no-progress` stall, and
whether the route is stopping (no new intake, held dead letters give up).
"""

from __future__ import annotations

import asyncio
import time

from gateway.runtime.ledger import Batch
from gateway.runtime.stalls import NO_PROGRESS, Stalls
from gateway.runtime.stats import RouteStats

#: The most messages one batch takes, so that a large window still holds several batches
#: in flight (reading and converting the next while the sinks confirm the last).
MAX_BATCH = 1000


class Window:
    def __init__(self, limit: int, max_batch: int | None, stats: RouteStats,
                 stalls: Stalls) -> None:
        self.limit = limit
        # A quarter of the window per batch: up to four batches are in flight at once.
        self.max_batch = max_batch or max(1, min(MAX_BATCH, limit // 4))
        self.inflight = 0
        self.settled_at = time.monotonic()  # when a message last settled (no-progress)
        self.stopping = False
        self._stats = stats
        self._stalls = stalls
        self._room = asyncio.Event()
        self._room.set()
        self._idle = asyncio.Event()
        self._idle.set()

    async def room(self) -> int:
        """How many messages the next read may take: waits while the window is full."""
        while (free := self.limit - self.inflight) <= 0:
            self._room.clear()
            await self._room.wait()
        return min(free, self.max_batch)

    def take(self, count: int) -> float:
        """`count` messages were read; when (the start of their processing time)."""
        now = time.monotonic()
        if not self.inflight:  # the no-progress clock starts with the first in flight
            self.settled_at = now
        self.inflight += count
        self._idle.clear()
        self._stats.in_flight(self.inflight)
        return now

    def free(self, count: int, started: float) -> None:
        """`count` messages are settled: their window slots are free again."""
        now = time.monotonic()
        self._stats.processed(now - started, count)
        self._stalls.cleared(NO_PROGRESS, self._stalls.route)
        self.settled_at = now
        self.inflight -= count
        self._stats.in_flight(self.inflight)
        self._room.set()
        if self.inflight == 0:
            self._idle.set()

    def release(self, batch: Batch) -> None:
        self.free(len(batch.messages), batch.started)

    async def idle(self) -> None:
        """Until nothing is in flight."""
        await self._idle.wait()


__all__ = ["MAX_BATCH", "Window"]
