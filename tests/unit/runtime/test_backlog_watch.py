"""The backlog watch (gateway/runtime/backlog.py) when the broker does not answer in time
or the client fails unexpectedly: the series go away rather than freeze, and polling goes
on."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from gateway.observability.metrics import Metrics
from gateway.ports import Backlog, PartitionLag
from gateway.runtime import backlog as backlog_module


class Scripted:
    """Answers in turn: a backlog, "hang" (never answers) or an exception to raise."""

    def __init__(self, *answers: object) -> None:
        self.answers = list(answers)
        self.asked = 0

    async def backlog(self) -> Sequence[Backlog]:
        self.asked += 1
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if answer == "hang":
            await asyncio.Event().wait()
        if isinstance(answer, Exception):
            raise answer
        return answer  # type: ignore[return-value]


def _watch(consumer: Scripted, monkeypatch: pytest.MonkeyPatch) -> list[float | None]:
    """The lag of partition t/0 as shown after each of the first three polls."""
    monkeypatch.setattr(backlog_module, "POLL_SECONDS", 0.005)
    monkeypatch.setattr(backlog_module, "ANSWER_SECONDS", 0.02)
    metrics = Metrics()
    seen: list[float | None] = []
    show = metrics.show_backlog

    def shown(*args, **kwargs):  # type: ignore[no-untyped-def]
        result = show(*args, **kwargs)
        seen.append(metrics.registry.get_sample_value(
            "xrgw_consumer_lag", {"endpoint": "in", "topic": "t", "partition": "0"}))
        return result

    monkeypatch.setattr(metrics, "show_backlog", shown)

    async def scenario() -> None:
        task = asyncio.create_task(
            backlog_module.watch_backlog("in", consumer, metrics))  # type: ignore[arg-type]
        async with asyncio.timeout(3):
            while len(seen) < 3:
                await asyncio.sleep(0.001)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(scenario())
    return seen[:3]


def test_a_broker_that_does_not_answer_in_time_clears_the_series(
        monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _watch(Scripted([PartitionLag("t", 0, 4)], "hang", [PartitionLag("t", 0, 6)]),
                  monkeypatch)
    assert seen == [4, None, 6]


def test_an_unexpected_client_error_clears_the_series_and_polling_goes_on(
        monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _watch(Scripted([PartitionLag("t", 0, 4)], RuntimeError("client bug"),
                           [PartitionLag("t", 0, 6)]), monkeypatch)
    assert seen == [4, None, 6]
