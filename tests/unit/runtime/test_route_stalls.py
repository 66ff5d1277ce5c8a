"""Honest health (issue 28): a route that stops making progress says so -- not ready,
`xrgw_route_stalled{route,cause}` at 1, one log line with the underlying error (then
rate-limited) -- and a sink that is down for a while is back-pressure, not dead letters
(the default retry budget has no limit while the failure is transient)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

import pytest

from adapters.memory import MemoryConsumer, MemoryProducer
from gateway.convert import Converter
from gateway.observability.metrics import Metrics
from gateway.policies.retry import RetryPolicy
from gateway.ports import Confirmation, NotConnected, Outcome
from gateway.record import NativeMessage
from gateway.runtime.route import Output, Route
from gateway.runtime.stalls import CAUSES, REPEAT_SECONDS, Stalls
from tests.unit.runtime.test_route import CATALOG, sale, sample

QUICK = RetryPolicy(attempts=0, initial_backoff=0.001, max_backoff=0.01)  # no limit
STALL = 0.2


def _route(consumer: MemoryConsumer, out: MemoryProducer, dlq: MemoryProducer,
           retry: RetryPolicy = QUICK) -> tuple[Route, Metrics]:
    metrics = Metrics()
    route = Route("store", "store-mqtt", consumer, Converter(CATALOG.messages()),
                  [Output("events-kafka", "KAFKA", out, defaults={"topic": "t"})],
                  deadletter=Output("dlq", "KAFKA", dlq, defaults={"topic": "d"}),
                  metrics=metrics, retry=retry, stall_after=STALL, inflight=8)
    return route, metrics


async def _until(condition, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.01)


def _stalled(metrics: Metrics, cause: str) -> float:
    return sample(metrics, "xrgw_route_stalled", route="store", cause=cause)


class Down(MemoryProducer):
    """A sink that is unreachable until `up()`: every send fails, retryably."""

    def __init__(self) -> None:
        super().__init__(rule=self._down)
        self.is_down = True
        self.attempts = 0

    def _down(self, message: NativeMessage) -> Outcome | None:
        self.attempts += 1
        return Outcome.failed("connection refused", retryable=True) if self.is_down else None


def test_a_sink_down_longer_than_the_old_budget_is_back_pressure_not_dead_letters(
        caplog: pytest.LogCaptureFixture) -> None:
    out, dlq = Down(), MemoryProducer()
    consumer = MemoryConsumer([sale(i) for i in range(1, 6)])
    route, metrics = _route(consumer, out, dlq)

    async def scenario() -> None:
        await route.start()
        try:
            # Far more attempts than the old default budget (5) allowed, and stalled.
            await _until(lambda: out.attempts > 40 and bool(route.stalled))
            assert [s.cause for s in route.stalled] == ["output-unavailable"]
            assert [s.endpoint for s in route.stalled] == ["events-kafka"]
            assert not route.ready
            assert _stalled(metrics, "output-unavailable") == 1
            assert not dlq.written and not consumer.acked
            out.is_down = False
            await _until(lambda: len(consumer.acked) == 5)
            await _until(lambda: not route.stalled)
            assert route.ready and _stalled(metrics, "output-unavailable") == 0
        finally:
            await route.stop(grace=1)

    with caplog.at_level(logging.INFO, logger="xrgw.route"):
        asyncio.run(scenario())
    assert sorted(r.data["desk"] for r in out.written) == [1, 2, 3, 4, 5]
    assert not dlq.written  # nothing dead-lettered: the sink was only down
    stalled = [r for r in caplog.records if r.getMessage().startswith("route stalled")]
    assert len(stalled) == 1  # once, not once per retry
    assert stalled[0].__dict__["error"] == "connection refused"
    assert stalled[0].__dict__["reason"] == "output-unavailable"
    assert any(r.getMessage().startswith("route recovered") for r in caplog.records)


def test_a_configured_budget_still_dead_letters_as_undeliverable() -> None:
    out, dlq = Down(), MemoryProducer()
    consumer = MemoryConsumer([sale(1)], close_when_empty=True)
    route, _ = _route(consumer, out, dlq,
                      RetryPolicy(attempts=3, initial_backoff=0.001, max_backoff=0.002))

    async def scenario() -> None:
        await route.start()
        await asyncio.wait_for(route.wait_finished(), 5)
        await route.stop(grace=1)

    asyncio.run(scenario())
    assert out.attempts == 3 and len(dlq.written) == 1


def test_a_permanent_rejection_is_dead_lettered_at_once_even_without_a_limit() -> None:
    out = MemoryProducer(rule=lambda m: Outcome.failed("HTTP 400", retryable=False))
    dlq = MemoryProducer()
    consumer = MemoryConsumer([sale(1)], close_when_empty=True)
    route, _ = _route(consumer, out, dlq)

    async def scenario() -> None:
        await route.start()
        await asyncio.wait_for(route.wait_finished(), 5)
        await route.stop(grace=1)

    asyncio.run(scenario())
    assert len(dlq.written) == 1 and len(consumer.acked) == 1


def test_a_held_dead_letter_is_a_stall_with_its_error(caplog: pytest.LogCaptureFixture) -> None:
    dlq = Down()
    out = MemoryProducer(rule=lambda m: Outcome.failed("HTTP 400", retryable=False))
    consumer = MemoryConsumer([sale(1)])
    route, metrics = _route(consumer, out, dlq)

    async def scenario() -> None:
        await route.start()
        try:
            await _until(lambda: bool(route.stalled))
            assert [(s.cause, s.endpoint) for s in route.stalled] == [("deadletter-held", "dlq")]
            assert _stalled(metrics, "deadletter-held") == 1 and not route.ready
            dlq.is_down = False
            await _until(lambda: len(consumer.acked) == 1 and not route.stalled)
            assert _stalled(metrics, "deadletter-held") == 0
        finally:
            await route.stop(grace=1)

    with caplog.at_level(logging.INFO, logger="xrgw.route"):
        asyncio.run(scenario())
    assert len(dlq.written) == 1
    [line] = [r for r in caplog.records if r.getMessage().startswith("route stalled")]
    assert line.__dict__["error"] == "connection refused"
    assert line.__dict__["endpoint"] == "dlq"


class Hanging(MemoryProducer):
    """Accepts a batch and never confirms it (a wedged client)."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()

    async def submit(self, messages: Sequence[NativeMessage]) -> Confirmation:
        async def never() -> list[Outcome]:
            await self.release.wait()
            return [Outcome.ok() for _ in messages]
        return asyncio.ensure_future(never())


def test_a_window_that_does_not_move_is_a_stall() -> None:
    out = Hanging()
    consumer = MemoryConsumer([sale(i) for i in range(1, 4)])
    route, metrics = _route(consumer, out, MemoryProducer())

    async def scenario() -> None:
        await route.start()
        try:
            await _until(lambda: bool(route.stalled))
            assert [(s.cause, s.endpoint) for s in route.stalled] == [("no-progress", "store")]
            assert _stalled(metrics, "no-progress") == 1 and not route.ready
            out.release.set()
            await _until(lambda: len(consumer.acked) == 3 and not route.stalled)
            assert _stalled(metrics, "no-progress") == 0 and route.ready
        finally:
            await route.stop(grace=1)

    asyncio.run(scenario())


class FailingReads(MemoryConsumer):
    """Every read fails the way a client with a poison record in its fetch does: the
    adapter reports it as a lost connection, and reconnecting succeeds at once."""

    def __init__(self) -> None:
        super().__init__([sale(1)])
        self.failing = True
        self.reads = 0

    async def read_batch(self, limit: int):  # type: ignore[no-untyped-def]
        self.reads += 1
        if self.failing:
            raise NotConnected("UnsupportedCodecError: libraries for lz4 not found")
        return await super().read_batch(limit)


def test_reads_that_keep_failing_are_a_stall_logged_once_with_the_error(
        caplog: pytest.LogCaptureFixture) -> None:
    consumer = FailingReads()
    out = MemoryProducer()
    route, metrics = _route(consumer, out, MemoryProducer())

    async def scenario() -> None:
        await route.start()
        try:
            await _until(lambda: bool(route.stalled) and consumer.reads > 20)
            assert [(s.cause, s.endpoint) for s in route.stalled] == [
                ("source-failing", "store-mqtt")]
            assert _stalled(metrics, "source-failing") == 1 and not route.ready
            consumer.failing = False
            await _until(lambda: len(consumer.acked) == 1 and not route.stalled)
            assert _stalled(metrics, "source-failing") == 0
        finally:
            await route.stop(grace=1)

    with caplog.at_level(logging.INFO, logger="xrgw.route"):
        asyncio.run(scenario())
    errors = [r for r in caplog.records
              if "UnsupportedCodecError" in str(r.__dict__.get("error", ""))]
    # The first failure and the stall: two lines for dozens of failed reads.
    assert [r.getMessage() for r in errors] == [
        "reading from the source failed; reconnecting", "route stalled: source-failing at "
        "store-mqtt"]


def test_every_cause_is_exported_at_zero_from_the_start() -> None:
    metrics = Metrics()
    Stalls("r", metrics, 30)
    for cause in CAUSES:
        assert metrics.registry.get_sample_value(
            "xrgw_route_stalled", {"route": "r", "cause": cause}) == 0


def test_a_stall_is_logged_again_at_most_once_per_repeat_interval(
        caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    stalls = Stalls("r", Metrics(), 10, clock=lambda: now[0])
    with caplog.at_level(logging.INFO, logger="xrgw.route"):
        stalls.failing("output-unavailable", "k", "down")
        assert stalls.check() == []  # not yet: brief trouble is back-pressure
        for step in range(1, 400):
            now[0] = step * 1.0
            stalls.failing("output-unavailable", "k", "down")
            stalls.check()
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0] == "route stalled: output-unavailable at k"
    repeats = [line for line in lines if line.startswith("route still stalled")]
    # Stalled at t=10, then repeats at 70, 130, ... up to 399.
    assert len(repeats) == int((399 - 10) // REPEAT_SECONDS)
    assert "for 70 s (71 failure(s))" in repeats[0]


def test_one_failed_read_is_no_stall_but_failures_that_go_on_are() -> None:
    now = [0.0]
    stalls = Stalls("r", Metrics(), 10, clock=lambda: now[0])
    stalls.failing("source-failing", "in", "connection reset")  # one reconnect
    for step in range(1, 30):
        now[0] = float(step)
        stalls.quiet("source-failing", "in")
        stalls.check()
    assert not stalls.stalls and not stalls.active("source-failing", "in")
    for step in range(30, 45):  # a read fails every second
        now[0] = float(step)
        stalls.failing("source-failing", "in", "UnsupportedCodecError")
        stalls.quiet("source-failing", "in")
        stalls.check()
    assert [(s.cause, s.endpoint) for s in stalls.stalls] == [("source-failing", "in")]


class Waiting(MemoryConsumer):
    """Deliveries whose sender waits until `gone` is set (an HTTP request and its 504)."""

    def __init__(self, messages: list[NativeMessage]) -> None:
        super().__init__(messages)
        self.gone = False

    async def read_batch(self, limit: int):  # type: ignore[no-untyped-def]
        from gateway.ports import Delivery

        return [Delivery(d.message, d._settle, None, lambda: not self.gone)
                for d in await super().read_batch(limit)]


def test_a_message_whose_sender_stopped_waiting_is_not_sent_again() -> None:
    """An HTTP sender answered 504 (settle_timeout) sends the message again itself: the
    route's own retries of it stop, so the sink does not get it twice (before: published
    later, after the 504, and again from the sender's retry)."""
    out, dlq = Down(), MemoryProducer()
    consumer = Waiting([sale(1)])
    route, _ = _route(consumer, out, dlq)

    async def scenario() -> None:
        await route.start()
        try:
            await _until(lambda: out.attempts >= 3)
            consumer.gone = True  # the 504
            # Settled once its retries stopped (the settlement goes nowhere: the sender
            # was answered already).
            await _until(lambda: len(consumer.acked) == 1)
            out.is_down, consumer.gone = False, False
            consumer.feed(sale(2))  # the route goes on with the next one
            await _until(lambda: len(consumer.acked) == 2)
            assert not route.stalled
        finally:
            await route.stop(grace=1)

    asyncio.run(scenario())
    # The first was not sent again, nor dead-lettered; the second went through.
    assert [r.data["desk"] for r in out.written] == [2] and not dlq.written


class Ingress(MemoryConsumer):
    """A consumer whose senders wait on the line (`Admission`), recording its holds."""

    def __init__(self, messages: list[NativeMessage]) -> None:
        super().__init__(messages)
        self.holds: list[str | None] = []

    def hold(self, reason: str | None) -> None:
        self.holds.append(reason)


def test_a_stalled_route_holds_an_ingress_whose_senders_wait_and_lets_it_go_after() -> None:
    out = Down()
    consumer = Ingress([sale(1)])
    route, _ = _route(consumer, out, MemoryProducer())

    async def scenario() -> None:
        await route.start()
        try:
            await _until(lambda: "the route is stalled" in consumer.holds)
            out.is_down = False
            await _until(lambda: consumer.holds[-1] is None and len(consumer.acked) == 1)
        finally:
            await route.stop(grace=1)

    asyncio.run(scenario())
    # Held while the outputs connected (start), then while stalled, released after each.
    assert consumer.holds[-2:] == ["the route is stalled", None]


class WedgedThenDown(Down):
    """Holds its first batch without an answer (a wedged client) until `release`, then
    fails every send, retryably, while `is_down`."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()

    async def _write(self, messages: Sequence[NativeMessage]) -> list[Outcome]:
        await self.release.wait()
        return await super()._write(messages)


def test_a_standstill_an_output_failure_explains_is_not_also_no_progress() -> None:
    """One cause, one alert: once the wedged output fails openly, the window standing
    still is explained by it, and `no-progress` ends although nothing has settled."""
    out = WedgedThenDown()
    consumer = MemoryConsumer([sale(1), sale(2)])
    route, metrics = _route(consumer, out, MemoryProducer())

    def causes() -> list[tuple[str, str]]:
        return [(s.cause, s.endpoint) for s in route.stalled]

    async def scenario() -> None:
        await route.start()
        try:
            await _until(lambda: causes() == [("no-progress", "store")])
            out.release.set()  # the batch comes back failed; its retries fail too
            await _until(lambda: ("output-unavailable", "events-kafka") in causes())
            assert causes() == [("output-unavailable", "events-kafka")]
            assert route.inflight == 2  # nothing settled meanwhile
            assert _stalled(metrics, "no-progress") == 0
            assert _stalled(metrics, "output-unavailable") == 1
            out.is_down = False
            await _until(lambda: len(consumer.acked) == 2 and not route.stalled)
        finally:
            await route.stop(grace=1)

    asyncio.run(scenario())
