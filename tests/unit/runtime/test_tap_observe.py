"""An observing route's messages reach `xrgw tap` marked as observed (`"observe": true`
in the line): the tap tells a shadow route's traffic from a live one's."""

from __future__ import annotations

import asyncio

from adapters.memory import MemoryConsumer, MemoryProducer
from gateway.convert import Converter
from gateway.observability.metrics import Metrics
from gateway.runtime.route import Output, Route
from gateway.tap.filter import TapFilter
from gateway.tap.hub import TapHub
from gateway.tap.line import message_line
from tests.unit.runtime.test_route import CATALOG, FAST, run_to_end, sale


def _lines(observe: bool) -> list[dict[str, object]]:
    hub = TapHub()
    subscription = hub.subscribe(TapFilter())
    consumer = MemoryConsumer([sale(1)], close_when_empty=True)
    route = Route("store", "store-mqtt", consumer, Converter(CATALOG.messages()),
                  [Output("events", "KAFKA", MemoryProducer(), defaults={"topic": "t"})],
                  deadletter=Output("dlq", "KAFKA", MemoryProducer(),
                                    defaults={"topic": "dead"}),
                  metrics=Metrics(), retry=FAST, tap=hub, observe=observe)
    asyncio.run(run_to_end(route, consumer))
    return [message_line(e) for e in subscription.take()]


def test_an_observing_routes_lines_are_marked_and_a_live_routes_are_not() -> None:
    [observed] = _lines(observe=True)
    assert observed["outcome"] == "matched" and observed.get("observe") is True
    [live] = _lines(observe=False)
    assert "observe" not in live
