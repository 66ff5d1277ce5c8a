"""The HTTP ingress hands out batches: `read_batch` returns every request received so far
(at most `limit`, in arrival order), a burst of settlements answers every request, and
one timer answers 504 to each request at its own deadline. Real loopback sockets, an
aiohttp client."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, cast

import aiohttp
import pytest
from support import asyncio_test

from adapters.http import HttpConsumer
from gateway.ports import Delivery, EndOfInput, EndpointSettings

TIMEOUT = 5.0


async def _consumer(**options: Any) -> HttpConsumer:
    consumer = HttpConsumer(EndpointSettings("http://127.0.0.1:0", options=options))
    await consumer.connect()
    return consumer


async def _until(condition: Callable[[], bool]) -> None:
    async with asyncio.timeout(TIMEOUT):
        while not condition():
            await asyncio.sleep(0.005)


async def _post(session: aiohttp.ClientSession, url: str, n: int) -> tuple[int, float]:
    """POST message `n`; (status, seconds until the answer)."""
    started = time.monotonic()
    async with session.post(url, data=b'{"n": %d}' % n,
                            headers={"Content-Type": "application/json"}) as response:
        await response.read()
        return response.status, time.monotonic() - started


async def _send(session: aiohttp.ClientSession, consumer: HttpConsumer, count: int
                ) -> list[asyncio.Task[tuple[int, float]]]:
    """`count` requests, each sent once the one before is queued (so arrival order is
    known); back when all are queued."""
    tasks = []
    for n in range(count):
        tasks.append(asyncio.create_task(_post(session, f"{consumer.url}/in", n)))
        await _until(lambda: consumer.queued == n + 1)  # noqa: B023 (awaited right here)
    return tasks


def _numbers(batch: list[Delivery]) -> list[int]:
    return [cast(dict[str, int], delivery.message.data)["n"] for delivery in batch]


async def _answers(tasks: list[asyncio.Task[tuple[int, float]]]) -> list[int]:
    async with asyncio.timeout(TIMEOUT):
        return [status for status, _ in await asyncio.gather(*tasks)]


@asyncio_test
async def test_read_batch_returns_every_waiting_request_up_to_limit_in_order() -> None:
    consumer = await _consumer()
    try:
        async with aiohttp.ClientSession() as session:
            tasks = await _send(session, consumer, 5)
            first = await consumer.read_batch(3)
            assert _numbers(first) == [0, 1, 2]  # no more than the limit, oldest first
            rest = await consumer.read_batch(100)
            assert _numbers(rest) == [3, 4]  # all that waited, though 100 were allowed
            assert consumer.queued == 0
            for delivery in first + rest:
                await delivery.ack()
            assert await _answers(tasks) == [202] * 5
    finally:
        await consumer.aclose()


@asyncio_test
async def test_read_batch_blocks_until_a_request_arrives() -> None:
    consumer = await _consumer()
    try:
        reading = asyncio.create_task(consumer.read_batch(10))
        await asyncio.sleep(0.1)
        assert not reading.done()
        async with aiohttp.ClientSession() as session:
            task = asyncio.create_task(_post(session, f"{consumer.url}/in", 7))
            async with asyncio.timeout(TIMEOUT):
                batch = await reading
            assert _numbers(batch) == [7]
            await batch[0].ack()
            assert await _answers([task]) == [202]
    finally:
        await consumer.aclose()


@asyncio_test
async def test_a_burst_of_settlements_answers_each_request_with_its_own() -> None:
    consumer = await _consumer()
    try:
        async with aiohttp.ClientSession() as session:
            tasks = await _send(session, consumer, 6)
            batch = await consumer.read_batch(10)
            settle: list[Callable[[Delivery], Awaitable[None]]] = [
                lambda d: d.ack(),
                lambda d: d.nack("downstream down", retry=True),
                lambda d: d.nack("no definition", retry=False),
            ]
            # Settled in reverse, all in one go: each request gets its own answer.
            for index in reversed(range(len(batch))):
                await settle[index % 3](batch[index])
            assert await _answers(tasks) == [202, 503, 400, 202, 503, 400]
            assert consumer.in_flight == 0
    finally:
        await consumer.aclose()


@asyncio_test
async def test_each_request_gets_its_504_at_its_own_deadline() -> None:
    """One timer serves every waiting request: a later request is not answered at an
    earlier one's deadline, and a request settled in time is answered 202."""
    consumer = await _consumer(settle_timeout=0.5)
    try:
        async with aiohttp.ClientSession() as session:
            early = asyncio.create_task(_post(session, f"{consumer.url}/in", 0))
            await _until(lambda: consumer.queued == 1)
            await asyncio.sleep(0.3)
            late = asyncio.create_task(_post(session, f"{consumer.url}/in", 1))
            settled = asyncio.create_task(_post(session, f"{consumer.url}/in", 2))
            await _until(lambda: consumer.queued == 3)
            batch = await consumer.read_batch(10)
            # `late` and `settled` were sent at once: either may have arrived first.
            by_number = dict(zip(_numbers(batch), batch, strict=True))
            await by_number[2].ack()
            async with asyncio.timeout(TIMEOUT):
                (early_status, early_wait), (late_status, late_wait), (ok, ok_wait) = (
                    await asyncio.gather(early, late, settled))
            assert (early_status, late_status, ok) == (504, 504, 202)
            assert 0.5 <= early_wait < 0.5 + 1.0
            assert 0.5 <= late_wait < 0.5 + 1.0  # not cut short at the first deadline
            assert ok_wait < 0.5
            await by_number[0].ack()  # after its 504: ignored
            assert consumer.in_flight == 0
    finally:
        await consumer.aclose()


@asyncio_test
async def test_request_answered_504_before_it_was_read_is_not_handed_out() -> None:
    consumer = await _consumer(settle_timeout=0.2)
    try:
        async with aiohttp.ClientSession() as session:
            expired = await _send(session, consumer, 1)
            assert await _answers(expired) == [504]
            fresh = asyncio.create_task(_post(session, f"{consumer.url}/in", 1))
            async with asyncio.timeout(TIMEOUT):
                batch = await consumer.read_batch(10)
            assert _numbers(batch) == [1]  # the expired request is skipped
            await batch[0].ack()
            assert await _answers([fresh]) == [202]
    finally:
        await consumer.aclose()


@asyncio_test
async def test_close_ends_a_waiting_read_batch() -> None:
    consumer = await _consumer()
    reading = asyncio.create_task(consumer.read_batch(10))
    await asyncio.sleep(0.05)
    await consumer.aclose()
    with pytest.raises(EndOfInput):
        async with asyncio.timeout(TIMEOUT):
            await reading


@asyncio_test
async def test_many_concurrent_clients_are_read_in_batches() -> None:
    """32 keep-alive clients at once (the benchmark's shape): every request is delivered
    exactly once and answered 202, and reading takes fewer batches than requests."""
    consumer = await _consumer()
    seen: list[int] = []
    batches = 0

    async def engine() -> None:
        nonlocal batches
        while True:
            batch = await consumer.read_batch(100)
            batches += 1
            seen.extend(_numbers(batch))
            for delivery in batch:
                await delivery.ack()

    reader = asyncio.create_task(engine())
    try:
        connector = aiohttp.TCPConnector(limit=32)
        async with aiohttp.ClientSession(connector=connector) as session:

            async def client(first: int) -> list[int]:
                return [(await _post(session, f"{consumer.url}/in", n))[0]
                        for n in range(first, first + 20)]

            async with asyncio.timeout(4 * TIMEOUT):
                statuses = await asyncio.gather(*(client(20 * c) for c in range(32)))
        assert all(status == 202 for answers in statuses for status in answers)
        assert sorted(seen) == list(range(640))
        assert batches < len(seen)
        assert consumer.in_flight == 0
    finally:
        reader.cancel()
        await consumer.aclose()
