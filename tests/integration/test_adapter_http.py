"""The HTTP adapter over real loopback sockets: the ingress server with an aiohttp client,
the egress producer against an aiohttp webhook receiver (both on ephemeral ports)."""

from __future__ import annotations

import asyncio
import gc
import json
import time
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from support import asyncio_test
from yarl import URL

from adapters.http import HttpConsumer, HttpProducer
from adapters.http.consumer import _Pending
from adapters.memory import MemoryConsumer, MemoryProducer
from gateway.convert import Converter
from gateway.definitions import load_catalog
from gateway.observability.metrics import Metrics
from gateway.policies.retry import RetryPolicy
from gateway.ports import (
    AlreadySettled,
    Delivery,
    EndpointSettings,
    defer_bodies,
    read_one,
    write,
)
from gateway.record import NativeMessage
from gateway.runtime.route import Output, Route
from harness.brokers import free_port

TIMEOUT = 5.0



async def _consumer(**options: Any) -> HttpConsumer:
    consumer = HttpConsumer(EndpointSettings("http://127.0.0.1:0", options=options))
    await consumer.connect()
    return consumer


async def _read(consumer: HttpConsumer) -> Delivery:
    async with asyncio.timeout(TIMEOUT):
        return await read_one(consumer)


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


async def _request(
    url: str, method: str = "POST", data: Any = b"", headers: dict[str, str] | None = None
) -> Answer:
    async with (
        aiohttp.ClientSession() as session,
        session.request(
            method,
            URL(url, encoded=True),
            data=data,
            headers=headers or {},
            skip_auto_headers=["Content-Type"],  # no content type unless a test sets one
        ) as response,
    ):
        return Answer(response.status, dict(response.headers), await response.read())


def _post(url: str, **kwargs: Any) -> asyncio.Task[Answer]:
    return asyncio.create_task(_request(url, **kwargs))


async def _answer(task: asyncio.Task[Answer]) -> Answer:
    async with asyncio.timeout(TIMEOUT):
        return await task


# ====================================================================== ingress


@asyncio_test
async def test_ingress_round_trip_fields_and_ack() -> None:
    consumer = await _consumer(paths=["/hooks/{store}/sales", "/other"])
    try:
        assert consumer.port not in (None, 0)
        task = _post(
            f"{consumer.url}/hooks/12/sales?kind=sale&kind=refund&q=a%20b",
            data=b'{"amount": 12.5}',
            headers={"Content-Type": "application/json", "X-Trace-Id": "t-1", "x-lower": "v"},
        )
        delivery = await _read(consumer)
        record = delivery.message
        assert record.protocol == "HTTP"
        assert record.get("method") == "POST"
        assert record.get("path") == "/hooks/12/sales"
        assert record.get("query") == {"kind": "sale", "q": "a%20b"}  # first value, raw
        assert record.data == {"amount": 12.5}
        names = [name for name, _ in record.pairs("headers")]
        assert names.index("X-Trace-Id") < names.index("x-lower")  # order and case kept
        assert record.header("x-trace-id", case_insensitive=True) == "t-1"
        assert record.received_at is not None
        assert not task.done()  # the request waits for the settlement
        await delivery.ack()
        answer = await _answer(task)
        assert answer.status == 202 and answer.body == b""
        with pytest.raises(AlreadySettled):
            await delivery.ack()
    finally:
        await consumer.aclose()


@asyncio_test
async def test_an_answered_request_leaves_nothing_for_the_cyclic_collector() -> None:
    # A request's waiting state and its delivery's hooks pointed at each other: every
    # request left a reference cycle behind (10 objects) until the collector ran.
    consumer = await _consumer()
    try:
        gc.collect()
        gc.disable()
        for _ in range(20):
            task = _post(f"{consumer.url}/x", data=b"{}")
            delivery = await _read(consumer)
            await delivery.ack()
            assert (await _answer(task)).status == 202
            del delivery
        await asyncio.sleep(0)
        assert [o for o in gc.get_objects() if isinstance(o, _Pending)] == []
    finally:
        gc.enable()
        await consumer.aclose()


@asyncio_test
async def test_ingress_body_rule() -> None:
    consumer = await _consumer()
    try:
        bodies = [
            (b"21.5", {}),  # no content type, scalar JSON: stays bytes
            (b"[1, 2]", {}),  # no content type, JSON array: data
            (b"a,b", {"Content-Type": "text/csv"}),
            (b'{"specversion": "1.0"}', {"Content-Type": "application/cloudevents+json"}),
            (b"", {"Content-Type": "application/json"}),
        ]
        for body, headers in bodies:
            task = _post(f"{consumer.url}/x", data=body, headers=headers)
            delivery = await _read(consumer)
            await delivery.ack()
            assert (await _answer(task)).status == 202
            record = delivery.message
            if body in (b"21.5", b"a,b"):
                assert record.payload == body and not record.has_json_data
            elif body:
                assert record.data == json.loads(body)
            else:
                assert not record.has_body
    finally:
        await consumer.aclose()


@asyncio_test
async def test_ingress_told_to_defer_bodies_leaves_a_declared_json_body_unparsed() -> None:
    """`ports.defer_bodies` (a route whose outputs take bodies as their bytes): a body
    declared JSON is parsed only when read, and reads as the one parsed at once; a body
    without a content type is parsed at once all the same. The sender is curl."""
    consumer = await _consumer()
    try:
        bodies = [(b'{"a": 1}', "application/json"), (b'{"a": 1}', None)]
        got = []
        for told in (False, True):
            if told:
                assert defer_bodies(consumer)
            for body, ctype in bodies:
                args = ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
                        "--data-binary", "@-", f"{consumer.url}/x"]
                args += ["-H", f"Content-Type: {ctype}" if ctype else "Content-Type:"]
                curl = await asyncio.create_subprocess_exec(
                    *args, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
                assert curl.stdin is not None
                curl.stdin.write(body)
                curl.stdin.close()
                delivery = await _read(consumer)
                await delivery.ack()
                async with asyncio.timeout(TIMEOUT):
                    out, _ = await curl.communicate()
                assert out == b"202"
                got.append(delivery.message)
        at_once, bare_at_once, deferred, bare = got
        assert at_once.unparsed_body() is None and bare_at_once.unparsed_body() is None
        assert deferred.unparsed_body() == b'{"a": 1}'
        assert bare.unparsed_body() is None  # only parsing tells whether it is JSON
        assert deferred == at_once and bare == bare_at_once
        assert deferred.data == {"a": 1} and deferred.unparsed_body() is None
    finally:
        await consumer.aclose()


@asyncio_test
async def test_ingress_percent_encoded_path_kept_raw_and_routing() -> None:
    consumer = await _consumer(paths=["/hooks"])
    try:
        raw = "/hooks/a%2Fb/caf%C3%A9"
        task = _post(f"{consumer.url}{raw}", data=b"x", headers={"Content-Type": "text/plain"})
        delivery = await _read(consumer)
        assert delivery.message.get("path") == raw
        await delivery.ack()
        assert (await _answer(task)).status == 202
        assert (await _request(f"{consumer.url}/hooksx")).status == 404
        assert (await _request(f"{consumer.url}/hooks/a", method="GET")).status == 405
    finally:
        await consumer.aclose()


@asyncio_test
async def test_ingress_nack_retry_is_503_with_retry_after() -> None:
    consumer = await _consumer(retry_after=7)
    try:
        task = _post(f"{consumer.url}/x", data=b"{}")
        await (await _read(consumer)).nack("downstream unavailable", retry=True)
        answer = await _answer(task)
        assert answer.status == 503 and answer.headers["Retry-After"] == "7"
    finally:
        await consumer.aclose()


@asyncio_test
async def test_ingress_nack_no_retry_is_400_problem() -> None:
    consumer = await _consumer()
    try:
        task = _post(f"{consumer.url}/x", data=b"{}")
        await (await _read(consumer)).nack("no definition matches", retry=False)
        answer = await _answer(task)
        assert answer.status == 400
        assert answer.headers["Content-Type"].startswith("application/problem+json")
        assert answer.json() == {
            "type": "about:blank",
            "title": "Bad Request",
            "status": 400,
            "detail": "no definition matches",
        }
    finally:
        await consumer.aclose()


@asyncio_test
async def test_ingress_too_large_is_413_declared_and_chunked() -> None:
    consumer = await _consumer(max_body_bytes=1000)
    try:
        answer = await _request(f"{consumer.url}/x", data=b"x" * 200_000)
        assert answer.status == 413

        async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: chunked
            for _ in range(50):
                yield b"y" * 100

        answer = await _request(f"{consumer.url}/x", data=chunks())
        assert answer.status == 413
        with pytest.raises(TimeoutError):  # nothing was delivered
            async with asyncio.timeout(0.3):
                await read_one(consumer)
        assert consumer.in_flight == 0
    finally:
        await consumer.aclose()


@asyncio_test
async def test_ingress_back_pressure_503_when_full() -> None:
    consumer = await _consumer(max_in_flight=2)
    try:
        held_tasks = [_post(f"{consumer.url}/x", data=b"{}") for _ in range(2)]
        held = [await _read(consumer), await _read(consumer)]
        assert consumer.in_flight == 2
        refused = await _request(f"{consumer.url}/x", data=b"{}")
        assert refused.status == 503 and "Retry-After" in refused.headers
        for delivery in held:
            await delivery.ack()
        assert [(await _answer(t)).status for t in held_tasks] == [202, 202]
        task = _post(f"{consumer.url}/x", data=b"{}")  # room again
        await (await _read(consumer)).ack()
        assert (await _answer(task)).status == 202
    finally:
        await consumer.aclose()


@asyncio_test
async def test_ingress_settle_timeout_is_504_and_late_settlement_ignored() -> None:
    consumer = await _consumer(settle_timeout=0.3)
    try:
        task = _post(f"{consumer.url}/x", data=b"{}")
        delivery = await _read(consumer)
        assert (await _answer(task)).status == 504
        await delivery.ack()  # nothing left to answer; must not fail
        assert consumer.in_flight == 0
    finally:
        await consumer.aclose()


@asyncio_test
async def test_ingress_close_answers_waiting_requests() -> None:
    consumer = await _consumer()
    task = _post(f"{consumer.url}/x", data=b"{}")
    delivery = await _read(consumer)
    await consumer.aclose()
    assert (await _answer(task)).status == 503
    await delivery.ack()  # late: ignored


# ====================================================================== egress


@dataclass
class Receiver:
    """A webhook receiver answering from a script of statuses (then 200), or with the
    status a request names in its `X-Answer` header (the requests of one batch are sent
    at once, so their arrival order is not theirs); failures carry
    `Retry-After: <retry_after>` when it is set. `arrived` holds each request's arrival
    (time.monotonic())."""

    statuses: deque[int] = field(default_factory=deque)
    retry_after: str | None = None
    seen: list[tuple[str, str, list[tuple[str, str]], bytes]] = field(default_factory=list)
    arrived: list[float] = field(default_factory=list)
    runner: web.AppRunner | None = None
    url: str = ""

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self.runner.addresses[0][1]}"

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()

    async def _handle(self, request: web.Request) -> web.Response:
        self.arrived.append(time.monotonic())
        headers = [(k, v) for k, v in request.headers.items()]
        self.seen.append((request.method, request.raw_path, headers, await request.read()))
        named = request.headers.get("X-Answer")
        status = int(named) if named else self.statuses.popleft() if self.statuses else 200
        if status < 400:
            return web.Response(status=status)
        extra = {"Retry-After": self.retry_after} if self.retry_after is not None else None
        return web.Response(status=status, text="nope", headers=extra)


def _producer(url: str, **options: Any) -> HttpProducer:
    return HttpProducer(EndpointSettings(url, options=options))


def _record(**fields: Any) -> NativeMessage:
    data = fields.pop("data", {"n": 1})
    return NativeMessage("HTTP", fields, data)


def _answered(status: int) -> NativeMessage:
    """A record the receiver answers with `status`."""
    return _record(headers=[{"name": "X-Answer", "value": str(status)}])


@asynccontextmanager
async def _egress(*statuses: int, retry_after: str | None = None,
                  path: str = "") -> AsyncIterator[tuple[Receiver, HttpProducer]]:
    """A receiver answering `statuses` (then 200) and a producer sending to it + `path`."""
    receiver = Receiver(deque(statuses), retry_after)
    await receiver.start()
    producer = _producer(receiver.url + path)
    try:
        yield receiver, producer
    finally:
        await producer.aclose()
        await receiver.stop()


async def _write(producer: HttpProducer, *records: NativeMessage) -> list[Any]:
    async with asyncio.timeout(TIMEOUT):
        return await write(producer, records)


@asyncio_test
async def test_egress_delivered_with_path_query_headers_and_body() -> None:
    async with _egress(path="/base") as (receiver, producer):
        record = _record(
            method="PUT",
            path="/in/a%2Fb",
            query={"k": "v 1"},
            headers=[
                {"name": "X-Trace-Id", "value": "t-1"},
                {"name": "Content-Length", "value": "999"},  # framing: not copied
            ],
            data={"amount": 12.5},
        )
        [outcome] = await _write(producer, record)
        assert outcome.delivered
        [(method, path, headers, body)] = receiver.seen
        assert method == "PUT"
        assert path == "/base/in/a%2Fb?k=v%201"
        assert ("X-Trace-Id", "t-1") in headers
        assert dict(headers)["Content-Type"] == "application/json"
        assert json.loads(body) == {"amount": 12.5}


@asyncio_test
async def test_egress_makes_one_request_per_write_the_route_retries() -> None:
    async with _egress(503, 503) as (receiver, producer):
        for expected in (1, 2):
            [outcome] = await _write(producer, _record())
            assert not outcome.delivered and outcome.retryable
            assert len(receiver.seen) == expected  # no retry of its own
        [outcome] = await _write(producer, _record())
        assert outcome.delivered
        assert len(receiver.seen) == 3
        assert receiver.seen[0][0] == "POST"


@asyncio_test
async def test_egress_408_429_5xx_are_retryable_after_one_request_each() -> None:
    async with _egress(408, 429, 500, 503) as (receiver, producer):
        for status in (408, 429, 500, 503):
            [outcome] = await _write(producer, _record())
            assert not outcome.delivered and outcome.retryable
            assert outcome.reason is not None and str(status) in outcome.reason
            assert outcome.retry_after is None  # the receiver named no wait
        assert len(receiver.seen) == 4


@asyncio_test
async def test_egress_reports_retry_after_in_seconds_without_waiting() -> None:
    async with _egress(retry_after="30") as (receiver, producer):
        started = time.monotonic()
        first, second = await _write(producer, _answered(429), _answered(503))
        assert time.monotonic() - started < 5.0  # reported, not waited out
        assert first.retry_after == 30.0 and first.retryable and "429" in (first.reason or "")
        assert second.retry_after == 30.0 and "503" in (second.reason or "")
        assert len(receiver.seen) == 2
        receiver.statuses.append(503)
        receiver.retry_after = "Fri, 31 Dec 1999 23:59:59 GMT"  # the date form is ignored
        [dated] = await _write(producer, _record())
        assert dated.retryable and dated.retry_after is None


@asyncio_test
async def test_egress_400_not_retried() -> None:
    async with _egress() as (receiver, producer):
        bad, good = await _write(producer, _answered(400), _answered(200))
        assert not bad.delivered and not bad.retryable
        assert bad.reason == "HTTP 400: nope"
        assert good.delivered
        assert len(receiver.seen) == 2


@asyncio_test
async def test_egress_connection_refused_fails_retryable_quickly() -> None:
    producer = _producer(f"http://127.0.0.1:{free_port()}")
    try:
        started = time.monotonic()
        outcomes = await _write(producer, _record(), _record(), _record())
        assert time.monotonic() - started < 2.0
        assert all(not o.delivered and o.retryable for o in outcomes)
    finally:
        await producer.aclose()


@asyncio_test
async def test_egress_into_ingress_round_trip() -> None:
    consumer = await _consumer()
    producer = _producer(consumer.url)
    try:
        sent = _record(path="/hooks/a%20b", headers=[{"name": "X-Id", "value": "1"}])
        write = asyncio.create_task(_write(producer, sent))
        delivery = await _read(consumer)
        assert delivery.message.get("path") == "/hooks/a%20b"
        assert delivery.message.header("X-Id") == "1"
        assert delivery.message.data == {"n": 1}
        await delivery.ack()
        [outcome] = await write
        assert outcome.delivered
    finally:
        await producer.aclose()
        await consumer.aclose()


# ====================================================================== egress in a route

STORE = Path(__file__).resolve().parents[2] / "config/examples/store.xreg.json"


def _sale() -> NativeMessage:
    return NativeMessage("MQTT/5.0", {
        "topic_name": "/store/12/cashierdesk/1", "qos": 1,
        "user_properties": [{"name": "eventType", "value": "com.example.sale"}]},
        data={"desk": 1})


async def _route_to(producer: HttpProducer, retry: RetryPolicy) -> tuple[
        MemoryConsumer, MemoryProducer]:
    """One sale through a route whose only output is `producer`; back when it is settled."""
    consumer = MemoryConsumer([_sale()], close_when_empty=True)
    dlq = MemoryProducer()
    route = Route("to-http", "in", consumer, Converter(load_catalog([STORE]).messages()),
                  [Output("hook", "HTTP", producer)],
                  deadletter=Output("dlq", "KAFKA", dlq, defaults={"topic": "dead"}),
                  metrics=Metrics(), retry=retry)
    await route.start()
    await asyncio.wait_for(route.wait_finished(), 3 * TIMEOUT)
    await route.stop(grace=TIMEOUT)
    return consumer, dlq


@asyncio_test
async def test_route_retries_http_egress_waiting_out_retry_after() -> None:
    async with _egress(503, retry_after="1") as (receiver, producer):
        consumer, dlq = await _route_to(producer, RetryPolicy(3, 0.01, 5.0))
        assert len(receiver.seen) == 2  # the producer's one request, the route's retry
        assert receiver.arrived[1] - receiver.arrived[0] >= 1.0  # not the 10 ms backoff
        assert len(consumer.acked) == 1 and not dlq.written


@asyncio_test
async def test_route_caps_retry_after_at_its_longest_backoff_then_dead_letters() -> None:
    async with _egress(503, 503, 503, retry_after="120") as (receiver, producer):
        started = time.monotonic()
        consumer, dlq = await _route_to(producer, RetryPolicy(3, 0.01, 0.2))
        assert time.monotonic() - started < TIMEOUT  # two waits of at most 0.2 s
        assert len(receiver.seen) == 3  # the route's budget, nothing more
        gaps = [b - a for a, b in zip(receiver.arrived, receiver.arrived[1:], strict=False)]
        assert all(gap >= 0.2 for gap in gaps)  # Retry-After raised the waits to the cap
        assert len(consumer.acked) == 1 and len(dlq.written) == 1
