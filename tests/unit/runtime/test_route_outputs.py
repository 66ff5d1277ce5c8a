"""A route's outputs and window in detail (gateway/runtime/route.py): native delivery,
a message that failed on several outputs, `deadletter: log` over a batch, the reason a
message is nacked with when even the dead letter fails, and how the window is cut into
batches."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

import pytest

from adapters.memory import MemoryConsumer, MemoryProducer
from gateway.cloudevents import encode_batch
from gateway.cloudevents.event import CloudEvent
from gateway.convert import Converter
from gateway.deadletter.format import deadletter_metadata, original_record
from gateway.definitions import read_document
from gateway.observability.conformance import RouteReport
from gateway.observability.metrics import Metrics
from gateway.ports import Outcome
from gateway.record import NativeMessage
from gateway.runtime.route import Output, Route
from tests.unit.core.defs import define, opt, prop
from tests.unit.runtime.test_reply import Service
from tests.unit.runtime.test_route import CATALOG, FAST, build, run_to_end, sale, sample


def test_a_native_output_gets_the_record_its_definition_renders() -> None:
    target = define("sale", "KAFKA", [opt("topic", "sales.{storeid}")],
                    {"type": prop("com.example.sale")})
    consumer = MemoryConsumer([sale(3)], close_when_empty=True)
    out, dlq = MemoryProducer(), MemoryProducer()
    route = Route("store", "store-mqtt", consumer, Converter(CATALOG.messages()),
                  [Output("native", "KAFKA", out, deliver="native", definitions=(target,))],
                  deadletter=Output("dlq", "KAFKA", dlq, defaults={"topic": "dead"}),
                  metrics=Metrics(), retry=FAST)
    asyncio.run(run_to_end(route, consumer))
    [record] = out.written
    assert record.fields["topic"] == "sales.12"
    assert not [name for name, _ in record.pairs("headers") if name.startswith("ce_")]
    assert record.data == {"desk": 3}
    assert not dlq.written and len(consumer.acked) == 1


def test_a_message_that_failed_on_two_outputs_is_dead_lettered_once_with_both_reasons() -> None:
    consumer = MemoryConsumer([sale(1)], close_when_empty=True)
    broken = MemoryProducer(rule=lambda m: Outcome.failed("broken", retryable=False))
    refusing = MemoryProducer(rule=lambda m: Outcome.failed("refused", retryable=False))
    dlq = MemoryProducer()
    route = Route("store", "store-mqtt", consumer, Converter(CATALOG.messages()),
                  [Output("a", "KAFKA", broken, defaults={"topic": "t"}),
                   Output("b", "KAFKA", refusing, defaults={"topic": "t"})],
                  deadletter=Output("dlq", "KAFKA", dlq, defaults={"topic": "dead"}),
                  metrics=Metrics(), retry=FAST)
    asyncio.run(run_to_end(route, consumer))
    [dead] = dlq.written
    meta = deadletter_metadata(dead)
    assert meta["xrgw-reason"] == "undeliverable"
    assert meta["xrgw-detail"] == "a: broken; b: refused"


def _batch_of(*types: str) -> object:
    return encode_batch([CloudEvent.create({"specversion": "1.0", "id": str(n), "type": t,
                                            "source": f"/s/{n}"}, {"n": n})
                         for n, t in enumerate(types)])


def test_deadletter_log_drops_and_counts_every_failed_member_of_a_batch() -> None:
    doc = {"messagegroups": {"g": {"messages": {"m": {
        "envelope": "CloudEvents/1.0",
        "envelopemetadata": {"type": {"value": "com.example.ok"},
                             "source": {"value": "/s/{n}", "type": "uritemplate"}}}}}}}
    batch = _batch_of("com.example.other", "com.example.ok", "com.example.else")
    consumer = MemoryConsumer([batch], close_when_empty=True)  # type: ignore[list-item]
    out, metrics = MemoryProducer(), Metrics()
    route = Route("http", "ingress", consumer, Converter(read_document(doc, "b.json").messages()),
                  [Output("k", "KAFKA", out, defaults={"topic": "t"})],
                  deadletter=None, metrics=metrics, retry=FAST)
    asyncio.run(run_to_end(route, consumer))
    # Two of its events were dropped: the batch is refused (never again), not acked.
    assert not consumer.acked and len(out.written) == 1
    assert [n.retry for n in consumer.nacked] == [False]
    assert sample(metrics, "xrgw_messages_dropped_total", reason="unmatched") == 2
    assert sample(metrics, "xrgw_messages_unmatched_total", endpoint="ingress") == 2
    assert sample(metrics, "xrgw_messages_matched_total", endpoint="ingress",
                  message="/messagegroups/g/messages/m") == 1


def test_the_report_samples_each_failed_member_of_a_batch_alone() -> None:
    """A sample is what the dead letter holds: the one failed event, not the batch."""
    doc = {"messagegroups": {"g": {"messages": {"m": {
        "envelope": "CloudEvents/1.0",
        "envelopemetadata": {"type": {"value": "com.example.ok"},
                             "source": {"value": "/s/{n}", "type": "uritemplate"}}}}}}}
    batch = _batch_of("com.example.other", "com.example.ok")
    consumer = MemoryConsumer([batch], close_when_empty=True)  # type: ignore[list-item]
    dlq, report = MemoryProducer(), RouteReport("http", "ingress")
    route = Route("http", "ingress", consumer, Converter(read_document(doc, "b.json").messages()),
                  [Output("a", "KAFKA", MemoryProducer(), defaults={"topic": "a.{nowhere}"}),
                   Output("b", "KAFKA", MemoryProducer(), defaults={"topic": "b.{nowhere}"})],
                  deadletter=Output("dlq", "KAFKA", dlq, defaults={"topic": "dead"}),
                  metrics=Metrics(), retry=FAST, report=report)
    before = datetime.now(UTC)
    asyncio.run(run_to_end(route, consumer))
    after = datetime.now(UTC)
    unmatched, unrendered = report.to_json(after)["samples"]  # type: ignore[misc]
    dead = {deadletter_metadata(d)["xrgw-reason"]: d for d in dlq.written}
    assert unmatched["reason"] == "unmatched"  # type: ignore[index]
    assert unmatched["record"] == original_record(dead["unmatched"]).to_json()  # type: ignore[index,union-attr]
    assert "com.example.other" in json.dumps(unmatched["record"])  # type: ignore[index]
    assert "com.example.ok" not in json.dumps(unmatched["record"])  # type: ignore[index]
    assert unrendered["reason"] == "undeliverable"  # type: ignore[index]
    # The first output that cannot take the event is the reason: it goes to none of them.
    assert unrendered["detail"] == (  # type: ignore[index]
        "a: topic template 'a.{nowhere}': no value for 'nowhere'")
    assert unrendered["record"] == original_record(dead["undeliverable"]).to_json()  # type: ignore[index,union-attr]
    assert "com.example.ok" in json.dumps(unrendered["record"])  # type: ignore[index]
    for sample_ in (unmatched, unrendered):
        at = datetime.fromisoformat(sample_["at"])  # type: ignore[index,arg-type]
        assert before <= at <= after


def test_the_report_samples_a_failed_single_request_as_it_came() -> None:
    """Not a batch: the sample is the request itself, headers and all."""
    doc = {"messagegroups": {"g": {"messages": {"m": {
        "envelope": "CloudEvents/1.0",
        "envelopemetadata": {"type": {"value": "com.example.ok"},
                             "source": {"value": "/s"}}}}}}}
    headers = [{"name": "ce-specversion", "value": "1.0"}, {"name": "ce-id", "value": "1"},
               {"name": "ce-type", "value": "com.example.other"},
               {"name": "ce-source", "value": "/s"}, {"name": "x-trace", "value": "t1"},
               {"name": "content-type", "value": "application/json"}]
    request = NativeMessage("HTTP", {"method": "POST", "path": "/", "headers": headers},
                            data={"n": 1})
    consumer = MemoryConsumer([request], close_when_empty=True)
    report = RouteReport("http", "ingress")
    route = Route("http", "ingress", consumer, Converter(read_document(doc, "b.json").messages()),
                  [Output("k", "KAFKA", MemoryProducer(), defaults={"topic": "t"})],
                  deadletter=None, metrics=Metrics(), retry=FAST, report=report)
    asyncio.run(run_to_end(route, consumer))
    [sample_] = report.to_json(datetime.now(UTC))["samples"]  # type: ignore[misc]
    assert sample_["reason"] == "unmatched"  # type: ignore[index]
    assert sample_["record"] == request.to_json()  # type: ignore[index]


def test_a_route_without_replies_submits_even_to_a_producer_that_can_request() -> None:
    service = Service()  # a Requester; it has no answers to give
    route, consumer, _, dlq, _ = build([sale(1)], out=service)
    asyncio.run(run_to_end(route, consumer))
    assert len(service.written) == 1 and len(consumer.acked) == 1 and not dlq.written


def test_a_message_whose_dead_letter_failed_is_nacked_as_such_when_stopping() -> None:
    dlq = MemoryProducer(rule=lambda m: Outcome.failed("dlq down", retryable=True))
    out = MemoryProducer(rule=lambda m: Outcome.failed("malformed", retryable=False))

    async def scenario() -> MemoryConsumer:
        route, consumer, _, _, _ = build([sale(1)], out=out, dlq=dlq)
        await route.start()
        await asyncio.sleep(0.05)
        await route.stop(grace=1)
        return consumer

    consumer = asyncio.run(scenario())
    assert [(n.reason, n.retry) for n in consumer.nacked] == [("dead letter failed", True)]
    assert not consumer.acked


@pytest.mark.parametrize(("inflight", "max_batch", "limit", "batch"), [
    (None, None, 4096, 1000),  # the defaults: a quarter of the window, at most MAX_BATCH
    (400, None, 400, 100),
    (2, None, 2, 1),  # never an empty batch
    (3, None, 3, 1),
    (10, None, 10, 2),  # a whole number of messages
    (8000, None, 8000, 1000),
    (400, 7, 400, 7),  # as configured
])
def test_the_window_is_cut_into_batches_of_a_quarter(
        inflight: int | None, max_batch: int | None, limit: int, batch: int) -> None:
    metrics = Metrics()
    sizes = {} if inflight is None else {"inflight": inflight}
    route = Route("r", "in", MemoryConsumer(), Converter(CATALOG.messages()),
                  [Output("k", "KAFKA", MemoryProducer())], deadletter=None,
                  metrics=metrics, max_batch=max_batch, **sizes)  # type: ignore[arg-type]
    assert (route.inflight_limit, route.max_batch) == (limit, batch)
    assert sample(metrics, "xrgw_messages_inflight_limit", route="r") == limit
    assert route.observe is False and route.mode == "binary"


class _Counting(MemoryProducer):
    def __init__(self) -> None:
        super().__init__()
        self.submits = 0

    async def submit(self, messages):  # type: ignore[no-untyped-def]
        self.submits += 1
        return await super().submit(messages)


def test_a_batch_with_nothing_failed_sends_nothing_to_the_dead_letter() -> None:
    dlq = _Counting()
    route, consumer, out, _, _ = build([sale(1), sale(2)], dlq=dlq)
    asyncio.run(run_to_end(route, consumer))
    assert len(out.written) == 2 and dlq.submits == 0
