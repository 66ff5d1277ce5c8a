"""In-memory consumer and producer, for tests of the core (the adapters' MockTransport).

`MemoryConsumer` hands out messages fed from a list or with `feed()`, records every
settlement in `acked` / `nacked`, and puts nack(retry=True) messages back at the end of
its queue, the way a broker would redeliver them. `MemoryProducer` records what was
written and lets a test script failures per message.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from gateway.ports import Confirmation, Delivery, EndOfInput, NotConnected, Outcome, Settle
from gateway.record import NativeMessage

__all__ = ["MemoryConsumer", "MemoryProducer", "Nacked"]


@dataclass(frozen=True)
class Nacked:
    message: NativeMessage
    reason: str
    retry: bool


class MemoryConsumer:
    """A consumer over a queue of records.

    With `close_when_empty=True`, `read()` raises EndOfInput once the queue is empty and
    nothing is unsettled (a finite input); otherwise it waits for `feed()`.
    `max_in_flight` bounds the unsettled deliveries, like the real adapters do.
    """

    def __init__(
        self,
        messages: Iterable[NativeMessage] = (),
        *,
        max_in_flight: int = 64,
        close_when_empty: bool = False,
    ) -> None:
        self._queue: deque[NativeMessage] = deque(messages)
        self._max_in_flight = max_in_flight
        self._close_when_empty = close_when_empty
        self._unsettled = 0
        self._changed = asyncio.Event()
        self._connected = False
        self._closed = False
        self.acked: list[NativeMessage] = []
        self.nacked: list[Nacked] = []

    @property
    def connected(self) -> bool:
        return self._connected

    @property
    def unsettled(self) -> int:
        return self._unsettled

    def feed(self, *messages: NativeMessage) -> None:
        self._queue.extend(messages)
        self._changed.set()

    async def connect(self) -> None:
        if self._closed:
            raise NotConnected("consumer is closed")
        self._connected = True

    async def read_batch(self, limit: int) -> list[Delivery]:
        """Everything queued, up to `limit` and the room left under `max_in_flight`;
        waits while there is nothing (or no room)."""
        while True:
            if self._closed:
                raise EndOfInput("consumer closed")
            if not self._connected:
                raise NotConnected("not connected")
            room = min(limit, self._max_in_flight - self._unsettled)
            if self._queue and room > 0:
                batch: list[Delivery] = []
                while self._queue and len(batch) < room:
                    message = self._queue.popleft()
                    batch.append(Delivery(message, self._settler(message)))
                self._unsettled += len(batch)
                return batch
            if self._close_when_empty and not self._queue and self._unsettled == 0:
                raise EndOfInput("input exhausted")
            self._changed.clear()
            await self._changed.wait()

    def _settler(self, message: NativeMessage) -> Settle:
        async def settle(ack: bool, reason: str, retry: bool) -> None:
            self._unsettled -= 1
            if ack:
                self.acked.append(message)
            else:
                self.nacked.append(Nacked(message, reason, retry))
                if retry:
                    self._queue.append(message)
            self._changed.set()

        return settle

    async def aclose(self) -> None:
        self._closed = True
        self._connected = False
        self._changed.set()


#: Decides the outcome of one write: return None to deliver, an Outcome to fail it.
FailureRule = Callable[[NativeMessage], Outcome | None]


class MemoryProducer:
    """Records written messages in `written`; `fail_next(...)` or `rule` inject failures."""

    def __init__(self, *, rule: FailureRule | None = None,
                 max_message_bytes: int | None = None) -> None:
        self.written: list[NativeMessage] = []
        # A size limit (`SizeLimited`): a larger body is refused as too large.
        self.max_message_bytes = max_message_bytes
        self._rule = rule
        self._scripted: deque[Outcome] = deque()
        self._connected = False
        self.connect_failures = 0  # connect() raises NotConnected this many more times

    @property
    def connected(self) -> bool:
        return self._connected

    def fail_next(self, *outcomes: Outcome) -> None:
        """The next writes (one message each) get these outcomes, in order."""
        self._scripted.extend(outcomes)

    def disconnect(self) -> None:
        """Simulate a dropped connection: writes fail (retryable) until connect()."""
        self._connected = False

    async def connect(self) -> None:
        if self.connect_failures > 0:
            self.connect_failures -= 1
            raise NotConnected("injected connect failure")
        self._connected = True

    async def submit(self, messages: Sequence[NativeMessage]) -> Confirmation:
        """Pipelined like a real producer: returns at once; the confirmation is a task
        that runs `_write` (tests override it to slow or observe writes). Tasks start in
        creation order, so successive submits are written in order."""
        return asyncio.ensure_future(self._write(list(messages)))

    async def _write(self, messages: Sequence[NativeMessage]) -> list[Outcome]:
        outcomes: list[Outcome] = []
        for message in messages:
            outcome = self._decide(message)
            if outcome.delivered:
                self.written.append(message)
            outcomes.append(outcome)
        return outcomes

    def _decide(self, message: NativeMessage) -> Outcome:
        if not self._connected:
            return Outcome.failed("not connected", retryable=True)
        if self._scripted:
            return self._scripted.popleft()
        limit = self.max_message_bytes
        if limit is not None and len(message.body_bytes()) > limit:
            return Outcome.oversize(len(message.body_bytes()), limit)
        if self._rule is not None:
            ruled = self._rule(message)
            if ruled is not None:
                return ruled
        return Outcome.ok()

    async def aclose(self) -> None:
        self._connected = False
