"""Acking a settled batch at once: part of the delivery contract, optional.

The route acks a batch's deliveries in their order once every output confirmed them
(`runtime/settler.py`). Through `Delivery.ack` that is two coroutines per message -- the
delivery's and the adapter's hook -- for what is, in the Kafka and the JetStream
consumers, no I/O at all: an ack only moves a commit point or an ack frontier, and the
commit or `+ACK` goes once for the whole burst. So a settle hook may name the object
that acks many of its kind in one plain call (its `bulk` attribute, a `BulkAcker`), and
`ack_all` hands it each run of consecutive deliveries whose hooks name the same one.
Acking a run that way must leave the adapter as acking each of them in order would.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from gateway.ports._delivery import Delivery


class BulkAcker(Protocol):
    """What acks a run of settle hooks of one consumer at once (no I/O, no await)."""

    def ack_bulk(self, hooks: Sequence[Any]) -> None:
        """Ack each of `hooks` (all naming this acker as their `bulk`), in order."""
        ...


async def ack_all(deliveries: Sequence[Delivery]) -> None:
    """Ack each of `deliveries`, in order: a run of those whose hooks name the same
    `BulkAcker` in one call to it, any other one by `Delivery.ack`. A delivery settled
    already raises `AlreadySettled` as `ack` does, once those before it are acked."""
    acker: BulkAcker | None = None
    run: list[Any] = []
    try:
        for delivery in deliveries:
            hook = delivery.settle_hook
            owner: BulkAcker | None = getattr(hook, "bulk", None)
            if owner is not acker:
                if acker is not None and run:
                    done, run = run, []  # emptied first: never acked twice
                    acker.ack_bulk(done)
                acker = owner
            if owner is None:
                await delivery.ack()
                continue
            if delivery.settled:  # `mark_settled`, inline: this runs per message
                delivery.mark_settled()  # raises AlreadySettled
            delivery.settled = True
            run.append(hook)
    finally:
        if acker is not None and run:
            acker.ack_bulk(run)


__all__ = ["BulkAcker", "ack_all"]
