"""Fuzz: the route engine with in-memory adapters fed hostile records. Every message
ends delivered, or acked with a dead letter that carries a reason; no exception escapes
(an escaping exception nacks the message for redelivery, which the in-memory consumer
turns into an endless loop, caught here as "never finished").

The in-memory producers run the real adapters' record -> wire conversions
(`adapters/_*_record.py`), so a record the route renders but no adapter could send is
found too: a ValueError becomes a non-retryable failure, as in the adapters."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from fuzz_support import CATALOG, fuzz, hostile_records
from hypothesis import given
from hypothesis import strategies as st

from adapters.amqp.record import to_message
from adapters.http.record import to_request
from adapters.kafka.record import to_send
from adapters.memory import MemoryConsumer, MemoryProducer
from adapters.mqtt.record import to_publish as mqtt_publish
from adapters.nats.record import to_publish as nats_publish
from gateway.convert import Converter
from gateway.deadletter import reasons
from gateway.deadletter.format import deadletter_metadata
from gateway.observability.metrics import Metrics
from gateway.policies.retry import RetryPolicy
from gateway.ports import Outcome
from gateway.protocols import AMQP, HTTP, KAFKA, MQTT5, MQTT311, NATS
from gateway.record import NativeMessage
from gateway.runtime.route import Output, Route

CONVERTER = Converter(CATALOG.messages())
FAST = RetryPolicy(attempts=2, initial_backoff=0.0005, max_backoff=0.001)
REASONS = {reasons.INVALID_RECORD, reasons.INVALID_CLOUDEVENT, reasons.UNMATCHED,
           reasons.AMBIGUOUS, reasons.MISSING_CONTEXT, reasons.INVALID_ENVELOPE,
           reasons.NO_ENVELOPE, reasons.UNDELIVERABLE}

WIRE: dict[str, Callable[[NativeMessage], object]] = {
    KAFKA: lambda r: to_send(r, "default-topic"),
    MQTT5: lambda r: mqtt_publish(r, True, 1),
    MQTT311: lambda r: mqtt_publish(r, False, 1),
    NATS: nats_publish,
    HTTP: lambda r: to_request(r, "http://127.0.0.1:9/sink"),
    AMQP: lambda r: to_message(r, True).encode(),
}
DEFAULTS = {KAFKA: {"topic": "out"}, MQTT5: {"topic_name": "out"},
            MQTT311: {"topic_name": "out"}, NATS: {"subject": "out"}, HTTP: {}, AMQP: {}}


def wire_rule(protocol: str) -> Callable[[NativeMessage], Outcome | None]:
    """What the real adapter does before the network: convert, refuse a ValueError."""
    def rule(record: NativeMessage) -> Outcome | None:
        try:
            WIRE[protocol](record)
        except ValueError as exc:  # the adapters' contract: not sendable, do not retry
            return Outcome.failed(str(exc), retryable=False)
        return None
    return rule


async def run(records: list[NativeMessage], out_protocol: str, dlq_protocol: str,
              mode: str) -> tuple[MemoryConsumer, MemoryProducer, MemoryProducer]:
    consumer = MemoryConsumer(records, close_when_empty=True, max_in_flight=8)
    out = MemoryProducer(rule=wire_rule(out_protocol))
    dlq = MemoryProducer(rule=wire_rule(dlq_protocol))
    route = Route(
        "fuzz", "fuzz-in", consumer, CONVERTER,
        [Output("out", out_protocol, out, defaults=DEFAULTS[out_protocol])],
        deadletter=Output("dlq", dlq_protocol, dlq, defaults=DEFAULTS[dlq_protocol]),
        metrics=Metrics(), inflight=8, retry=FAST, mode=mode)  # type: ignore[arg-type]
    await route.start()
    try:
        await asyncio.wait_for(route.wait_finished(), 5)
    except TimeoutError:
        raise AssertionError(f"never finished: nacked {consumer.nacked[:3]}") from None
    finally:
        await route.stop(grace=1)
    return consumer, out, dlq


PROTOCOLS = st.sampled_from([KAFKA, MQTT5, MQTT311, NATS, HTTP, AMQP])


@fuzz(0.5)
@given(st.lists(hostile_records(), min_size=1, max_size=6), PROTOCOLS, PROTOCOLS,
       st.sampled_from(["binary", "structured"]))
def test_every_hostile_message_is_delivered_or_dead_lettered(records, out_protocol,
                                                             dlq_protocol, mode):
    consumer, out, dlq = asyncio.run(run(records, out_protocol, dlq_protocol, mode))
    assert not consumer.nacked, consumer.nacked[:3]
    assert len(consumer.acked) == len(records)
    # Every record gave at least one outcome (an HTTP batch gives one per member; an
    # empty batch gives none, and is acked).
    assert len(out.written) + len(dlq.written) >= sum(
        1 for r in records if not (r.protocol == HTTP and r.data == []))
    for dead in dlq.written:
        if dlq_protocol == MQTT311:
            assert isinstance(dead.data, dict) and dead.data["deadletter"]["xrgw-reason"]
            reason = dead.data["deadletter"]["xrgw-reason"]
        else:
            meta = deadletter_metadata(dead)
            reason = meta.get("xrgw-reason")
            assert meta.get("xrgw-record"), meta
        assert reason in REASONS, reason
