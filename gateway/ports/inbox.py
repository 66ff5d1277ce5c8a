"""A consumer's inbox: the `read_batch` wait the push-based consumers share (MQTT, AMQP,
NATS, the HTTP ingress), so each writes only how a message arrives and how it is handed
out.

Messages the client library pushes go into `buffer`; `read_batch` hands out as many as
the caller asks for and the in-flight window allows (`max_in_flight` minus the deliveries
handed out and not yet settled), waits while there are none, and speaks the contract's
vocabulary: a closed inbox is `EndOfInput`, an empty one without a connection is
`NotConnected`. Whoever changes what the wait depends on (a message arrived, a delivery
settled, the connection came or went) calls `wake()` — `put`, `settled` and `close` do.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

from gateway.ports._errors import EndOfInput, NotConnected

__all__ = ["Inbox", "InboxCounts"]

T = TypeVar("T")
D = TypeVar("D")


class Inbox(Generic[T]):
    """Received items of type `T` waiting to be handed out, and the count of handed-out
    deliveries not yet settled. `max_in_flight=None`: no window (the HTTP ingress bounds
    what can wait by refusing requests instead), and nothing is counted."""

    def __init__(self, max_in_flight: int | None = None) -> None:
        self.buffer: deque[T] = deque()
        self.unsettled = 0
        self.closed = False
        self.max_in_flight = max_in_flight
        self._changed = asyncio.Event()

    def put(self, item: T) -> None:
        self.buffer.append(item)
        self._changed.set()

    def extend(self, items: Iterable[T]) -> None:
        self.buffer.extend(items)
        self._changed.set()

    def settled(self, count: int = 1) -> None:
        """`count` handed-out deliveries were settled: the window has room for as many
        more."""
        self.unsettled -= count
        self._changed.set()

    def wake(self) -> None:
        """Something `read_batch` waits on changed (the connection came or went)."""
        self._changed.set()

    def close(self) -> None:
        """No more batches: `read_batch`, waiting or not, raises `EndOfInput`."""
        self.closed = True
        self._changed.set()

    @property
    def full(self) -> bool:
        """The buffer holds a whole window: time to stop reading from the wire."""
        return self.max_in_flight is not None and len(self.buffer) >= self.max_in_flight

    def room(self, limit: int) -> int:
        """How many items a batch of at most `limit` may take now."""
        room = min(limit, len(self.buffer))
        if self.max_in_flight is not None:
            room = min(room, self.max_in_flight - self.unsettled)
        return room

    async def read_batch(self, limit: int, take: Callable[[int], list[D]],
                         connected: Callable[[], bool],
                         not_connected: str = "not connected") -> list[D]:
        """The next batch: `take(n)` turns up to `n` buffered items (n >= 1) into
        deliveries, in order; it may return fewer (items it drops, e.g. requests answered
        before they were read) and the wait goes on while it returns none. Raises
        `EndOfInput` once closed, `NotConnected(not_connected)` when nothing is buffered
        (or the window is full) and `connected()` says the source is gone."""
        changed = self._changed
        while True:
            if self.closed:
                raise EndOfInput("consumer closed")
            room = self.room(limit)
            if room > 0:
                batch = take(room)
                if batch:
                    if self.max_in_flight is not None:
                        self.unsettled += len(batch)
                    return batch
                continue
            if not connected():
                raise NotConnected(not_connected)
            changed.clear()
            await changed.wait()


class InboxCounts:
    """The two counts a consumer built on an `Inbox` reports (`unsettled`, the contract's;
    `buffered`, for tests and the status page), read from its `_inbox`."""

    _inbox: Inbox[Any]  # any item type: only the counts are read

    @property
    def unsettled(self) -> int:
        return self._inbox.unsettled

    @property
    def buffered(self) -> int:
        """Messages received and not yet handed out by `read_batch`."""
        return len(self._inbox.buffer)
