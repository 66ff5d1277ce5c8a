"""The asyncio side of the AMQP adapter's batches, without a broker: the proton thread is
replaced by a stand-in that records what would be handed over, and the notes the proton
thread would post are fed in directly."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any, cast

import pytest
from proton import Delivery as ProtonDelivery
from proton import Message

from adapters.amqp import AmqpConsumer, AmqpProducer
from adapters.amqp.consumer import _ReceiverHandler, _Settler
from adapters.amqp.link import Note
from adapters.amqp.proton_loop import ProtonThread
from gateway.ports import EndpointSettings, NotConnected, Outcome, defer_bodies
from gateway.record import NativeMessage

URL = "amqp://127.0.0.1:1"  # never connected to


class _Thread:
    """Stands in for a ProtonThread: keeps the calls instead of running them."""

    def __init__(self) -> None:
        self.calls: list[Callable[[], None]] = []

    def call(self, fn: Callable[[], None]) -> None:
        self.calls.append(fn)


class _Handler:
    """Stands in for the receiver handler: records each burst of settlements."""

    def __init__(self) -> None:
        self.bursts: list[list[tuple[int, int, str]]] = []

    def settle_burst(self, settlements: list[tuple[int, int, str]]) -> None:
        self.bursts.append(settlements)


def _encoded(n: int, **properties: Any) -> bytes:
    """A received message as the proton thread hands it over: still encoded."""
    return Message(body=json.dumps({"n": n}).encode(), content_type="application/json",
                   **properties).encode()


def _records(numbers: range) -> list[bytes]:
    return [_encoded(n) for n in numbers]


def _consumer(max_in_flight: int) -> tuple[AmqpConsumer, _Thread, _Handler]:
    consumer = AmqpConsumer(EndpointSettings(
        URL, options={"node": "/queue/q", "max_in_flight": max_in_flight}))
    thread, handler = _Thread(), _Handler()
    consumer._thread = cast(ProtonThread[Note], thread)
    consumer._settler = _Settler(cast(ProtonThread[Note], thread),
                                 cast(_ReceiverHandler, handler), "released",
                                 consumer._settled)
    consumer._connected = True
    return consumer, thread, handler


def _producer(**options: Any) -> tuple[AmqpProducer, _Thread]:
    producer = AmqpProducer(EndpointSettings(URL, options={"node": "/queue/q", **options}))
    thread = _Thread()
    producer._thread = cast(ProtonThread[Note], thread)
    producer._handler = cast(Any, object())  # (its send() is never run here)
    producer._connected = True
    return producer, thread


def _numbers(deliveries: list[Any]) -> list[int]:
    return [d.message.data["n"] for d in deliveries]


def test_read_batch_takes_several_bursts_up_to_limit_and_window() -> None:
    async def run() -> None:
        consumer, thread, _ = _consumer(max_in_flight=6)
        consumer._on_batch(cast(ProtonThread[Note], thread), [
            Note("messages", 0, encoded=_records(range(3))),
            Note("messages", 3, encoded=_records(range(3, 8))),
        ])
        assert _numbers(await consumer.read_batch(4)) == [0, 1, 2, 3]
        assert _numbers(await consumer.read_batch(100)) == [4, 5]  # the window is full
        assert consumer.unsettled == 6
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.1):
                await consumer.read_batch(100)

    asyncio.run(run())


def test_messages_are_handed_over_encoded_and_decoded_on_the_loop() -> None:
    """The proton thread hands bursts over encoded (decoding there fought the event loop
    for the GIL on every attribute read); the consumer decodes them into records with
    the burst's receive time."""
    async def run() -> None:
        consumer, thread, _ = _consumer(max_in_flight=10)
        consumer._on_batch(cast(ProtonThread[Note], thread), [
            Note("messages", 0, encoded=[_encoded(1, subject="a/b"), _encoded(2)],
                 reason="2026-11-27T20:00:00Z")])
        first, second = await consumer.read_batch(10)
        assert first.message.data == {"n": 1} and second.message.data == {"n": 2}
        assert first.message.received_at == "2026-11-27T20:00:00Z"
        assert first.message.fields["properties"] == {"subject": "a/b",
                                                      "content-type": "application/json"}

    asyncio.run(run())


def test_a_message_that_cannot_be_read_is_handed_out_undecodable_and_its_burst_goes_on(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading a burst fails for one message: that one comes out undecodable (the route
    dead-letters it with the reason), the others as records. Before, the exception left
    the whole burst unread and unsettled."""
    from adapters.amqp import consumer as consumer_module

    real = consumer_module.to_record

    def to_record(msg: Any, received_at: str | None = None, parse: bool = True
                  ) -> NativeMessage:
        if msg.subject == "poison":
            raise ValueError("year 2285384 is out of range")
        return real(msg, received_at, parse)

    monkeypatch.setattr(consumer_module, "to_record", to_record)

    async def run() -> None:
        consumer, thread, _ = _consumer(max_in_flight=10)
        poison = _encoded(2, subject="poison")
        consumer._on_batch(cast(ProtonThread[Note], thread), [
            Note("messages", 0, encoded=[_encoded(1), poison, _encoded(3)],
                 reason="2026-11-28T02:00:00Z")])
        first, second, third = await consumer.read_batch(10)
        assert first.undecodable is None and third.undecodable is None
        assert (first.message.data, third.message.data) == ({"n": 1}, {"n": 3})
        assert second.undecodable == ("the AMQP message cannot be read: ValueError: year "
                                      "2285384 is out of range")
        assert second.message.payload == poison  # the bytes as they came, for the dead letter
        assert second.message.received_at == "2026-11-28T02:00:00Z"
        await second.ack()  # dead-lettered: settled like any other
        assert consumer.unsettled == 2

    asyncio.run(run())


def test_a_burst_of_settlements_is_one_hand_over() -> None:
    async def run() -> None:
        consumer, thread, handler = _consumer(max_in_flight=10)
        consumer._on_batch(cast(ProtonThread[Note], thread),
                           [Note("messages", 7, encoded=_records(range(4)))])
        deliveries = await consumer.read_batch(10)
        await deliveries[0].ack()
        await deliveries[1].nack("later")
        await deliveries[2].nack("poison", retry=False)
        await deliveries[3].ack()
        assert consumer.unsettled == 0  # counted at once: the window slides now
        assert thread.calls == []  # handed over at the loop's next turn, not per message
        await asyncio.sleep(0)
        assert len(thread.calls) == 1
        thread.calls[0]()
        assert handler.bursts == [[
            (7, ProtonDelivery.ACCEPTED, ""),
            (8, ProtonDelivery.RELEASED, "later"),
            (9, ProtonDelivery.REJECTED, "poison"),
            (10, ProtonDelivery.ACCEPTED, ""),
        ]]

    asyncio.run(run())


def test_a_lost_connection_drops_what_was_not_handed_out() -> None:
    async def run() -> None:
        consumer, thread, _ = _consumer(max_in_flight=10)
        consumer._on_batch(cast(ProtonThread[Note], thread), [
            Note("messages", 0, encoded=_records(range(3))),
            Note("lost", reason="connection closed"),
        ])
        with pytest.raises(NotConnected):
            await consumer.read_batch(10)

    asyncio.run(run())


def test_outcomes_in_any_order_confirm_in_message_order() -> None:
    async def run() -> None:
        producer, thread = _producer()
        confirmation = await producer.submit(_records(range(3)))
        assert len(thread.calls) == 1  # the whole batch in one hand-over
        post = producer._on_batch
        rejected = Outcome.failed("broker rejected: amqp:invalid-field", retryable=False)
        post(cast(ProtonThread[Note], thread),
             [Note("outcomes", outcomes=[(0, 2, Outcome.ok()), (0, 1, rejected)])])
        assert isinstance(confirmation, asyncio.Future) and not confirmation.done()
        post(cast(ProtonThread[Note], thread),
             [Note("outcomes", outcomes=[(0, 0, Outcome.ok())])])
        assert await confirmation == [Outcome.ok(), rejected, Outcome.ok()]

    asyncio.run(run())


def test_missing_dispositions_fail_at_publish_timeout() -> None:
    async def run() -> None:
        producer, thread = _producer(publish_timeout=0.1)
        confirmation = await producer.submit(_records(range(2)))
        producer._on_batch(cast(ProtonThread[Note], thread),
                           [Note("outcomes", outcomes=[(0, 0, Outcome.ok())])])
        async with asyncio.timeout(2):
            delivered, missing = await confirmation
        assert delivered.delivered
        assert not missing.delivered and missing.retryable
        assert "in time" in (missing.reason or "")
        # A disposition arriving late changes nothing and is not an error.
        producer._on_batch(cast(ProtonThread[Note], thread),
                           [Note("outcomes", outcomes=[(0, 1, Outcome.ok())])])

    asyncio.run(run())


def test_a_lost_connection_fails_what_is_unconfirmed_of_every_submit() -> None:
    async def run() -> None:
        producer, thread = _producer()
        first = await producer.submit(_records(range(2)))
        second = await producer.submit(_records(range(2, 3)))
        assert len(thread.calls) == 2  # in submit order
        producer._on_batch(cast(ProtonThread[Note], thread), [
            Note("outcomes", outcomes=[(0, 0, Outcome.ok())]),
            Note("lost", reason="disconnected"),
        ])
        kept, lost = await first
        [lost_too] = await second
        assert kept.delivered
        for outcome in (lost, lost_too):
            assert not outcome.delivered and outcome.retryable
            assert outcome.reason == "connection lost: disconnected"
        assert not producer.connected

    asyncio.run(run())


def test_a_consumer_needs_a_node_and_starts_not_connected() -> None:
    with pytest.raises(ValueError, match=r"^node: a consumer needs a source address$"):
        AmqpConsumer(EndpointSettings(URL, options={}))
    consumer = AmqpConsumer(EndpointSettings(URL, options={"node": "/queue/q"}))
    assert consumer.connected is False

    async def run() -> None:
        await consumer.aclose()  # never connected: nothing to stop, no error
        assert consumer.connected is False

    asyncio.run(run())


def _request(n: int, reply_to: str | None) -> bytes:
    return _encoded(n, id=f"m-{n}", reply_to=reply_to)


def test_a_request_naming_a_reply_to_is_handed_out_with_its_answer() -> None:
    """Request-reply: a message with a `reply-to` carries the hook that answers it there
    (sent through a producer of the consumer's own endpoint settings, so an unreachable
    broker is the consumer's, named in the error); one without carries none."""
    async def run() -> None:
        consumer, thread, _ = _consumer(max_in_flight=10)
        consumer._on_batch(cast(ProtonThread[Note], thread), [
            Note("messages", 0, encoded=[_request(0, "/queue/replies"), _request(1, None)])])
        request, plain = await consumer.read_batch(10)
        assert plain.answer is None
        assert request.answer is not None
        with pytest.raises(NotConnected):
            await request.answer(NativeMessage("AMQP/1.0", {}, {"ok": True}), "")
        await consumer._answers.aclose()

    asyncio.run(run())


_DURABLE_REFUSED = ("amqp:precondition-failed: PRECONDITION_FAILED - inequivalent arg "
                    "'durable' for queue 'q' in vhost '/': received 'true' but current is "
                    "'false'")


@pytest.mark.parametrize(("refusal", "attaches"), [
    (_DURABLE_REFUSED, ["configuration", "none"]),  # auto: the existing queue as it is
    ("amqp:not-found: no queue 'q'", ["configuration"]),  # any other refusal stands
])
def test_connect_attaches_again_only_to_an_existing_transient_queue(
        refusal: str, attaches: list[str]) -> None:
    """`connect` under `terminus-durability: auto`: a durable attach refused because the
    queue exists transient is made once more, transient; any other refusal is raised."""
    consumer = AmqpConsumer(EndpointSettings(URL, options={"node": "/queue/q"}))
    asked: list[str] = []

    async def attach() -> None:
        asked.append(consumer._durability.for_address("/queue/q"))
        if len(asked) == 1:
            raise NotConnected(refusal)

    consumer._attach = attach  # type: ignore[method-assign]

    async def run() -> None:
        await consumer.connect()

    if len(attaches) == 1:
        with pytest.raises(NotConnected, match="not-found"):
            asyncio.run(run())
    else:
        asyncio.run(run())
    assert asked == attaches


def test_a_consumer_told_to_defer_bodies_leaves_a_declared_json_body_unparsed() -> None:
    """`ports.defer_bodies`: a data body declared JSON is parsed only when read, and
    reads as one parsed at once; one without a content type is parsed at once."""
    async def run() -> None:
        consumer, thread, _ = _consumer(max_in_flight=10)
        bare = Message(body=b'{"n": 3}').encode()
        consumer._on_batch(cast(ProtonThread[Note], thread),
                           [Note("messages", 0, encoded=[_encoded(1)])])
        assert defer_bodies(consumer)
        consumer._on_batch(cast(ProtonThread[Note], thread),
                           [Note("messages", 1, encoded=[_encoded(1), bare])])
        at_once, deferred, undeclared = await consumer.read_batch(10)
        assert at_once.message.unparsed_body() is None
        assert deferred.message.unparsed_body() == json.dumps({"n": 1}).encode()
        assert undeclared.message.unparsed_body() is None
        assert deferred.message == at_once.message
        assert (deferred.message.data, undeclared.message.data) == ({"n": 1}, {"n": 3})
    asyncio.run(run())
