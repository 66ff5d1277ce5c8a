"""The route's settler: await each batch's confirmations in order, retry what failed,
dead-letter what is given up, answer waiting senders, then settle the source messages.

- A source message is acked only when every output confirmed each of its events, or
  the dead letter took them (`runtime/ledger.py` decides; `runtime/deadletters.py`
  writes them, holding the batch while the dead letter is down).
- Batches are settled one after the other in the order the intake read them, and the
  messages of a batch in their order: the source sees its acks in order.
- Only transient failures are retried, by the route alone (`runtime/sender.py`); a
  permanent rejection, or a transient one past a configured budget, dead-letters the
  record's message as `undeliverable` (`too-large`, `no-reply` when that is why).
- Request-reply: before a message settles, its sender gets the answer, or is told
  none came (`runtime/reply.py`).
- An error no message should cause gives the batch back for redelivery; a stopping
  route gives back what it could not finish.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from gateway.ports import Delivery, ack_all
from gateway.runtime.deadletters import DeadLetters
from gateway.runtime.ledger import Batch, Message, Sent, Verdict, give_up, verdicts
from gateway.runtime.reply import Replies
from gateway.runtime.sender import Sender, outcomes
from gateway.runtime.stats import RouteStats
from gateway.runtime.tapping import TapPoint
from gateway.runtime.window import Window

log = logging.getLogger("xrgw.route")


class Settler:
    def __init__(self, batches: asyncio.Queue[Batch], window: Window, sender: Sender,
                 deadletters: DeadLetters, replies: Replies | None,
                 stats: RouteStats, tap: TapPoint | None = None) -> None:
        self._batches = batches
        self._window = window
        self._sender = sender
        self._deadletters = deadletters
        self._replies = replies
        self._stats = stats
        self._tap = tap

    async def run(self) -> None:
        """Settle batches as they come, until cancelled."""
        while True:
            batch = await self._batches.get()
            try:
                await self._finish(batch)
            except asyncio.CancelledError:
                await give_back(batch.deliveries(), "stopping")
                self._window.release(batch)
                raise
            except Exception:  # the daemon never crashes on a message
                self._stats.batch_failed()
                await give_back(batch.deliveries(), "internal error")
            self._window.release(batch)
            # Freed now, while settling has just read its objects, not after the wait for
            # the next batch (its last reference is this name).
            del batch

    async def give_back_queued(self) -> None:
        """The batches the settler did not reach go back to the source for redelivery."""
        while not self._batches.empty():
            batch = self._batches.get_nowait()
            await give_back(batch.deliveries(), "stopping")
            self._window.release(batch)

    async def _finish(self, batch: Batch) -> None:
        for sent in batch.sent:
            if sent.confirmation is not None:
                await self._confirm(sent)
        if self._replies is not None:
            await self._replies.hand_back(batch)
        dropped: dict[Message, str] = {}
        unwritten = await self._deadletters.write(batch.messages, dropped)
        if not unwritten and not dropped:
            # Every message acked (nearly every batch): in bulk where the source can.
            await ack_all(batch.deliveries())
        else:
            await _settle_each(batch.messages, verdicts(batch.messages, unwritten, dropped))
        tap = self._tap
        if tap is not None and tap.hub.attached:  # one check per batch when nobody taps
            tap.offer(batch)

    async def _confirm(self, sent: Sent) -> None:
        """Wait for one output's confirmation of a batch; retry what failed; mark the
        members whose records are given up."""
        assert sent.confirmation is not None
        results = await outcomes(sent.confirmation, len(sent.records))
        output = sent.output
        sender = self._sender
        failed = sender.account(output, sent.records, results)
        if failed:
            retried = [results[i] for i in failed]  # retry_failed leaves the last ones here
            given = await sender.retry_failed(output, [sent.records[i] for i in failed],
                                              retried, [sent.owners[i] for i in failed])
            give_up(sent, failed, given, retried, results)
        if self._replies is not None:
            sent.replies = {i: o for i, o in enumerate(results) if o.reply is not None}
        sender.follow(output)


async def _settle_each(messages: Sequence[Message], settled: Sequence[Verdict]) -> None:
    for message, verdict in zip(messages, settled, strict=True):
        if verdict.ack:
            await message.delivery.ack()
        else:
            await message.delivery.nack(verdict.reason, retry=verdict.retry)


async def give_back(deliveries: Sequence[Delivery], reason: str) -> None:
    """Nack what is not settled yet, for redelivery."""
    for delivery in deliveries:
        if not delivery.settled:
            try:
                await delivery.nack(reason, retry=True)
            except Exception:
                log.debug("delivery already settled", exc_info=True)  # pragma: no mutate


__all__ = ["Settler", "give_back"]
