"""The two roles an adapter plays: a Consumer (messages in) and a Producer (messages out).

Both move batches: a consumer hands over what it has, a producer takes a batch and
confirms it later, so the engine never pays a task, a socket write or a round trip per
message. Each message still has its own settlement (`Delivery`) and its own `Outcome`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import Protocol, runtime_checkable

from gateway.ports._delivery import Delivery
from gateway.ports._outcome import Outcome
from gateway.record import NativeMessage

#: What `Producer.submit` returns: awaiting it gives one Outcome per submitted message,
#: in order, once the broker has confirmed (or refused) each of them.
Confirmation = Awaitable[list[Outcome]]


@runtime_checkable
class Consumer(Protocol):
    """Receives native messages in batches."""

    @property
    def connected(self) -> bool: ...

    async def connect(self) -> None:
        """Connect (or reconnect); raises NotConnected on failure."""

    async def read_batch(self, limit: int) -> list[Delivery]:
        """Wait until at least one delivery is available, then return every one that is
        available now, at most `limit` (>= 1), in the order received. Blocks, for
        back-pressure, while the adapter's limit of unsettled deliveries is reached.
        Raises NotConnected (reconnect) or EndOfInput (stop)."""
        ...

    async def aclose(self) -> None: ...


@runtime_checkable
class Producer(Protocol):
    """Sends native messages in batches, pipelined.

    `submit` hands the messages to the client in order and returns as soon as they are
    queued (it may wait for room: back-pressure), *before* the broker confirmed them; the
    returned Confirmation resolves to one Outcome per message. The messages of a later
    `submit` are sent after those of an earlier one on the same producer: the engine keeps
    order by submitting in order, not by waiting for each confirmation. One attempt per
    message: a failure is reported (with `retryable` and, when the receiver said so,
    `retry_after`), not retried, and never raised for a single message.
    """

    @property
    def connected(self) -> bool: ...

    async def connect(self) -> None:
        """Connect (or reconnect); raises NotConnected on failure."""

    async def submit(self, messages: Sequence[NativeMessage]) -> Confirmation: ...

    async def aclose(self) -> None: ...


async def read_one(consumer: Consumer) -> Delivery:
    """The next single delivery (tests, tools): a batch of at most one."""
    [delivery] = await consumer.read_batch(1)
    return delivery


async def write(producer: Producer, messages: Sequence[NativeMessage]) -> list[Outcome]:
    """Submit and wait for the confirmation: one Outcome per message, in order."""
    confirmation = await producer.submit(messages)
    return await confirmation


async def confirmed(outcomes: list[Outcome]) -> list[Outcome]:
    """A Confirmation that is already settled (a producer that knows its outcomes at
    submit time: memory, or a batch refused as a whole)."""
    return outcomes
