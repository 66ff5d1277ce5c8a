"""The route's intake: read a batch, convert it, submit it to every output, queue it for
the settler -- without waiting for the sinks.

- There is one intake per route, and producers send the batches of successive submits
  in order (the contract), so every output receives messages in the order the source
  gave them.
- It reads at most the free part of the window (`runtime/window.py`) and stops reading
  while the window is full: back-pressure, which the adapter passes on to the broker.
- A read that fails is the `source-failing` condition (a stall once it lasts; the
  reason is the operator's only clue); the intake reconnects, backing off when reads
  fail again right after a reconnect. An error no message should cause gives the batch
  back to the source for redelivery; the route goes on.
- Shadow mode (`observe`): batches are matched, rendered and counted, then acked to the
  observing subscription; nothing is sent and nothing dead-lettered.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from gateway.policies.retry import RetryPolicy
from gateway.ports import Consumer, Delivery, EndOfInput, NotConnected, ack_all
from gateway.runtime.batches import BatchMaker
from gateway.runtime.ledger import Batch
from gateway.runtime.sender import Sender
from gateway.runtime.settler import give_back
from gateway.runtime.stalls import SOURCE_FAILING, Stalls
from gateway.runtime.stats import RouteStats
from gateway.runtime.tapping import TapPoint
from gateway.runtime.window import Window


class Intake:
    def __init__(self, source_endpoint: str, consumer: Consumer, maker: BatchMaker,
                 sender: Sender, window: Window, batches: asyncio.Queue[Batch], *,
                 connect: Callable[[], Awaitable[None]], retry: RetryPolicy, observe: bool,
                 stats: RouteStats, stalls: Stalls, tap: TapPoint | None = None) -> None:
        self.source_endpoint = source_endpoint
        self.consumer = consumer
        self.maker = maker
        self._sender = sender
        self._window = window
        self._batches = batches
        self._connect = connect
        self._retry = retry
        self._observe = observe
        self._stats = stats
        self._stalls = stalls
        self._tap = tap  # an observing route offers its batches to `xrgw tap` here
        self._read_failures = 0  # reads failed in a row

    async def run(self) -> None:
        """Until the consumer reports the end of its input (or the task is cancelled)."""
        await self._connect()
        window = self._window
        while True:
            limit = await window.room()
            if window.stopping:
                return
            try:
                deliveries = await self.consumer.read_batch(limit)
            except EndOfInput:
                return
            except NotConnected as exc:
                await self._reconnect(exc)
                continue
            except Exception as exc:
                self._read_failed(exc, unexpected=True)
                await asyncio.sleep(self._retry.delay(0))
                continue
            if deliveries:
                self._read_failures = 0
                self._stalls.cleared(SOURCE_FAILING, self.source_endpoint)
                await self._take(deliveries)

    async def _reconnect(self, exc: NotConnected) -> None:
        self._read_failed(exc)
        self._stats.connected(self.source_endpoint, False)
        if self._read_failures > 1:
            # Failing again right after a reconnect: not a dropped connection but
            # something the reconnect does not cure; back off instead of spinning.
            await asyncio.sleep(self._retry.delay(min(self._read_failures - 2, 6)))
        await self._connect()

    def _read_failed(self, exc: BaseException, unexpected: bool = False) -> None:
        """The reason goes to the stall watch, which logs it once and then rate-limited."""
        self._read_failures += 1
        first = not self._stalls.active(SOURCE_FAILING, self.source_endpoint)
        self._stats.read_failed(exc, first, unexpected)
        self._stalls.failing(SOURCE_FAILING, self.source_endpoint,
                             f"{type(exc).__name__}: {exc}")

    async def _take(self, deliveries: list[Delivery]) -> None:
        """Convert and submit one read; queue it for the settler."""
        started = self._window.take(len(deliveries))
        try:
            batch = await self.maker.make(deliveries, started)
            if self._observe:
                await self._observed(batch)
                return
            for sent in batch.sent:
                if sent.records:
                    sent.confirmation = await self._sender.submit(sent.output, sent.records)
        except asyncio.CancelledError:
            await give_back(deliveries, "stopping")
            self._window.free(len(deliveries), started)
            raise
        except Exception:  # the daemon never crashes on a message
            self._stats.batch_failed()
            await give_back(deliveries, "internal error")
            self._window.free(len(deliveries), started)
            return
        self._batches.put_nowait(batch)

    async def _observed(self, batch: Batch) -> None:
        """Shadow mode: the batch was matched, rendered and counted; nothing is sent and
        nothing dead-lettered. The deliveries are acknowledged to the observing
        subscription only (its own group, session or ephemeral consumer), which takes
        nothing from the endpoint's real consumers."""
        try:
            await ack_all(batch.deliveries())
        finally:
            self._window.release(batch)
        tap = self._tap
        if tap is not None and tap.hub.attached:  # one check per batch when nobody taps
            tap.offer(batch)


__all__ = ["Intake"]
