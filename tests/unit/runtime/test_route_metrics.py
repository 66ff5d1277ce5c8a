"""A route's metrics in detail (gateway/runtime/route.py): body bytes in and out (only the
delivered records count out), the processing-time histogram, the connected gauge of an
output that went down, and the reason a broken confirmation leaves in the dead letter."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from adapters.memory import MemoryConsumer, MemoryProducer
from gateway.convert import Converter
from gateway.deadletter.format import deadletter_metadata
from gateway.observability.metrics import Metrics
from gateway.policies.retry import RetryPolicy
from gateway.ports import Outcome
from gateway.record import NativeMessage
from gateway.runtime.route import Output, Route
from tests.unit.runtime.test_route import CATALOG, FAST, build, run_to_end, sale, sample


def _sale(desk: int, body: bytes) -> NativeMessage:
    base = sale(desk)
    return NativeMessage(base.protocol, base.fields, payload=body)


def test_body_bytes_are_counted_in_per_protocol_and_out_only_when_delivered() -> None:
    # Payloads of 3, 5 and 7 bytes; the one of 5 bytes is refused by the output.
    messages = [_sale(1, b"abc"), _sale(2, b"abcde"), _sale(3, b"abcdefg")]
    out = MemoryProducer(rule=lambda m: Outcome.failed("too big", retryable=False)
                         if m.body_bytes() == b"abcde" else None)
    route, consumer, _, dlq, metrics = build(messages, out=out)
    asyncio.run(run_to_end(route, consumer))
    assert sample(metrics, "xrgw_received_bytes_total", endpoint="store-mqtt",
                  protocol="MQTT/5.0") == 15
    assert sample(metrics, "xrgw_messages_received_total", endpoint="store-mqtt",
                  protocol="MQTT/5.0") == 3
    assert sample(metrics, "xrgw_messages_published_total", endpoint="events-kafka") == 2
    assert sample(metrics, "xrgw_published_bytes_total", endpoint="events-kafka") == 10
    assert sample(metrics, "xrgw_deadletter_bytes_total") == 5  # apart from publishes
    assert sample(metrics, "xrgw_published_bytes_total", endpoint="dlq") in (None, 0)
    assert sample(metrics, "xrgw_publish_errors_total", endpoint="events-kafka",
                  reason="rejected") == 1
    assert len(dlq.written) == 1


def test_unmatched_and_matched_messages_of_one_batch_are_each_counted() -> None:
    stray = NativeMessage("MQTT/5.0", {"topic_name": "/nowhere", "qos": 1}, payload=b"x")
    route, consumer, _, _, metrics = build([stray, sale(1), stray, sale(2), sale(3)],
                                           inflight=40)  # one batch
    asyncio.run(run_to_end(route, consumer))
    assert sample(metrics, "xrgw_messages_unmatched_total", endpoint="store-mqtt") == 2
    assert sample(metrics, "xrgw_messages_matched_total", endpoint="store-mqtt",
                  message="/messagegroups/store/messages/cashierdesk") == 3


def test_all_delivered_counts_every_body_byte_out() -> None:
    route, consumer, _, _, metrics = build([_sale(1, b"ab"), _sale(2, b"abcd")])
    asyncio.run(run_to_end(route, consumer))
    assert sample(metrics, "xrgw_published_bytes_total", endpoint="events-kafka") == 6
    assert sample(metrics, "xrgw_endpoint_connected", endpoint="store-mqtt") == 1


def test_each_settled_message_is_one_observation_of_its_processing_time() -> None:
    route, consumer, _, _, metrics = build([sale(n) for n in range(5)])
    asyncio.run(run_to_end(route, consumer))
    assert sample(metrics, "xrgw_processing_seconds_count", route="store") == 5
    total = sample(metrics, "xrgw_processing_seconds_sum", route="store")
    assert 0 <= total < 5 * 2.0  # seconds since the batch was read, not a clock reading


def test_an_output_that_went_down_shows_as_disconnected_after_its_batch() -> None:
    async def scenario() -> tuple[float, float, int]:
        out, dlq = MemoryProducer(), MemoryProducer()
        consumer = MemoryConsumer()  # fed once the output is down
        metrics = Metrics()
        route = Route("store", "store-mqtt", consumer, Converter(CATALOG.messages()),
                      [Output("events-kafka", "KAFKA", out, defaults={"topic": "t"})],
                      deadletter=Output("dlq", "KAFKA", dlq, defaults={"topic": "dead"}),
                      metrics=metrics, retry=FAST)
        await route.start()
        for _ in range(500):
            if consumer.connected:
                break
            await asyncio.sleep(0.001)
        out.disconnect()
        consumer.feed(sale(1))
        for _ in range(500):
            if consumer.acked:
                break
            await asyncio.sleep(0.001)
        await route.stop(grace=1)
        return (sample(metrics, "xrgw_endpoint_connected", endpoint="events-kafka"),
                sample(metrics, "xrgw_endpoint_connected", endpoint="dlq"), len(dlq.written))

    assert asyncio.run(scenario()) == (0, 1, 1)


def test_an_output_that_cannot_connect_shows_as_disconnected_while_retrying() -> None:
    async def scenario() -> object:
        out = MemoryProducer()
        out.connect_failures = 1_000_000  # down for the whole test
        consumer, metrics = MemoryConsumer(), Metrics()
        route = Route("store", "store-mqtt", consumer, Converter(CATALOG.messages()),
                      [Output("events-kafka", "KAFKA", out, defaults={"topic": "t"})],
                      deadletter=Output("dlq", "KAFKA", MemoryProducer(),
                                        defaults={"topic": "dead"}),
                      # Long pauses between attempts: stop() comes while the start sleeps.
                      metrics=metrics, retry=RetryPolicy(attempts=3, initial_backoff=0.5,
                                                         max_backoff=0.5))
        await route.start()
        shown = None
        for _ in range(500):
            # The registry itself: `sample` reads a missing series as 0.
            shown = metrics.registry.get_sample_value("xrgw_endpoint_connected",
                                                      {"endpoint": "events-kafka"})
            if shown is not None:
                break
            await asyncio.sleep(0.001)
        await route.stop(grace=1)
        # stop() waited for the start it cancelled: nothing of the route runs on.
        left = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        assert left == []
        return shown

    assert asyncio.run(scenario()) == 0


class _Broken(MemoryProducer):
    """Every confirmation raises (a producer bug)."""

    async def _write(self, messages: Sequence[NativeMessage]) -> list[Outcome]:
        raise RuntimeError("confirmation blew up")


def test_a_confirmation_that_keeps_raising_leaves_its_error_in_the_dead_letter() -> None:
    route, consumer, _, dlq, metrics = build([sale(1)], out=_Broken())
    asyncio.run(run_to_end(route, consumer))
    [dead] = dlq.written
    assert deadletter_metadata(dead)["xrgw-detail"] == (
        "events-kafka: RuntimeError: confirmation blew up")
    assert sample(metrics, "xrgw_publish_errors_total", endpoint="events-kafka",
                  reason="retryable") == 3


def test_every_endpoint_shows_as_disconnected_from_the_start() -> None:
    """A scrape before the first connect already has the connected gauge of the source
    and of each output, at 0: a route stuck connecting shows in the metric, not by a
    missing series."""
    async def main() -> None:
        route, consumer, _, _, metrics = build([sale(1)])
        shown = {endpoint: metrics.registry.get_sample_value(
                     "xrgw_endpoint_connected", {"endpoint": endpoint})
                 for endpoint in ("store-mqtt", "events-kafka", "dlq")}
        assert shown == {"store-mqtt": 0, "events-kafka": 0, "dlq": 0}
        await run_to_end(route, consumer)
        assert sample(metrics, "xrgw_endpoint_connected", endpoint="store-mqtt") == 1
    asyncio.run(main())


def test_dead_letters_to_an_endpoint_that_is_also_an_output_count_as_dead_letters() -> None:
    """One Kafka cluster for the events and the dead letters (another topic): what the
    dead letter took is counted as dead-letter bytes, not as events published."""
    consumer = MemoryConsumer([sale(1), NativeMessage(
        "MQTT/5.0", {"topic_name": "/nowhere", "qos": 1}, payload=b"abc")],
        close_when_empty=True)
    kafka = MemoryProducer()
    metrics = Metrics()
    route = Route("store", "store-mqtt", consumer, Converter(CATALOG.messages()),
                  [Output("kafka", "KAFKA", kafka, defaults={"topic": "store-{storeid}"})],
                  deadletter=Output("kafka", "KAFKA", kafka, defaults={"topic": "dead"}),
                  metrics=metrics, retry=FAST)
    asyncio.run(run_to_end(route, consumer))
    assert len(kafka.written) == 2
    assert sample(metrics, "xrgw_messages_published_total", endpoint="kafka") == 1
    assert sample(metrics, "xrgw_deadletter_bytes_total") == 3
