"""A submitted batch waiting for its confirmations: the bookkeeping the producers that
confirm per message share (NATS JetStream PubAcks, MQTT PUBACK/PUBCOMP, AMQP
dispositions), so each writes only how a confirmation arrives.

Outcomes are kept by message index as the sink confirms each (the first outcome of an
index counts), a countdown says when all are in, and `future` — what `submit` hands the
engine as its `Confirmation` — resolves then, or at the deadline, or when the producer
gives the batch up (connection lost), with `missing` standing in for every outcome that
never came.
"""

from __future__ import annotations

import asyncio

from gateway.ports._outcome import Outcome

__all__ = ["PendingBatch"]


class PendingBatch:
    """The outcomes of one submitted batch of `size` messages. `deadline` (the event
    loop's clock, `loop.time()`): when to give up waiting, None for never. Runs on one
    event loop: `resolve` and `give_up` are called from it."""

    __slots__ = ("_missing", "_remaining", "_timer", "future", "outcomes")

    def __init__(self, size: int, missing: Outcome, deadline: float | None = None,
                 loop: asyncio.AbstractEventLoop | None = None) -> None:
        loop = loop or asyncio.get_running_loop()
        self.outcomes: list[Outcome | None] = [None] * size
        self.future: asyncio.Future[list[Outcome]] = loop.create_future()
        self._missing = missing
        self._remaining = size
        self._timer = None if deadline is None or size == 0 else loop.call_at(
            deadline, self.give_up)
        if size == 0:
            self.future.set_result([])

    @property
    def complete(self) -> bool:
        """Every message's outcome is known."""
        return self._remaining == 0

    def resolve(self, index: int, outcome: Outcome) -> bool:
        """Record message `index`'s outcome (the first one counts, also after the batch
        was given up); True once every outcome is known."""
        if self.outcomes[index] is None:
            self.outcomes[index] = outcome
            self._remaining -= 1
            if self._remaining == 0:
                self._finish(self._missing)
        return self._remaining == 0

    def give_up(self, missing: Outcome | None = None) -> None:
        """Confirm the batch now, `missing` (default: the batch's own) standing in for the
        outcomes that did not come. Later confirmations still fill in `outcomes`."""
        self._finish(self._missing if missing is None else missing)

    def results(self, missing: Outcome | None = None) -> list[Outcome]:
        """The outcomes as they stand, `missing` for each one not known."""
        stand_in = self._missing if missing is None else missing
        return [stand_in if outcome is None else outcome for outcome in self.outcomes]

    def _finish(self, missing: Outcome) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self.future.done():  # (the waiter may have given up and cancelled it)
            self.future.set_result(self.results(missing))
