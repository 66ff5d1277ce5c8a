"""The route's one contact with the tap (gateway/runtime): each settled batch is offered
while a tap is attached, with the outcome known at settlement (a send that failed for
good is `undeliverable`, not `matched`), the native records of `deliver: native`
outputs, and nothing at all when no tap is attached."""

from __future__ import annotations

import asyncio
from typing import Any

from adapters.memory import MemoryConsumer, MemoryProducer
from gateway.convert import Converter
from gateway.observability.metrics import Metrics
from gateway.ports import Outcome
from gateway.runtime.route import Output, Route
from gateway.tap.filter import TapFilter
from gateway.tap.hub import TapHub
from gateway.tap.line import message_line
from tests.unit.core.defs import define, opt, prop
from tests.unit.runtime.test_route import CATALOG, FAST, run_to_end, sale, unmatched

SALE = "/messagegroups/store/messages/cashierdesk"


def _route(hub: TapHub, out: MemoryProducer, messages: list[Any], **output: Any
           ) -> tuple[Route, MemoryConsumer]:
    consumer = MemoryConsumer(messages, close_when_empty=True)
    route = Route("store", "store-mqtt", consumer, Converter(CATALOG.messages()),
                  [Output("events", "KAFKA", out, **({"defaults": {"topic": "t"}} | output))],
                  deadletter=Output("dlq", "KAFKA", MemoryProducer(),
                                    defaults={"topic": "dead"}),
                  metrics=Metrics(), retry=FAST, tap=hub)
    return route, consumer


def test_settled_outcomes_reach_the_tap() -> None:
    hub = TapHub()
    subscription = hub.subscribe(TapFilter())
    broken = MemoryProducer(rule=lambda m: Outcome.failed("broken", retryable=False)
                            if m.data == {"desk": 2} else Outcome.ok())
    route, consumer = _route(hub, broken, [sale(1), sale(2), unmatched()])
    asyncio.run(run_to_end(route, consumer))
    lines = [message_line(e) for e in subscription.take()]
    assert [(line["outcome"], line.get("reason")) for line in lines] == [
        ("matched", None), ("dead-lettered", "undeliverable"), ("dead-lettered", "unmatched")]
    assert lines[0]["definition"] == lines[1]["definition"]
    assert str(lines[0]["definition"]).endswith("cashierdesk")
    assert "cloudevent" in lines[1] and "broken" in str(lines[1]["detail"])
    assert lines[2]["definition"] is None and "explain" in lines[2]
    assert len(consumer.acked) == 3


def test_native_outputs_are_in_the_line() -> None:
    target = define("sale", "KAFKA", [opt("topic", "sales.{storeid}")],
                    {"type": prop("com.example.sale")})
    hub = TapHub()
    subscription = hub.subscribe(TapFilter())
    route, consumer = _route(hub, MemoryProducer(), [sale(3)], deliver="native",
                             definitions=(target,), defaults={})
    asyncio.run(run_to_end(route, consumer))
    [line] = [message_line(e) for e in subscription.take()]
    output = line["output"]
    assert isinstance(output, dict) and output["events"]["topic"] == "sales.12"  # type: ignore[index,call-overload]


def test_nothing_is_offered_while_no_tap_is_attached() -> None:
    hub = TapHub()
    offered: list[Any] = []
    hub.offer_batch = lambda *args, **kwargs: offered.append(args)  # type: ignore[method-assign]
    out = MemoryProducer()
    route, consumer = _route(hub, out, [sale(1), sale(2)])
    asyncio.run(run_to_end(route, consumer))
    assert len(out.written) == 2 and len(consumer.acked) == 2
    assert offered == []
    # the same route with a tap attached is offered its batch(es)
    hub.subscribe(TapFilter())
    route, consumer = _route(hub, MemoryProducer(), [sale(1), sale(2)])
    asyncio.run(run_to_end(route, consumer))
    assert offered and all(args[0] == "store" for args in offered)


def test_a_failing_tap_never_disturbs_the_route() -> None:
    hub = TapHub()
    subscription = hub.subscribe(TapFilter())

    def broken(item: Any) -> bool:
        raise RuntimeError("a bug in a filter")

    subscription.filter = type("Broken", (), {"wants": staticmethod(broken),
                                              "wants_route": staticmethod(lambda r: True),
                                              "limit": None})()  # type: ignore[assignment]
    out = MemoryProducer()
    route, consumer = _route(hub, out, [sale(1), sale(2)])
    asyncio.run(run_to_end(route, consumer))
    assert len(out.written) == 2 and len(consumer.acked) == 2 and not consumer.nacked
    assert hub.errors == 1


def test_a_stalled_tap_counts_every_message_it_could_not_take() -> None:
    hub = TapHub()
    subscription = hub.subscribe(TapFilter(), capacity=1)
    route, consumer = _route(hub, MemoryProducer(), [sale(1), sale(2), unmatched(), sale(4)])
    asyncio.run(run_to_end(route, consumer))
    assert len(subscription.queue) == 1 and subscription.dropped == 3


def test_a_tap_stalled_before_a_batch_counts_its_messages_without_taking_them() -> None:
    """A tap whose queue is already full when a batch settles is told how many messages
    it missed from the batch's count (no item is built for it)."""
    hub = TapHub()
    subscription = hub.subscribe(TapFilter(), capacity=1)
    route, consumer = _route(hub, MemoryProducer(), [sale(1)])
    asyncio.run(run_to_end(route, consumer))
    assert len(subscription.queue) == 1 and subscription.saturated
    route, consumer = _route(hub, MemoryProducer(), [sale(2), unmatched(), sale(4)])
    asyncio.run(run_to_end(route, consumer))
    assert subscription.dropped == 3 and len(consumer.acked) == 3
    assert hub.errors == 0
