"""Driving adapters through the contract alone (`gateway.ports`), the way a route does:
read batches and reconnect on `NotConnected`; submit, await the confirmation and send
again what failed retryably. Nothing here knows a protocol."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Sequence

from gateway.json.values import JSON
from gateway.ports import Consumer, Delivery, NotConnected, Outcome, Producer
from gateway.record import NativeMessage

#: Seconds a case waits for what must come (generous: a loaded 2-core machine, and a
#: Kafka group join alone takes seconds).
PATIENCE = 30.0
#: Seconds during which nothing may come, where a case checks that nothing does.
QUIET = 0.7


def record(protocol: str, fields: dict[str, JSON], n: int, **extra: JSON) -> NativeMessage:
    """Message number `n` of a case: a JSON body {"n": n} on the lane's address."""
    return NativeMessage(protocol, {**fields, **extra}, data={"n": n})


def number(message: NativeMessage) -> int:
    """The `n` of a message sent by `record`, however the adapter read the body."""
    body = message.data if message.has_json_data else json.loads(message.body_bytes())
    n = body.get("n") if isinstance(body, dict) else None
    assert isinstance(n, int), message
    return n


async def reconnect(adapter: Consumer | Producer) -> None:
    """connect() until it works (the engine's backoff, short)."""
    while True:
        try:
            await adapter.connect()
            return
        except NotConnected:
            await asyncio.sleep(0.1)


async def take(consumer: Consumer, count: int, *, limit: int | None = None,
               patience: float = PATIENCE) -> list[Delivery]:
    """`count` deliveries, read in batches of at most `limit` (checked), reconnecting
    on NotConnected as the engine does."""
    got: list[Delivery] = []
    async with asyncio.timeout(patience):
        while len(got) < count:
            want = min(limit or count, count - len(got))
            try:
                batch = await consumer.read_batch(want)
            except NotConnected:
                await reconnect(consumer)
                continue
            assert 1 <= len(batch) <= want, f"read_batch({want}) gave {len(batch)}"
            got += batch
    return got


async def until_seen(consumer: Consumer, wanted: set[int],
                     patience: float = PATIENCE) -> list[Delivery]:
    """Read (and ack) until every number in `wanted` has come at least once; what came,
    duplicates included (at-least-once)."""
    seen: list[Delivery] = []
    async with asyncio.timeout(patience):
        while not wanted <= {number(d.message) for d in seen}:
            try:
                batch = await consumer.read_batch(100)
            except NotConnected:
                await reconnect(consumer)
                continue
            for delivery in batch:
                await delivery.ack()
            seen += batch
    return seen


async def nothing_more(consumer: Consumer, seconds: float = QUIET) -> None:
    """Nothing is handed over for `seconds` (a wait that must block)."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            while True:
                try:
                    batch = await consumer.read_batch(10)
                except NotConnected:
                    await reconnect(consumer)
                    continue
                raise AssertionError(
                    f"nothing should come, got {[number(d.message) for d in batch]}")


async def deliver(producer: Producer, messages: Sequence[NativeMessage],
                  patience: float = PATIENCE) -> int:
    """Send until every message is delivered, as a route does: one submit, then the
    retryable failures again (connecting first when the producer says it is not
    connected). A failure that is not retryable fails the case. The number of submits."""
    pending = list(messages)
    submits = 0
    async with asyncio.timeout(patience):
        while pending:
            if not producer.connected:
                with contextlib.suppress(NotConnected):
                    await producer.connect()
            outcomes = await (await producer.submit(pending))
            submits += 1
            assert len(outcomes) == len(pending)
            final = [o for o in outcomes if not o.delivered and not o.retryable]
            assert not final, final
            pending = [m for m, o in zip(pending, outcomes, strict=True) if not o.delivered]
            if pending:
                await asyncio.sleep(0.05)  # the route's backoff, short
    return submits


async def send_once(producer: Producer, messages: Sequence[NativeMessage]) -> list[Outcome]:
    """One submit and its confirmation, whatever the outcomes."""
    return await (await producer.submit(messages))
