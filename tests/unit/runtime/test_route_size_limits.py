"""Messages over an output's size limit (issue 28): dead-lettered as `too-large` before
they are sent, to no output, and never retried; a dead letter the dead-letter endpoint
cannot take for its size is written without the body (size and SHA-256) instead of
holding the route for ever. In-memory adapters; the real brokers' limits are in
tests/integration/test_size_limits.py."""

from __future__ import annotations

import asyncio
import hashlib
import json

from adapters.memory import MemoryConsumer, MemoryProducer
from gateway.convert import Converter
from gateway.deadletter.format import deadletter_metadata, original_record, withheld_body
from gateway.observability.metrics import Metrics
from gateway.ports import Outcome, SizeLimited, size_limit
from gateway.protocols import KAFKA, MQTT311, NATS
from gateway.record import NativeMessage
from gateway.runtime.route import Output, Route
from tests.unit.runtime.test_route import CATALOG, FAST, build, run_to_end, sale, sample


def big_sale(desk: int, pad: int) -> NativeMessage:
    return NativeMessage("MQTT/5.0", {
        "topic_name": f"/store/12/cashierdesk/{desk}", "qos": 1,
        "user_properties": [{"name": "eventType", "value": "com.example.sale"}]},
        data={"desk": desk, "pad": "x" * pad})


def _meta(dead: NativeMessage) -> dict[str, str]:
    return deadletter_metadata(dead)


def test_a_message_over_the_outputs_limit_is_dead_lettered_as_too_large_and_not_sent() -> None:
    out = MemoryProducer(max_message_bytes=1000)
    route, consumer, _, dlq, metrics = build([sale(1), big_sale(2, 5000), sale(3)], out=out)
    asyncio.run(run_to_end(route, consumer))
    assert [r.data["desk"] for r in out.written] == [1, 3]  # the route went on
    [dead] = dlq.written
    meta = _meta(dead)
    assert meta["xrgw-reason"] == "too-large"
    assert "events-kafka: body of 5" in meta["xrgw-detail"]
    assert "over the output's limit of 1000 bytes" in meta["xrgw-detail"]
    assert json.loads(dead.body_bytes())["pad"] == "x" * 5000  # the body, byte for byte
    assert len(consumer.acked) == 3 and not consumer.nacked
    assert sample(metrics, "xrgw_messages_deadlettered_total", reason="too-large") == 1
    # Never sent, so never a failed publish attempt.
    assert sample(metrics, "xrgw_publish_errors_total", endpoint="events-kafka",
                  reason="rejected") == 0


def test_a_message_too_large_for_one_output_goes_to_none_of_them() -> None:
    small, large = MemoryProducer(max_message_bytes=1000), MemoryProducer()
    consumer = MemoryConsumer([big_sale(1, 5000)], close_when_empty=True)
    dlq = MemoryProducer()
    route = Route("store", "store-mqtt", consumer, Converter(CATALOG.messages()),
                  [Output("wide", "KAFKA", large, defaults={"topic": "t"}),
                   Output("narrow", "NATS", small, defaults={"subject": "s"})],
                  deadletter=Output("dlq", "KAFKA", dlq, defaults={"topic": "d"}),
                  metrics=Metrics(), retry=FAST)
    asyncio.run(run_to_end(route, consumer))
    assert not large.written and not small.written
    [dead] = dlq.written
    assert _meta(dead)["xrgw-reason"] == "too-large"
    assert _meta(dead)["xrgw-detail"].startswith("narrow: ")


def test_a_producers_own_size_refusal_is_too_large_and_not_retried() -> None:
    tries: list[NativeMessage] = []

    def refuse(message: NativeMessage) -> Outcome | None:
        tries.append(message)
        return Outcome.refused_as_too_large("kafka: MessageSizeTooLargeError()")

    route, consumer, _, dlq, _ = build([sale(1)], out=MemoryProducer(rule=refuse))
    asyncio.run(run_to_end(route, consumer))
    assert len(tries) == 1  # a size refusal is never sent again
    [dead] = dlq.written
    assert _meta(dead)["xrgw-reason"] == "too-large"
    assert _meta(dead)["xrgw-detail"] == "events-kafka: kafka: MessageSizeTooLargeError()"


def test_a_dead_letter_with_a_known_limit_gets_the_letter_without_its_body() -> None:
    out = MemoryProducer(max_message_bytes=1000)
    dlq = MemoryProducer(max_message_bytes=1000)
    message = big_sale(2, 5000)
    route, consumer, _, _, metrics = build([message, sale(3)], out=out, dlq=dlq)
    asyncio.run(run_to_end(route, consumer))
    assert [r.data["desk"] for r in out.written] == [3]
    [dead] = dlq.written
    meta = _meta(dead)
    body = message.body_bytes()
    assert meta["xrgw-reason"] == "too-large"
    assert meta["xrgw-body-size"] == str(len(body))
    assert meta["xrgw-body-sha256"] == hashlib.sha256(body).hexdigest()
    assert "body left out (the dead letter's limit is 1000 bytes)" in meta["xrgw-detail"]
    assert not dead.has_body
    # The original's metadata is still there for whoever looks for the message.
    assert json.loads(meta["xrgw-record"])["topic_name"] == "/store/12/cashierdesk/2"
    assert len(consumer.acked) == 2 and not consumer.nacked
    assert sample(metrics, "xrgw_messages_deadlettered_total", reason="too-large") == 1


def test_a_dead_letter_refused_for_its_size_is_written_again_without_the_body() -> None:
    out = MemoryProducer(max_message_bytes=1000)

    def refuse_bodies(message: NativeMessage) -> Outcome | None:
        if message.has_body:
            return Outcome.refused_as_too_large("broker refused: Packet too large")
        return None

    dlq = MemoryProducer(rule=refuse_bodies)  # no limit known before sending
    route, consumer, _, _, _ = build([big_sale(2, 5000)], out=out, dlq=dlq)
    asyncio.run(run_to_end(route, consumer))
    [dead] = dlq.written
    meta = _meta(dead)
    assert meta["xrgw-reason"] == "too-large" and "xrgw-body-sha256" in meta
    assert "the dead letter refused it: broker refused: Packet too large" in meta["xrgw-detail"]
    assert len(consumer.acked) == 1


def test_a_dead_letter_refused_for_another_reason_keeps_its_body_and_is_held() -> None:
    """Only a size refusal drops the body; any other permanent refusal holds the message
    (and shows as a stall) rather than losing what the letter would have said."""
    dlq = MemoryProducer(rule=lambda m: Outcome.failed("not authorized", retryable=False))
    out = MemoryProducer(max_message_bytes=1000)
    consumer = MemoryConsumer([big_sale(2, 5000)])
    route = Route("store", "store-mqtt", consumer, Converter(CATALOG.messages()),
                  [Output("events-kafka", "KAFKA", out, defaults={"topic": "t"})],
                  deadletter=Output("dlq", "KAFKA", dlq, defaults={"topic": "d"}),
                  metrics=Metrics(), retry=FAST, stall_after=60)

    async def scenario() -> None:
        await route.start()
        try:
            async with asyncio.timeout(5):
                while not route.stalled:
                    await asyncio.sleep(0.01)
            assert [s.cause for s in route.stalled] == ["deadletter-held"]
            assert not route.ready
            assert not consumer.acked
        finally:
            await route.stop(grace=0.1)

    asyncio.run(scenario())
    assert not dlq.written
    assert [n.reason for n in consumer.nacked] == ["dead letter failed"]


def test_producers_that_know_a_limit_say_so_through_the_port() -> None:
    assert isinstance(MemoryProducer(max_message_bytes=10), SizeLimited)
    assert size_limit(MemoryProducer(max_message_bytes=10)) == 10
    assert size_limit(MemoryProducer()) is None
    assert size_limit(object()) is None


def test_withheld_body_in_every_metadata_shape() -> None:
    original = big_sale(1, 5000)
    body = original.body_bytes()
    digest = hashlib.sha256(body).hexdigest()
    for protocol in (KAFKA, NATS):
        letter = withheld_body(original, protocol=protocol, reason="too-large", detail="d")
        meta = deadletter_metadata(letter)
        assert meta["xrgw-body-size"] == str(len(body)) and meta["xrgw-body-sha256"] == digest
        assert not letter.has_body
        rebuilt = original_record(letter)
        assert rebuilt is not None and rebuilt.fields == original.fields
        assert not rebuilt.has_body
    # MQTT 3.1.1 has no metadata: the letter is a JSON document, and it holds no body.
    letter = withheld_body(original, protocol=MQTT311, reason="too-large")
    assert isinstance(letter.data, dict)
    assert letter.data["deadletter"]["xrgw-body-sha256"] == digest
    assert "data" not in letter.data["record"] and "data_base64" not in letter.data["record"]
    assert len(letter.body_bytes()) < len(body)


def test_a_dead_letter_exactly_at_its_limit_keeps_its_body() -> None:
    """The limit is the largest body the dead letter takes: one of exactly that size is
    written whole (the body is left out only above it)."""
    message = big_sale(2, 5000)
    out = MemoryProducer(max_message_bytes=1000)
    dlq = MemoryProducer(max_message_bytes=len(message.body_bytes()))
    route, consumer, _, _, _ = build([message], out=out, dlq=dlq)
    asyncio.run(run_to_end(route, consumer))
    [dead] = dlq.written
    assert _meta(dead)["xrgw-reason"] == "too-large"  # too large for the output ...
    assert dead.has_body and dead.body_bytes() == message.body_bytes()  # ... not the dlq
