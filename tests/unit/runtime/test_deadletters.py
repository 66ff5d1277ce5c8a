"""The route's dead letters (`gateway/runtime/deadletters.py`): explanations scrubbed of
every value the route hides, also where the value turns up in another field's failure
text (issue 29's rule); the log line when the dead letter cannot take them."""

from __future__ import annotations

import asyncio
import logging

import pytest

from adapters.memory import MemoryConsumer, MemoryProducer
from gateway.convert import Converter
from gateway.deadletter.format import deadletter_metadata
from gateway.observability.metrics import Metrics
from gateway.ports import Outcome
from gateway.record import NativeMessage
from gateway.runtime.route import Output, Route
from tests.unit.observability.test_sender_secrets import _run
from tests.unit.runtime.test_route import CATALOG, FAST, build, run_to_end, unmatched

SECRET = "s3cr3t-in-a-property-77"


def test_a_hidden_value_is_scrubbed_from_other_fields_explanations(
        caplog: pytest.LogCaptureFixture) -> None:
    # The topic fails the "user" definition's template; the property that carries the
    # same value is hidden by the route's `redact:`.
    record = NativeMessage("MQTT/5.0", {
        "topic_name": f"/users/{SECRET}", "qos": 1,
        "user_properties": [{"name": "x-key", "value": SECRET}]}, data={})
    _, [dead], _ = _run([record], ["user_properties.x-key"], caplog)
    explain = deadletter_metadata(dead)["xrgw-explain"]
    assert "topic_name" in explain  # the explanation is there ...
    assert SECRET not in explain  # ... without the hidden value


def test_messages_given_back_while_the_dead_letter_is_down_are_logged_with_its_name(
        caplog: pytest.LogCaptureFixture) -> None:
    tried = asyncio.Event()

    def down(message: NativeMessage) -> Outcome:
        tried.set()
        return Outcome.failed("dlq down", retryable=True)

    async def scenario() -> None:
        route, consumer, _, _, _ = build([unmatched()], dlq=MemoryProducer(rule=down))
        await route.start()
        await asyncio.wait_for(tried.wait(), 10)
        await route.stop(grace=1)
        assert consumer.nacked and consumer.nacked[0].retry is True

    with caplog.at_level(logging.ERROR):
        asyncio.run(scenario())
    [line] = [r for r in caplog.records if r.getMessage().startswith("dead letter failed")]
    assert (getattr(line, "endpoint", None), getattr(line, "reason", None)) == (
        "dlq", "unmatched")
    # The error is the dead letter's last refusal, with its name.
    assert getattr(line, "error", None) == "dlq: dlq down"


def test_without_a_dead_letter_a_dropped_message_is_logged_as_a_message(
        caplog: pytest.LogCaptureFixture) -> None:
    """`deadletter: log`: the line says what was dropped (a message; an answer on a
    reply address says "answer"), why (the reason code) and the detail."""
    consumer = MemoryConsumer([unmatched()], close_when_empty=True)
    route = Route("store", "store-mqtt", consumer, Converter(CATALOG.messages()),
                  [Output("events-kafka", "KAFKA", MemoryProducer(),
                          defaults={"topic": "t"})],
                  deadletter=None, metrics=Metrics(), retry=FAST)
    with caplog.at_level(logging.WARNING, logger="xrgw.route"):
        asyncio.run(run_to_end(route, consumer))
    [line] = [r for r in caplog.records if r.getMessage().startswith("dropped")]
    assert line.getMessage().startswith("dropped message: ")
    assert (getattr(line, "reason", None), getattr(line, "endpoint", None)) == (
        "unmatched", "store-mqtt")
    assert [n.retry for n in consumer.nacked] == [False]
