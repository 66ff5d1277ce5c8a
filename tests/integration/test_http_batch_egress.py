"""The HTTP egress sends a batch at once: `submit` starts every record's request (up to
`concurrency` in flight, then waits for room) and returns before the answers; the
Confirmation gives each record its own Outcome. Connections are kept alive and reused.
Against a real aiohttp webhook receiver on a loopback port that can hold its answers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from aiohttp import web
from support import asyncio_test

from adapters.http import HttpProducer
from adapters.http.record import RequestArgs
from gateway.ports import EndpointSettings, Outcome, write
from gateway.record import NativeMessage
from harness.brokers import free_port

TIMEOUT = 5.0


class Receiver:
    """Answers each request with the status its `X-Answer` header names (default 200),
    once `gate` is open; a success carries `answer_bytes` of body, the second half sent
    a moment after the first. Counts requests in flight and the client connections (peer
    ports) they came on."""

    def __init__(self, answer_bytes: int = 0) -> None:
        self.gate = asyncio.Event()
        self.gate.set()
        self.answer_bytes = answer_bytes
        self.in_flight = 0
        self.most_in_flight = 0
        self.received: list[str] = []
        self.peers: set[int] = set()
        self._runner: web.ServerRunner | None = None
        self.url = ""

    async def start(self) -> None:
        self._runner = web.ServerRunner(web.Server(self._handle))
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"

    async def stop(self) -> None:
        self.gate.set()
        if self._runner is not None:
            await self._runner.cleanup()

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await request.read()
            self.received.append(request.headers.get("X-Id", ""))
            if request.transport is not None:
                self.peers.add(request.transport.get_extra_info("peername")[1])
            await self.gate.wait()
            status = int(request.headers.get("X-Answer", "200"))
            if status < 300 and self.answer_bytes:
                return await self._slow_answer(request, status)
            headers = {"Retry-After": "7"} if status == 503 else None
            return web.Response(status=status, body=b"no" if status >= 300 else b"",
                                headers=headers)
        finally:
            self.in_flight -= 1

    async def _slow_answer(self, request: web.BaseRequest, status: int) -> web.StreamResponse:
        response = web.StreamResponse(status=status)
        response.content_length = self.answer_bytes
        await response.prepare(request)
        half = self.answer_bytes // 2
        await response.write(b"x" * half)
        await asyncio.sleep(0.01)  # the rest is not there yet when the head is read
        await response.write(b"x" * (self.answer_bytes - half))
        await response.write_eof()
        return response


@asynccontextmanager
async def _egress(answer_bytes: int = 0, **options: Any
                  ) -> AsyncIterator[tuple[Receiver, HttpProducer]]:
    receiver = Receiver(answer_bytes)
    await receiver.start()
    producer = HttpProducer(EndpointSettings(receiver.url, options=options))
    try:
        yield receiver, producer
    finally:
        await producer.aclose()
        await receiver.stop()


def _record(n: int, answer: int = 200, method: str = "POST") -> NativeMessage:
    return NativeMessage("HTTP", {"method": method, "path": f"/in/{n}", "headers": [
        {"name": "X-Id", "value": str(n)}, {"name": "X-Answer", "value": str(answer)}]},
        {"n": n})


def _records(count: int, first: int = 0) -> list[NativeMessage]:
    return [_record(n) for n in range(first, first + count)]


async def _until(condition: Any) -> None:
    async with asyncio.timeout(TIMEOUT):
        while not condition():
            await asyncio.sleep(0.005)


async def _confirm(producer: HttpProducer, records: Sequence[NativeMessage]) -> list[Outcome]:
    async with asyncio.timeout(TIMEOUT):
        return await write(producer, records)


@asyncio_test
async def test_a_batch_is_sent_at_once() -> None:
    """The receiver answers nothing until all five requests are in: records sent one
    after another would never get there."""
    async with _egress(concurrency=5) as (receiver, producer):
        receiver.gate.clear()
        submitted = asyncio.create_task(_confirm(producer, _records(5)))
        await _until(lambda: receiver.in_flight == 5)
        receiver.gate.set()
        assert all(outcome.delivered for outcome in await submitted)
        assert sorted(receiver.received) == ["0", "1", "2", "3", "4"]


@asyncio_test
async def test_concurrency_bounds_requests_and_submit_waits_for_room() -> None:
    async with _egress(concurrency=2) as (receiver, producer):
        receiver.gate.clear()
        submitting = asyncio.create_task(producer.submit(_records(3)))
        await _until(lambda: receiver.in_flight == 2)
        await asyncio.sleep(0.2)
        assert receiver.in_flight == 2  # the third waits for a slot...
        assert not submitting.done()  # ...and so does submit (back-pressure)
        receiver.gate.set()
        async with asyncio.timeout(TIMEOUT):
            outcomes = await (await submitting)
        assert all(outcome.delivered for outcome in outcomes)
        assert receiver.most_in_flight == 2


@asyncio_test
async def test_submits_in_flight_together_each_confirm_their_own_outcomes() -> None:
    async with _egress(concurrency=5) as (receiver, producer):
        receiver.gate.clear()
        first = await producer.submit(
            [_record(0, 200), _record(1, 400), _record(2, 503), _record(3, method="B@D")])
        second = await producer.submit([_record(4, 429), _record(5, 200)])
        # Both submits returned before any answer: the requests are all on the wire.
        await _until(lambda: receiver.in_flight == 5)
        receiver.gate.set()
        async with asyncio.timeout(TIMEOUT):
            ok, bad, busy, unsendable = await first
            throttled, ok_too = await second
        assert ok.delivered and ok_too.delivered
        assert not bad.delivered and not bad.retryable and bad.reason == "HTTP 400: no"
        assert not busy.delivered and busy.retryable and busy.retry_after == 7.0
        assert not unsendable.delivered and not unsendable.retryable  # never sent
        assert not throttled.delivered and throttled.retryable and throttled.retry_after is None
        assert sorted(receiver.received) == ["0", "1", "2", "4", "5"]


@asyncio_test
async def test_connections_are_kept_alive_and_reused() -> None:
    """Forty requests, two at a time, over two connections. The answers carry a body
    that is still arriving when their status is known: it is read to its end, else the
    connection would be closed rather than reused."""
    async with _egress(answer_bytes=20_000, concurrency=2) as (receiver, producer):
        first = await producer.submit(_records(20))
        second = await producer.submit(_records(20, first=20))
        async with asyncio.timeout(2 * TIMEOUT):
            outcomes = await first + await second
        assert all(outcome.delivered for outcome in outcomes)
        assert len(receiver.received) == 40
        assert len(receiver.peers) <= 2


@asyncio_test
async def test_an_unreachable_endpoint_fails_the_rest_of_the_batch_without_trying() -> None:
    producer = HttpProducer(EndpointSettings(f"http://127.0.0.1:{free_port()}",
                                             options={"concurrency": 1}))
    attempts = 0
    send = producer._send

    async def counted(args: RequestArgs) -> tuple[Outcome, bool]:
        nonlocal attempts
        attempts += 1
        return await send(args)

    producer._send = counted  # type: ignore[method-assign]
    try:
        outcomes = await _confirm(producer, _records(5))
        assert attempts == 1
        assert all(not o.delivered and o.retryable for o in outcomes)
        assert len({o.reason for o in outcomes}) == 1
    finally:
        await producer.aclose()


@asyncio_test
async def test_close_settles_the_confirmation_of_requests_in_flight() -> None:
    async with _egress() as (receiver, producer):
        receiver.gate.clear()
        confirmation = await producer.submit(_records(3))
        await _until(lambda: receiver.in_flight == 3)
        async with asyncio.timeout(TIMEOUT):
            await producer.aclose()
            outcomes = await confirmation  # failures, not an exception
        assert [(o.delivered, o.retryable) for o in outcomes] == [(False, True)] * 3
        # The producer opens a new session for the next submit.
        receiver.gate.set()
        assert all(o.delivered for o in await _confirm(producer, _records(2)))


@asyncio_test
async def test_empty_submit_confirms_nothing() -> None:
    async with _egress() as (receiver, producer):
        assert await _confirm(producer, []) == []
        assert receiver.received == []
