"""A Kafka consumer's liveness (adapters/kafka/liveness.py): a fetch unanswered for
`overdue_after` makes the consumer not connected, an idle broker that answers its
long-polls does not, and the episode is logged once when it starts and once when it ends.
No broker: the clock and aiokafka's client are stand-ins; the integration tests
(tests/integration/test_faults_proxy.py, test_adapter_kafka.py) check it on a real link."""

from __future__ import annotations

import asyncio
import logging
from types import SimpleNamespace
from typing import Any

import pytest
from aiokafka.consumer import consumer as aiokafka_consumer  # type: ignore[import-untyped]
from aiokafka.errors import KafkaConnectionError  # type: ignore[import-untyped]

import adapters.kafka  # noqa: F401  # installs the watched fetcher
from adapters.kafka import KafkaConsumer
from adapters.kafka.liveness import (
    FetchWatch,
    WatchedFetcher,
    _WatchedClient,
    install,
    watch_of,
)
from gateway.ports import EndpointSettings


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _watch(after: float = 5.0) -> tuple[FetchWatch, Clock]:
    clock = Clock()
    return FetchWatch(after, clock=clock), clock


def test_an_idle_broker_answering_its_long_polls_is_never_overdue() -> None:
    watch, clock = _watch()
    for _ in range(100):  # 50 s of empty long-polls, each answered after 0.5 s
        watch.sent(1)
        clock.now += 0.5
        assert watch.overdue() is None
        watch.answered(1)
    assert watch.overdue() is None


def test_a_fetch_unanswered_for_overdue_after_is_overdue_until_one_is_answered() -> None:
    watch, clock = _watch()
    watch.sent(1)
    clock.now += 4.9
    assert watch.overdue() is None
    clock.now += 0.2
    overdue = watch.overdue()
    assert overdue is not None and overdue.node == 1 and overdue.error is None
    assert overdue.seconds == pytest.approx(5.1)
    watch.answered(1)
    assert watch.overdue() is None


def test_failures_and_retries_keep_the_wait_and_report_the_last_error() -> None:
    watch, clock = _watch()
    for _ in range(12):  # aiokafka retries a failed fetch after its backoff
        watch.sent(1)
        clock.now += 0.5
        watch.failed(1, KafkaConnectionError("connection to node 1 lost"))
    overdue = watch.overdue()
    assert overdue is not None and overdue.seconds == pytest.approx(6.0)
    assert overdue.error is not None and "connection to node 1 lost" in overdue.error


def test_a_cancelled_fetch_ends_the_wait_unless_it_was_already_overdue() -> None:
    watch, clock = _watch()
    watch.sent(1)
    clock.now += 1.0
    watch.cancelled(1)  # a rebalance: nothing is wrong with the link
    clock.now += 10.0
    assert watch.overdue() is None
    watch.sent(1)
    clock.now += 6.0
    watch.cancelled(1)  # the link is gone and the group moved on: still reported
    assert watch.overdue() is not None


def test_the_broker_waited_on_longest_is_the_one_reported() -> None:
    watch, clock = _watch()
    watch.sent(2)
    clock.now += 3.0
    watch.sent(1)
    clock.now += 3.0
    overdue = watch.overdue()
    assert overdue is not None and overdue.node == 2


class FakeClient:
    """aiokafka's client: Fetch requests (API key 1) wait for `answer`."""

    def __init__(self) -> None:
        self.answer: asyncio.Future[str] | None = None
        self.cluster = "the cluster"

    async def send(self, node_id: Any, request: Any, **kwargs: Any) -> str:
        assert self.answer is not None
        return await self.answer


def test_the_watched_client_reports_fetches_only() -> None:
    async def scenario() -> None:
        watch, clock = _watch()
        inner = FakeClient()
        client = _WatchedClient(inner, watch)
        assert client.cluster == "the cluster"  # everything else passes through
        inner.answer = asyncio.get_running_loop().create_future()
        other = asyncio.create_task(client.send(1, SimpleNamespace(API_KEY=2)))
        await asyncio.sleep(0)
        clock.now += 60
        assert watch.overdue() is None  # a ListOffsets request is not a fetch
        inner.answer.set_result("offsets")
        assert await other == "offsets"

        inner.answer = asyncio.get_running_loop().create_future()
        fetch = asyncio.create_task(client.send(1, SimpleNamespace(API_KEY=1)))
        await asyncio.sleep(0)
        clock.now += 6
        assert watch.overdue() is not None
        inner.answer.set_result("records")
        assert await fetch == "records"
        assert watch.overdue() is None

        inner.answer = asyncio.get_running_loop().create_future()
        fetch = asyncio.create_task(client.send(1, SimpleNamespace(API_KEY=1)))
        await asyncio.sleep(0)
        inner.answer.set_exception(KafkaConnectionError("gone"))
        with pytest.raises(KafkaConnectionError):
            await fetch
        clock.now += 6
        overdue = watch.overdue()
        assert overdue is not None and overdue.error is not None and "gone" in overdue.error

    asyncio.run(scenario())


def test_aiokafka_creates_the_watched_fetcher() -> None:
    assert aiokafka_consumer.Fetcher is WatchedFetcher
    assert install()  # idempotent


def test_an_aiokafka_that_creates_its_fetcher_otherwise_is_left_alone(
        monkeypatch: pytest.MonkeyPatch) -> None:
    other = type("OtherFetcher", (), {})
    monkeypatch.setattr(aiokafka_consumer, "Fetcher", other)
    assert not install()
    assert aiokafka_consumer.Fetcher is other


def _consumer_with(watch: FetchWatch) -> KafkaConsumer:
    consumer = KafkaConsumer(EndpointSettings(
        "kafka://broker.example:9092", options={"topics": ["t"], "consumergroup": "g"}))
    consumer._client = SimpleNamespace(_fetcher=SimpleNamespace(watch=watch))
    return consumer


def test_the_consumer_is_not_connected_while_a_fetch_is_overdue_logged_once_each_way(
        caplog: pytest.LogCaptureFixture) -> None:
    watch, clock = _watch()
    consumer = _consumer_with(watch)
    consumer._endpoint = "orders-kafka"
    assert watch_of(consumer._client) is watch
    caplog.set_level(logging.INFO, logger="adapters.kafka")
    watch.sent(1)
    assert consumer.connected
    clock.now += 6
    watch.failed(1, KafkaConnectionError("connection to node 1 lost"))
    for _ in range(5):  # probes, metrics and read_batch all ask
        assert not consumer.connected
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in caplog.records]
    assert "has not answered a fetch for 6.0 s" in warnings[0].getMessage()
    assert "connection to node 1 lost" in str(getattr(warnings[0], "error", ""))
    assert getattr(warnings[0], "endpoint", None) == "orders-kafka"
    watch.answered(1)
    for _ in range(5):
        assert consumer.connected
    infos = [r for r in caplog.records if r.levelno == logging.INFO]
    assert len(infos) == 1 and "answers fetches again" in infos[0].getMessage()


def test_a_consumer_without_a_watch_is_connected_while_it_has_a_client() -> None:
    consumer = KafkaConsumer(EndpointSettings(
        "kafka://broker.example:9092", options={"topics": ["t"], "consumergroup": "g"}))
    assert not consumer.connected
    consumer._client = SimpleNamespace()
    assert consumer.connected
