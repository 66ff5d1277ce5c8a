"""The route's failure paths in detail (gateway/runtime/route.py): what a dead letter says
about a failed send, the backoff steps of retries, schema failures in the metrics and the
conformance report, the reasons messages are given back with, and what the sender of a
request is told when no answer came."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from adapters.memory import MemoryConsumer, MemoryProducer
from gateway.convert import Converter
from gateway.deadletter.format import deadletter_metadata
from gateway.definitions import load_catalog, read_document
from gateway.observability.conformance import RouteReport
from gateway.observability.metrics import Metrics
from gateway.policies.retry import RetryPolicy
from gateway.ports import Confirmation, Delivery, Outcome, confirmed
from gateway.record import NativeMessage
from gateway.runtime.route import Output, Route
from tests.unit.runtime.test_reply import DOC, Service
from tests.unit.runtime.test_route import CATALOG, FAST, build, run_to_end, sale, sample

ORDERS = load_catalog(Path(__file__).resolve().parents[2] / "data/schemas/orders.xreg.json")
PLACED = "/messagegroups/orders/messages/placed"


def _detail(dead: NativeMessage) -> str:
    return deadletter_metadata(dead)["xrgw-detail"]


# -- what the dead letter says about a failed send ------------------------------------------

def test_a_rejection_without_a_reason_is_dead_lettered_as_failed() -> None:
    out = MemoryProducer(rule=lambda m: Outcome(False, retryable=False))
    route, consumer, _, dlq, _ = build([sale(1)], out=out)
    asyncio.run(run_to_end(route, consumer))
    [dead] = dlq.written
    assert deadletter_metadata(dead)["xrgw-reason"] == "undeliverable"
    assert _detail(dead) == "events-kafka: failed"


def test_retries_that_fail_without_a_reason_are_dead_lettered_as_failed() -> None:
    out = MemoryProducer(rule=lambda m: Outcome(False, retryable=True))
    out.fail_next(Outcome.failed("busy", retryable=True))
    route, consumer, _, dlq, _ = build([sale(1)], out=out)
    asyncio.run(run_to_end(route, consumer))
    [dead] = dlq.written
    assert _detail(dead) == "events-kafka: failed"


def test_the_last_reason_of_the_retries_is_the_one_dead_lettered() -> None:
    out = MemoryProducer(rule=lambda m: Outcome.failed("still down", retryable=True))
    out.fail_next(Outcome.failed("busy", retryable=True))
    route, consumer, _, dlq, _ = build([sale(1)], out=out)
    asyncio.run(run_to_end(route, consumer))
    assert _detail(dlq.written[0]) == "events-kafka: still down"


class Raising(MemoryProducer):
    """A producer that raises instead of reporting outcomes (it should not)."""

    async def submit(self, messages: Sequence[NativeMessage]) -> Confirmation:
        raise RuntimeError("socket closed")


def test_a_producer_that_raises_fails_each_record_with_the_exception_as_reason() -> None:
    route, consumer, _, dlq, metrics = build([sale(1), sale(2)], out=Raising())
    asyncio.run(run_to_end(route, consumer))
    assert len(consumer.acked) == 2
    assert [_detail(d) for d in dlq.written] == ["events-kafka: RuntimeError: socket closed"] * 2
    assert sample(metrics, "xrgw_publish_errors_total", endpoint="events-kafka",
                  reason="exception") == 2 * FAST.attempts


# -- backoff steps --------------------------------------------------------------------------

def test_retries_ask_the_policy_for_each_step_from_the_first() -> None:
    asked: list[tuple[int, float | None]] = []

    class Recording(RetryPolicy):
        def delay(self, attempt: int, at_least: float | None = None) -> float:
            asked.append((attempt, at_least))
            return 0.0

    out = MemoryProducer(rule=lambda m: Outcome.failed("down", retryable=True, retry_after=2))
    out.fail_next(Outcome.failed("busy", retryable=True))
    route, consumer, _, dlq, _ = build([sale(1)], out=out, retry=Recording(attempts=4))
    asyncio.run(run_to_end(route, consumer))
    assert asked == [(0, None), (1, 2), (2, 2)]
    assert len(dlq.written) == 1


# -- schema failures --------------------------------------------------------------------------

def _order(amount: int) -> NativeMessage:
    return NativeMessage("NATS", {"subject": "orders.__SFX__.placed.s1"},
                         data={"amount": amount, "sku": "x"})


def test_invalid_data_is_counted_per_definition_and_reported() -> None:
    consumer = MemoryConsumer([_order(-3), _order(4), _order(-1)], close_when_empty=True)
    out, dlq, metrics = MemoryProducer(), MemoryProducer(), Metrics()
    report = RouteReport("orders", "orders-in")
    route = Route("orders", "orders-in", consumer,
                  Converter(ORDERS.messages(), schema="enforce"),
                  [Output("k", "KAFKA", out, defaults={"topic": "t"})],
                  deadletter=Output("dlq", "KAFKA", dlq, defaults={"topic": "d"}),
                  metrics=metrics, retry=FAST, report=report)
    asyncio.run(run_to_end(route, consumer))
    assert len(out.written) == 1 and len(dlq.written) == 2
    assert sample(metrics, "xrgw_messages_invalid_data_total", endpoint="orders-in",
                  message=PLACED) == 2
    tally = report.definitions[PLACED]
    assert tally.deadletter == {"invalid-data": 2}
    assert tally.first_seen is not None and tally.last_seen is not None
    samples = _samples(report)
    assert [s["nearest"] for s in samples] == [PLACED, PLACED]
    assert all(isinstance(s["at"], str) for s in samples)
    assert samples[0]["detail"] == "$.amount: -3 is less than the minimum of 0"


def _samples(report: RouteReport) -> list[Any]:
    """The report's unmatched samples as the report shows them (JSON)."""
    shown = report.to_json(datetime.now(UTC))["samples"]
    assert isinstance(shown, list)
    return shown


def test_an_unmatched_message_is_reported_near_no_matched_definition() -> None:
    consumer = MemoryConsumer([NativeMessage("MQTT/5.0", {"topic_name": "/x", "qos": 1},
                                             data={})], close_when_empty=True)
    report = RouteReport("store", "store-mqtt")
    route = Route("store", "store-mqtt", consumer, Converter(CATALOG.messages()),
                  [Output("k", "KAFKA", MemoryProducer(), defaults={"topic": "t"})],
                  deadletter=Output("dlq", "KAFKA", MemoryProducer(), defaults={"topic": "d"}),
                  metrics=Metrics(), retry=FAST, report=report)
    asyncio.run(run_to_end(route, consumer))
    [sample_] = _samples(report)
    assert sample_["reason"] == "unmatched" and isinstance(sample_["at"], str)
    assert report.deadletter() == {"unmatched": 1}


# -- giving messages back ---------------------------------------------------------------------

def test_a_batch_that_hits_an_internal_error_is_given_back_with_that_reason() -> None:
    route, consumer, out, _, _ = build([sale(1)])
    convert_batch = route.converter.convert_batch
    calls = 0

    def flaky(records, **kwargs):  # type: ignore[no-untyped-def]
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("bug")
        return convert_batch(records, **kwargs)

    route.converter.convert_batch = flaky  # type: ignore[method-assign]
    asyncio.run(run_to_end(route, consumer))
    assert [(n.reason, n.retry) for n in consumer.nacked] == [("internal error", True)]
    assert len(consumer.acked) == 1 and len(out.written) == 1  # redelivered, then sent


def test_stop_gives_waiting_batches_back_as_stopping() -> None:
    gate = asyncio.Event()

    class Stuck(MemoryProducer):
        async def _write(self, messages: Sequence[NativeMessage]) -> list[Outcome]:
            await gate.wait()
            return await super()._write(messages)

    async def scenario() -> MemoryConsumer:
        route, consumer, _, _, _ = build([sale(n) for n in range(4)], out=Stuck(), inflight=4)
        await route.start()
        for _ in range(100):
            if route.inflight == 4:
                break
            await asyncio.sleep(0.005)
        await route.stop(grace=0.05)
        return consumer

    consumer = asyncio.run(scenario())
    assert [(n.reason, n.retry) for n in consumer.nacked] == [("stopping", True)] * 4


def test_an_observing_route_settles_its_batches_without_an_internal_error(
        caplog: pytest.LogCaptureFixture) -> None:
    # One message per batch: the route observes batch after batch.
    consumer = MemoryConsumer([sale(1), sale(2)], close_when_empty=True, max_in_flight=1)
    out = MemoryProducer()
    route = Route("store", "store-mqtt", consumer, Converter(CATALOG.messages()),
                  [Output("k", "KAFKA", out, defaults={"topic": "t"})],
                  deadletter=None, metrics=Metrics(), retry=FAST, observe=True)
    with caplog.at_level(logging.DEBUG, logger="xrgw.route"):
        asyncio.run(run_to_end(route, consumer))
    assert len(consumer.acked) == 2 and not out.written and route.inflight == 0
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


# -- what the sender of a request is told ---------------------------------------------------

class Ok(Service):
    """Takes every request, answers none (delivered without a reply)."""

    async def request(self, messages: Sequence[NativeMessage], timeout: float
                      ) -> Confirmation:
        self.written.extend(messages)
        return confirmed([Outcome.ok()] * len(messages))


def _ask(n: int) -> NativeMessage:
    return NativeMessage("HTTP", {"method": "POST", "path": "/ask"}, data={"n": n})


def _reply_route(service: Service, asks: Sequence[NativeMessage], awaiting: set[int]
                 ) -> tuple[list[tuple[int, NativeMessage | None, str]], MemoryConsumer,
                            Metrics]:
    """A reply route; the senders of the asks numbered in `awaiting` wait for answers."""
    told: list[tuple[int, NativeMessage | None, str]] = []

    class Asking(MemoryConsumer):
        async def read_batch(self, limit: int) -> list[Delivery]:
            batch = await super().read_batch(limit)
            for delivery in batch:
                n = delivery.message.data["n"]  # type: ignore[index, call-overload]
                if n not in awaiting:
                    continue

                async def answer(reply: NativeMessage | None, why: str, n: int = n) -> None:
                    told.append((n, reply, why))
                delivery.answer = answer
            return batch

    consumer = Asking(list(asks), close_when_empty=True)
    metrics = Metrics()
    route = Route("r", "in", consumer, Converter(read_document(DOC, "d.json").messages()),
                  [Output("svc", "NATS", service, defaults={"subject": "svc"})],
                  deadletter=Output("dlq", "KAFKA", MemoryProducer(), defaults={"topic": "d"}),
                  metrics=metrics, reply_timeout=1.0, retry=FAST)
    asyncio.run(run_to_end(route, consumer))
    return told, consumer, metrics


def test_a_request_delivered_without_an_answer_tells_its_sender_no_answer() -> None:
    told, consumer, metrics = _reply_route(Ok(), [_ask(1)], {1})
    assert told == [(1, None, "no answer")]
    assert len(consumer.acked) == 1 and not consumer.nacked
    assert sample(metrics, "xrgw_replies_total", route="r", result="failed") == 1


def test_senders_that_wait_are_answered_even_after_one_that_does_not() -> None:
    replies = [NativeMessage("NATS", {"subject": "_INBOX.x"}, data={"answer": n})
               for n in range(3)]
    told, consumer, metrics = _reply_route(Service(*replies), [_ask(n) for n in range(3)],
                                           {1, 2})
    assert [(n, why) for n, _, why in told] == [(1, ""), (2, "")]
    assert [r.data for _, r, _ in told if r is not None] == [{"answer": 1}, {"answer": 2}]
    assert len(consumer.acked) == 3
    assert sample(metrics, "xrgw_replies_total", route="r", result="answered") == 2


# -- the conformance report of matched messages -----------------------------------------------

SALE = "/messagegroups/store/messages/cashierdesk"


def _reported(output: Output, *messages: NativeMessage) -> tuple[dict[str, Any], MemoryProducer,
                                                                   datetime, datetime]:
    consumer = MemoryConsumer(list(messages), close_when_empty=True)
    dlq = MemoryProducer()
    report = RouteReport("store", "store-mqtt")
    route = Route("store", "store-mqtt", consumer, Converter(CATALOG.messages()), [output],
                  deadletter=Output("dlq", "KAFKA", dlq, defaults={"topic": "dead"}),
                  metrics=Metrics(), retry=FAST, report=report)
    before = datetime.now(UTC)
    asyncio.run(run_to_end(route, consumer))
    after = datetime.now(UTC)
    return report.to_json(after), dlq, before, after


def test_a_matched_and_rendered_message_is_reported_at_its_events_time() -> None:
    out = MemoryProducer()
    shown, _dlq, before, after = _reported(
        Output("k", "KAFKA", out, defaults={"topic": "t"}), sale(1), sale(2))
    [row] = shown["definitions"]
    assert (row["definition"], row["matched"], row["rendered"], row["deadletter"]) == (
        SALE, 2, 2, {})
    assert (shown["received"], shown["matched"], shown["rendered"]) == (2, 2, 2)
    # One time per batch: an event's `time` is when the report saw it (the two messages
    # are normally one batch; read as two, each batch has its own time).
    times = {dict(r.pairs("headers"))["ce_time"] for r in out.written}
    assert times <= {row["first_seen"], row["last_seen"]}
    assert row["first_seen"] in times and row["last_seen"] in times
    seen = datetime.fromisoformat(row["first_seen"])
    assert before <= seen <= after


def test_a_matched_message_that_cannot_be_rendered_is_reported_with_why() -> None:
    shown, dlq, _before, _after = _reported(
        Output("k", "KAFKA", MemoryProducer(), defaults={"topic": "t.{nowhere}"}), sale(1))
    [row] = shown["definitions"]
    assert (row["definition"], row["matched"], row["rendered"], row["deadletter"]) == (
        SALE, 1, 0, {"undeliverable": 1})
    [sample_] = shown["samples"]
    detail = "k: topic template 't.{nowhere}': no value for 'nowhere'"
    assert (sample_["reason"], sample_["nearest"], sample_["detail"]) == (
        "undeliverable", SALE, detail)
    assert sample_["explain"] == []
    assert sample_["record"] == sale(1).to_json()
    assert sample_["at"] == row["first_seen"]
    [dead] = dlq.written
    assert _detail(dead) == detail
