"""A route's start-up and connections (gateway/runtime/route.py): the backoff steps of
connecting, the connected gauge, an observing route leaving its producers alone, stray
listeners only on reply routes, the backlog gauges of the source, and a batch given back
after an internal error while settling."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from types import SimpleNamespace

import pytest

from adapters.memory import MemoryConsumer, MemoryProducer
from gateway.convert import Converter
from gateway.observability.metrics import Metrics
from gateway.policies.retry import RetryPolicy
from gateway.ports import Backlog, PartitionLag
from gateway.runtime.route import Output, Route
from tests.unit.runtime.test_reply import Service
from tests.unit.runtime.test_route import CATALOG, FAST, build, run_to_end, sale, sample


def test_connecting_backs_off_step_by_step_up_to_the_seventh_and_shows_the_gauge() -> None:
    asked: list[tuple[int, float]] = []
    metrics_box: list[Metrics] = []

    class Recording(RetryPolicy):
        def delay(self, attempt: int, at_least: float | None = None) -> float:
            gauge = sample(metrics_box[0], "xrgw_endpoint_connected", endpoint="events-kafka")
            asked.append((attempt, gauge))
            return 0.0

    out = MemoryProducer()
    out.connect_failures = 9
    route, consumer, _, _, metrics = build([sale(1)], out=out, retry=Recording(attempts=3))
    metrics_box.append(metrics)
    asyncio.run(run_to_end(route, consumer))
    assert asked == [(n, 0) for n in (0, 1, 2, 3, 4, 5, 6, 6, 6)]
    assert sample(metrics, "xrgw_endpoint_connected", endpoint="events-kafka") == 1
    assert len(out.written) == 1


def test_connecting_warns_once_with_the_error_and_says_how_many_attempts_it_took(
        caplog: pytest.LogCaptureFixture) -> None:
    """The first failure of an outage is a warning with its cause, the retries are debug
    lines; the connection is logged with its attempt count only when it took more than
    one (the source and the dead letter here connect at once: no line)."""
    out = MemoryProducer()
    out.connect_failures = 2
    route, consumer, _, _, _ = build([sale(1)], out=out, retry=FAST)
    with caplog.at_level(logging.DEBUG, logger="xrgw.route"):
        asyncio.run(run_to_end(route, consumer))
    down = [r for r in caplog.records if r.getMessage().startswith("endpoint not connected")]
    assert [(r.levelno, r.__dict__.get("endpoint"), r.__dict__.get("error")) for r in down] == [
        (logging.WARNING, "events-kafka", "injected connect failure"),
        (logging.DEBUG, "events-kafka", "injected connect failure")]
    assert [(r.getMessage(), r.__dict__.get("endpoint")) for r in caplog.records
            if r.getMessage().startswith("endpoint connected")] == [
        ("endpoint connected after 3 attempt(s)", "events-kafka")]


@pytest.mark.parametrize(("stall_after", "interval"), [(30.0, 1.0), (0.2, 0.1),
                                                       (0.001, 0.01)])
def test_the_stall_watch_looks_every_half_stall_after_and_at_least_every_second(
        monkeypatch: pytest.MonkeyPatch, stall_after: float, interval: float) -> None:
    """A stall is reported at most half a `stall_after` (and at most `WATCH_SECONDS`)
    after it has lasted `stall_after`, and the watch never spins faster than every
    10 ms. Read from the pauses the watch asks for (a stand-in for the route module's
    `asyncio.sleep`), not from a clock: a timed test would not hold on a loaded host."""
    from gateway.runtime import route as route_module

    class Enough(Exception):
        pass

    pauses: list[float] = []

    async def sleep(delay: float) -> None:
        pauses.append(delay)
        if len(pauses) == 3:
            raise Enough

    consumer = MemoryConsumer([sale(1)])
    route = Route("store", "store-mqtt", consumer, Converter(CATALOG.messages()),
                  [Output("k", "KAFKA", MemoryProducer(), defaults={"topic": "t"})],
                  deadletter=None, metrics=Metrics(), retry=FAST, stall_after=stall_after)
    monkeypatch.setattr(route_module, "asyncio", SimpleNamespace(sleep=sleep))
    with pytest.raises(Enough):
        asyncio.run(route._watch_stalls())
    assert pauses == [interval] * 3


class Flaky(MemoryConsumer):
    """Loses its connection once, then fails once with an unexpected error."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.troubles: list[Exception] = [RuntimeError("bug in the client")]
        self.lost = True

    async def read_batch(self, limit: int):  # type: ignore[no-untyped-def]
        from gateway.ports import NotConnected

        if self.lost:
            self.lost = False
            self._connected = False
            raise NotConnected("connection reset")
        if self.troubles:
            raise self.troubles.pop()
        return await super().read_batch(limit)


def test_a_source_that_drops_is_reconnected_and_one_that_fails_is_read_again() -> None:
    asked: list[int] = []

    class Recording(RetryPolicy):
        def delay(self, attempt: int, at_least: float | None = None) -> float:
            asked.append(attempt)
            return 0.0

    consumer = Flaky([sale(1)], close_when_empty=True)
    out, metrics = MemoryProducer(), Metrics()
    gauges: list[float] = []
    route = Route("store", "store-mqtt", consumer, Converter(CATALOG.messages()),
                  [Output("k", "KAFKA", out, defaults={"topic": "t"})], deadletter=None,
                  metrics=metrics, retry=Recording(attempts=2))
    connect = consumer.connect

    async def watched() -> None:
        gauges.append(sample(metrics, "xrgw_endpoint_connected", endpoint="store-mqtt"))
        await connect()

    consumer.connect = watched  # type: ignore[method-assign]
    asyncio.run(run_to_end(route, consumer))
    assert gauges == [0, 0]  # at start, and after the drop the gauge went down first
    assert asked == [0]  # the unexpected error waited the first backoff step
    assert len(out.written) == 1 and len(consumer.acked) == 1
    assert sample(metrics, "xrgw_endpoint_connected", endpoint="store-mqtt") == 1


def test_a_route_stopped_before_it_started_stops_cleanly() -> None:
    route, consumer, out, _, _ = build([sale(1)])
    asyncio.run(route.stop(grace=1))
    assert not consumer.acked and not consumer.nacked and not out.written


def test_a_batch_caught_mid_submit_by_stop_is_given_back_for_redelivery() -> None:
    """stop() cancels intake while a batch is being handed to its output: the batch's
    messages go back to the source (retry), none is acked, the window is freed."""
    class _Stuck(MemoryProducer):
        def __init__(self) -> None:
            super().__init__()
            self.submitting = asyncio.Event()

        async def submit(self, messages):  # type: ignore[no-untyped-def]
            self.submitting.set()
            await asyncio.Event().wait()  # never hands the batch over

    async def scenario() -> tuple[MemoryConsumer, Route]:
        consumer, out = MemoryConsumer([sale(1), sale(2)]), _Stuck()
        route = Route("store", "store-mqtt", consumer, Converter(CATALOG.messages()),
                      [Output("k", "KAFKA", out, defaults={"topic": "t"})],
                      deadletter=None, metrics=Metrics(), retry=FAST)
        await route.start()
        await asyncio.wait_for(out.submitting.wait(), 5)
        await route.stop(grace=1)
        return consumer, route

    consumer, route = asyncio.run(scenario())
    assert not consumer.acked
    assert [(n.reason, n.retry) for n in consumer.nacked] == [
        ("stopping", True), ("stopping", True)]
    assert route.inflight == 0  # freed, as after any batch


def test_the_route_never_holds_more_than_its_window_whatever_the_source_would_give() -> None:
    """A source without a bound of its own (max_in_flight far above the window) and a
    sink that holds everything: the route reads up to its window and then waits."""
    class _Holding(MemoryProducer):
        def __init__(self) -> None:
            super().__init__()
            self.held = 0
            self.release = asyncio.Event()

        async def _write(self, messages):  # type: ignore[no-untyped-def]
            self.held += len(messages)  # submitted at once; confirmed on release
            await self.release.wait()
            return await super()._write(messages)

    async def scenario() -> tuple[int, int, int]:
        consumer = MemoryConsumer([sale(n) for n in range(40)], max_in_flight=1000,
                                  close_when_empty=True)
        out = _Holding()
        route = Route("store", "store-mqtt", consumer, Converter(CATALOG.messages()),
                      [Output("k", "KAFKA", out, defaults={"topic": "t"})],
                      deadletter=None, metrics=Metrics(), retry=FAST, inflight=8)
        await route.start()
        for _ in range(200):  # until the window is full
            if route.inflight >= 8:
                break
            await asyncio.sleep(0.005)
        await asyncio.sleep(0.05)  # room for a read past the window, if there were one
        seen = (route.inflight, consumer.unsettled, out.held)
        out.release.set()
        await asyncio.wait_for(route.wait_finished(), 5)
        await route.stop(grace=1)
        return (*seen[:2], len(consumer.acked))

    inflight, unsettled, acked = asyncio.run(scenario())
    assert (inflight, unsettled) == (8, 8)
    assert acked == 40  # and everything flows once the sink lets go


def test_stop_leaves_no_task_of_the_route_running() -> None:
    async def scenario() -> list[asyncio.Task[object]]:
        route, consumer, _, _, _ = build([sale(1), sale(2)])
        await run_to_end(route, consumer)
        return [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]

    assert asyncio.run(scenario()) == []


def test_an_empty_read_is_not_the_end_of_the_input() -> None:
    class _EmptyFirst(MemoryConsumer):
        empty_reads = 2

        async def read_batch(self, limit: int):  # type: ignore[no-untyped-def]
            if self.empty_reads:
                self.empty_reads -= 1
                return []  # e.g. a poll that timed out
            return await super().read_batch(limit)

    source = _EmptyFirst([sale(1), sale(2)], close_when_empty=True)
    out = MemoryProducer()
    route = Route("store", "store-mqtt", source, Converter(CATALOG.messages()),
                  [Output("k", "KAFKA", out, defaults={"topic": "t"})],
                  deadletter=Output("dlq", "KAFKA", MemoryProducer()), metrics=Metrics(),
                  retry=FAST)
    asyncio.run(run_to_end(route, source))
    assert len(source.acked) == 2 and len(out.written) == 2


def test_an_observing_route_never_connects_its_producers() -> None:
    consumer = MemoryConsumer([sale(1)], close_when_empty=True)
    out, dlq = MemoryProducer(), MemoryProducer()
    route = Route("store", "store-mqtt", consumer, Converter(CATALOG.messages()),
                  [Output("k", "KAFKA", out, defaults={"topic": "t"})],
                  deadletter=Output("dlq", "KAFKA", dlq), metrics=Metrics(), retry=FAST,
                  observe=True)
    asyncio.run(run_to_end(route, consumer))
    assert not out.connected and not dlq.connected
    assert len(consumer.acked) == 1 and not out.written


def _listener_after_start(reply_timeout: float | None, observe: bool) -> object:
    service = Service()
    consumer = MemoryConsumer(close_when_empty=True)
    route = Route("r", "in", consumer, Converter(CATALOG.messages()),
                  [Output("svc", "NATS", service)], deadletter=None, metrics=Metrics(),
                  reply_timeout=reply_timeout, observe=observe)
    asyncio.run(run_to_end(route, consumer))
    return service.replies.listener


def test_only_a_reply_route_that_sends_listens_for_stray_answers() -> None:
    assert _listener_after_start(1.0, observe=False) is not None
    assert _listener_after_start(None, observe=False) is None
    assert _listener_after_start(1.0, observe=True) is None


class Lagging(MemoryConsumer):
    async def backlog(self) -> Sequence[Backlog]:
        return [PartitionLag("orders", 3, 17)]


def test_the_sources_backlog_is_shown_while_the_route_runs() -> None:
    consumer = Lagging([sale(1)])
    metrics = Metrics()
    route = Route("store", "store-mqtt", consumer, Converter(CATALOG.messages()),
                  [Output("k", "KAFKA", MemoryProducer(), defaults={"topic": "t"})],
                  deadletter=None, metrics=metrics, retry=FAST)

    def lag() -> float | None:
        return metrics.registry.get_sample_value(
            "xrgw_consumer_lag", {"endpoint": "store-mqtt", "topic": "orders", "partition": "3"})

    async def scenario() -> list[float | None]:
        await route.start()
        for _ in range(200):
            if lag() is not None:
                break
            await asyncio.sleep(0.001)
        seen = [lag()]
        await route.stop(grace=1)
        return [*seen, lag()]

    assert asyncio.run(scenario()) == [17, None]  # shown, then removed on stop


class Unsteady(MemoryProducer):
    """Its `connected` raises once after the first send: an internal error while the
    settler works on the batch."""

    def __init__(self) -> None:
        super().__init__()
        self.sends = 0

    @property
    def connected(self) -> bool:
        if self.sends == 1:
            self.sends += 1
            raise RuntimeError("state lost")
        return self._connected

    async def _write(self, messages):  # type: ignore[no-untyped-def]
        self.sends += 1
        return await super()._write(messages)


def test_a_batch_that_fails_while_settling_is_given_back_as_internal_error() -> None:
    route, consumer, out, _, _ = build([sale(1)], out=Unsteady())
    asyncio.run(run_to_end(route, consumer))
    assert [(n.reason, n.retry) for n in consumer.nacked] == [("internal error", True)]
    assert len(consumer.acked) == 1  # redelivered, then settled
    assert len(out.written) == 2 and route.inflight == 0  # sent again after redelivery


class Silent(MemoryConsumer):
    """A source that turns not connected while it reads (a Kafka broker that stops
    answering fetches): no NotConnected is raised, `connected` just says so."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.answering = True

    @property
    def connected(self) -> bool:
        return super().connected and self.answering


def test_the_source_gauge_follows_a_source_that_turns_not_connected_while_it_reads() -> None:
    async def scenario() -> list[float]:
        consumer = Silent([], max_in_flight=8)
        metrics = Metrics()
        route = Route("store", "store-kafka", consumer, Converter(CATALOG.messages()),
                      [Output("k", "KAFKA", MemoryProducer(), defaults={"topic": "t"})],
                      deadletter=None, metrics=metrics, retry=FAST, stall_after=0.1)
        seen = []

        async def gauge_becomes(value: float) -> None:
            async with asyncio.timeout(5):
                while sample(metrics, "xrgw_endpoint_connected",
                             endpoint="store-kafka") != value:
                    await asyncio.sleep(0.01)
            seen.append(value)

        await route.start()
        try:
            await gauge_becomes(1)
            consumer.answering = False
            await gauge_becomes(0)
            assert not route.ready
            consumer.answering = True
            await gauge_becomes(1)
        finally:
            await route.stop(grace=1)
        return seen

    assert asyncio.run(scenario()) == [1, 0, 1]


def test_only_an_unexpected_read_error_is_logged_with_its_traceback(
        caplog: pytest.LogCaptureFixture) -> None:
    """A dropped connection is routine (one warning); an exception a consumer should
    never raise is a bug, logged with its traceback."""
    def lines(lost: bool, troubles: list[Exception]) -> list[logging.LogRecord]:
        caplog.clear()
        consumer = Flaky([sale(1)], close_when_empty=True)
        consumer.lost, consumer.troubles = lost, troubles
        route = Route("store", "store-mqtt", consumer, Converter(CATALOG.messages()),
                      [Output("k", "KAFKA", MemoryProducer(), defaults={"topic": "t"})],
                      deadletter=None, metrics=Metrics(), retry=FAST)
        with caplog.at_level(logging.WARNING, logger="xrgw.route"):
            asyncio.run(run_to_end(route, consumer))
        return [r for r in caplog.records if r.name == "xrgw.route"]

    dropped = lines(True, [])
    assert [r.getMessage() for r in dropped] == ["reading from the source failed; reconnecting"]
    bug = lines(False, [RuntimeError("bug in the client")])
    assert [r.getMessage() for r in bug] == ["consumer failed; reconnecting",
                                             "reading from the source failed; reconnecting"]
    assert bug[0].exc_info is not None


def test_a_source_that_drops_again_right_after_a_reconnect_is_backed_off() -> None:
    """One drop is reconnected at once; dropping again right after the reconnect is
    something a reconnect does not cure: the next one waits the first backoff step."""
    asked: list[int] = []

    class Recording(RetryPolicy):
        def delay(self, attempt: int, at_least: float | None = None) -> float:
            asked.append(attempt)
            return 0.0

    class Dropping(MemoryConsumer):
        drops = 2

        async def read_batch(self, limit: int):  # type: ignore[no-untyped-def]
            from gateway.ports import NotConnected

            if self.drops:
                self.drops -= 1
                raise NotConnected("connection reset")
            return await super().read_batch(limit)

    consumer = Dropping([sale(1)], close_when_empty=True)
    route = Route("store", "store-mqtt", consumer, Converter(CATALOG.messages()),
                  [Output("k", "KAFKA", MemoryProducer(), defaults={"topic": "t"})],
                  deadletter=None, metrics=Metrics(), retry=Recording(attempts=2))
    asyncio.run(run_to_end(route, consumer))
    assert asked == [0]  # the second drop in a row waited; the first did not
    assert len(consumer.acked) == 1


def test_a_source_that_admits_senders_holds_them_while_the_outputs_connect() -> None:
    """An HTTP ingress (`Admission`) tells senders "retry later" until the outputs are
    connected, then admits them; an observing route never holds its senders."""
    def holds(observe: bool) -> list[str | None]:
        said: list[str | None] = []

        class Admitting(MemoryConsumer):
            def hold(self, reason: str | None) -> None:
                said.append(reason)

        consumer = Admitting([sale(1)], close_when_empty=True)
        route = Route("store", "store-mqtt", consumer, Converter(CATALOG.messages()),
                      [Output("k", "KAFKA", MemoryProducer(), defaults={"topic": "t"})],
                      deadletter=None, metrics=Metrics(), retry=FAST, observe=observe)
        asyncio.run(run_to_end(route, consumer))
        return said

    assert holds(observe=False)[:2] == ["the route's outputs are not connected yet", None]
    assert holds(observe=True) == []
