"""One conformance suite for every adapter (issue 31): each case runs against each
`Subject` (subjects.py: MQTT 5.0 and 3.1.1, AMQP 1.0, Kafka, NATS core and JetStream,
HTTP) with its real broker from the harness, and drives the adapters only through the
installed adapter factory and the contract in `gateway.ports`.

What differs between protocols is read from the protocol profile (`ordering`,
`redelivery`, `request_reply`, `endpoint.uris.listens`) and from the ports an adapter
implements (`SizeLimited`, `Requester`); where a protocol cannot do a thing, the case
asserts what the contract promises instead (core NATS: a nacked message is gone; HTTP:
the sender is told to retry). The per-protocol files (tests/integration/test_adapter_*.py,
test_*_batch.py) keep only what is specific to one protocol.

Cases: open/close; an endpoint out of reach; batch order across pipelined submits;
nack -> redelivery (and nack for good); saturation (max_in_flight unsettled) -> resume
after settling; reconnect after every connection to the broker was reset (harness fault
proxy); poison: a message over the sink's size limit -> `too_large`, a message the
consumer cannot decode -> `undecodable`; request-reply where the profile allows it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gateway.json.values import JSON
from gateway.ports import (
    AlreadySettled,
    Consumer,
    Delivery,
    EndOfInput,
    NotConnected,
    Outcome,
    Producer,
    Requester,
    size_limit,
)
from gateway.record import NativeMessage
from tests.integration.conformance.driving import (
    PATIENCE,
    deliver,
    nothing_more,
    number,
    reconnect,
    record,
    send_once,
    take,
    until_seen,
)
from tests.integration.conformance.subjects import SUBJECTS, Lane, Network, Subject, closing
from tests.integration.support import asyncio_test


@pytest.fixture(params=SUBJECTS, ids=str)
def subject(request: pytest.FixtureRequest) -> Subject:
    param: Subject = request.param
    return param


@pytest.fixture
def broker(subject: Subject, request: pytest.FixtureRequest) -> Any:
    """The subject's session broker, started on first use (None: HTTP needs none)."""
    return None if subject.broker is None else request.getfixturevalue(subject.broker)


@pytest.fixture
def network() -> Iterator[Network]:
    net = Network()
    yield net
    net.close()


@dataclass
class Ends:
    """Both ends of a lane, connected."""

    subject: Subject
    lane: Lane
    consumer: Consumer
    producer: Producer

    def records(self, numbers: Iterable[int]) -> list[NativeMessage]:
        return [record(self.subject.protocol, self.lane.fields, n) for n in numbers]

    def message(self, payload: bytes) -> NativeMessage:
        return NativeMessage(self.subject.protocol, self.lane.fields, payload=payload)

    async def through(self, message: NativeMessage) -> Delivery:
        """Deliver one message and read it (acked); reading meanwhile, since an HTTP
        sender waits for the settlement."""
        sending = asyncio.create_task(deliver(self.producer, [message]))
        try:
            [delivery] = await take(self.consumer, 1)
            await delivery.ack()
            await asyncio.wait_for(sending, PATIENCE)
        finally:
            sending.cancel()
        return delivery

    async def round_trip(self, numbers: range) -> None:
        """Deliver `numbers` and read (and ack) until each came at least once."""
        reading = asyncio.create_task(until_seen(self.consumer, set(numbers)))
        try:
            await deliver(self.producer, self.records(numbers))
            await asyncio.wait_for(reading, PATIENCE)
        finally:
            reading.cancel()


@contextlib.asynccontextmanager
async def _ends(subject: Subject, broker: Any, network: Network,
                **consumer_options: JSON) -> AsyncIterator[Ends]:
    """A fresh lane and both its ends, connected: the consumer first (it subscribes,
    attaches or listens), then the producer; closed however the case ends."""
    lane = await subject.lane(broker, network, consumer_options)
    consumer, producer = lane.open_consumer(), lane.open_producer()
    async with closing(consumer, producer):
        await consumer.connect()
        await producer.connect()
        yield Ends(subject, lane, consumer, producer)


def _numbers(deliveries: list[Delivery]) -> list[int]:
    return [number(d.message) for d in deliveries]


def _in_order(subject: Subject, got: list[int], sent: list[int]) -> None:
    """Sent order where the protocol has a unit of order (all of a lane's messages
    share one: topic, key, subject, queue); the same messages otherwise (HTTP requests
    are independent)."""
    if subject.profile.ordering.source_key:
        assert got == sent
    else:
        assert sorted(got) == sorted(sent)


def _source_redelivers(subject: Subject, lane: Lane) -> bool:
    redelivery = subject.profile.redelivery
    return redelivery is not None and all(o in lane.consumer.options for o in redelivery.needs)


def _sender_waits(subject: Subject) -> bool:
    return subject.profile.endpoint.uris.listens


def _replies(subject: Subject, lane: Lane) -> bool:
    how = subject.profile.request_reply
    options = {**lane.consumer.options, **lane.producer.options}
    return how is not None and not any(options.get(o) for o in how.not_with) and all(
        lane.producer.options.get(o) for o in how.output_needs)


# ---------------------------------------------------------------------------- open / close

@asyncio_test
async def test_open_and_close(subject: Subject, broker: Any, network: Network) -> None:
    lane = await subject.lane(broker, network, {})
    consumer, producer = lane.open_consumer(), lane.open_producer()
    assert isinstance(consumer, Consumer) and isinstance(producer, Producer)
    async with closing(consumer, producer):
        await consumer.connect()
        await producer.connect()
        assert consumer.connected and producer.connected
        await consumer.aclose()
        await producer.aclose()
        closed = (consumer.connected, producer.connected)  # (not narrowed by mypy)
        assert closed == (False, False)
        with pytest.raises(EndOfInput):  # closed: the engine stops reading, cleanly
            async with asyncio.timeout(PATIENCE):
                await consumer.read_batch(1)
        await consumer.aclose()  # a second close is harmless
        await producer.aclose()


@asyncio_test
async def test_an_endpoint_out_of_reach_is_not_connected_and_fails_retryably(
        subject: Subject, broker: Any) -> None:
    # Nothing listens where the adapters dial; a listening consumer finds its port taken.
    network = Network(dead=True)
    try:
        lane = await subject.lane(broker, network, {})
        consumer, producer = lane.open_consumer(), lane.open_producer()
        async with closing(consumer, producer), asyncio.timeout(PATIENCE):
            with pytest.raises(NotConnected):
                await consumer.connect()
            with pytest.raises(NotConnected):  # the engine's cue to connect again later
                await consumer.read_batch(1)
            with contextlib.suppress(NotConnected):  # HTTP egress: connects per request
                await producer.connect()
            outcomes = await send_once(producer, [record(subject.protocol, lane.fields, 1)])
            assert [(o.delivered, o.retryable) for o in outcomes] == [(False, True)], outcomes
    finally:
        network.close()


# ---------------------------------------------------------------------------- order

@asyncio_test
async def test_batches_keep_their_order_across_pipelined_submits(
        subject: Subject, broker: Any, network: Network) -> None:
    async with _ends(subject, broker, network) as ends:
        async def send() -> list[Outcome]:
            # Both submitted before either is confirmed: the contract keeps submit order.
            confirmations = [await ends.producer.submit(ends.records(range(30))),
                             await ends.producer.submit(ends.records(range(30, 60)))]
            return [o for c in confirmations for o in await c]

        sending = asyncio.create_task(send())
        got: list[Delivery] = []
        while len(got) < 60:
            batch = await take(ends.consumer, min(7, 60 - len(got)), limit=7)
            for delivery in batch:  # settled as read: an HTTP sender waits for it
                await delivery.ack()
            got += batch
        outcomes = await asyncio.wait_for(sending, PATIENCE)
        assert all(o.delivered for o in outcomes), outcomes
        _in_order(subject, _numbers(got), list(range(60)))
        with pytest.raises(AlreadySettled):
            await got[0].ack()
        await nothing_more(ends.consumer)


# ---------------------------------------------------------------------------- nack

@asyncio_test
async def test_a_nacked_message_comes_again_or_the_contract_says_why_not(
        subject: Subject, broker: Any, network: Network) -> None:
    async with _ends(subject, broker, network) as ends:
        consumer = ends.consumer
        if _sender_waits(subject):
            # No broker keeps it: the nack answers the sender "retry later", and the
            # sender's retry is the redelivery.
            confirmation = await ends.producer.submit(ends.records([1]))
            [delivery] = await take(consumer, 1)
            await delivery.nack("downstream unavailable")
            [outcome] = await asyncio.wait_for(confirmation, PATIENCE)
            assert not outcome.delivered and outcome.retryable, outcome
            assert outcome.retry_after is not None and outcome.retry_after >= 0
            assert number((await ends.through(ends.records([1])[0])).message) == 1
            await nothing_more(consumer)
            return
        await deliver(ends.producer, ends.records([0, 1]))
        zero, one = await take(consumer, 2)
        assert _numbers([zero, one]) == [0, 1]
        await zero.ack()
        await one.nack("downstream unavailable")
        if _source_redelivers(subject, ends.lane):
            # At least once: n=1 comes again (n=0 only if its ack had not left yet).
            redelivered = _numbers(await until_seen(consumer, {1}))
            assert 1 in redelivered and set(redelivered) <= {0, 1}, redelivered
        else:
            # The source keeps nothing (core NATS, at most once): the nack was final,
            # and the consumer goes on with the next message.
            await nothing_more(consumer)
            assert number((await ends.through(ends.records([2])[0])).message) == 2
        await nothing_more(consumer)


@asyncio_test
async def test_a_message_nacked_for_good_does_not_come_again(
        subject: Subject, broker: Any, network: Network) -> None:
    async with _ends(subject, broker, network) as ends:
        sending = asyncio.create_task(send_once(ends.producer, ends.records([0, 1])))
        zero, one = sorted(await take(ends.consumer, 2), key=lambda d: number(d.message))
        await zero.nack("poison", retry=False)
        await one.ack()
        outcomes = await asyncio.wait_for(sending, PATIENCE)
        # A sender on the line learns it was refused for good, not to retry.
        assert [o.delivered or not o.retryable for o in outcomes] == [True, True], outcomes
        await nothing_more(ends.consumer)


# ---------------------------------------------------------------------------- saturation

@asyncio_test
async def test_max_in_flight_unsettled_then_reading_resumes_after_settling(
        subject: Subject, broker: Any, network: Network) -> None:
    limit = 3
    async with _ends(subject, broker, network, max_in_flight=limit) as ends:
        consumer = ends.consumer
        sending = asyncio.create_task(deliver(ends.producer, ends.records(range(2 * limit))))
        held = await take(consumer, limit)
        await nothing_more(consumer)  # `limit` unsettled: read_batch waits
        freed: list[Delivery] = []
        if not _sender_waits(subject):
            # One settled, one more: the window slides (an HTTP sender refused with 503
            # sends again only once its whole batch is answered).
            await held[0].ack()
            freed = await take(consumer, 1)
            await nothing_more(consumer)
        for delivery in held:
            if not delivery.settled:
                await delivery.ack()
        rest = freed + await take(consumer, limit - len(freed))
        for delivery in rest:
            await delivery.ack()
        _in_order(subject, _numbers(held + rest), list(range(2 * limit)))
        await asyncio.wait_for(sending, PATIENCE)
        await nothing_more(consumer)


# ---------------------------------------------------------------------------- reconnect

@asyncio_test
async def test_both_ends_come_back_after_the_broker_connections_are_reset(
        subject: Subject, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    network = Network(faulty=True)
    with contextlib.ExitStack() as stack:
        stack.callback(network.close)
        if subject.own_broker is not None:
            broker = stack.enter_context(subject.own_broker(network, tmp_path))
        else:
            broker = None if subject.broker is None else request.getfixturevalue(
                subject.broker)
        async with _ends(subject, broker, network) as ends:
            await ends.round_trip(range(5))
            before = network.accepted
            assert await asyncio.to_thread(network.reset) >= 1
            await _comes_back(ends)
            assert network.accepted > before  # they came back over new connections
            assert ends.producer.connected
            if not ends.consumer.connected:
                await reconnect(ends.consumer)


async def _comes_back(ends: Ends) -> None:
    if _source_redelivers(ends.subject, ends.lane) or _sender_waits(ends.subject):
        # Sent at once, while the consumer may still be away: the source keeps them
        # (or the sender retries until the ingress takes them).
        await ends.round_trip(range(5, 10))
        return
    # At most once (core NATS): what is sent while the subscription is away is lost.
    # Once a probe gets through, everything sent gets through again.
    probe = 100
    async with asyncio.timeout(PATIENCE):
        while True:
            await deliver(ends.producer, ends.records([probe]))
            try:
                await until_seen(ends.consumer, {probe}, patience=1.0)
                break
            except TimeoutError:  # lost while the subscription was away: once more
                probe += 1
    await ends.round_trip(range(5, 10))


# ---------------------------------------------------------------------------- poison

@asyncio_test
async def test_a_message_over_the_sinks_limit_is_refused_as_too_large(
        subject: Subject, broker: Any, network: Network) -> None:
    async with _ends(subject, broker, network) as ends:
        limit = size_limit(ends.producer) or subject.receiver_limit
        if limit is None:
            # The adapter declares no limit (not SizeLimited): a large message travels whole.
            big = ends.message(b"x" * 300_000)
            assert (await ends.through(big)).message.body_bytes() == big.body_bytes()
            return
        zero, two = ends.records([0, 2])
        batch = [zero, ends.message(b"x" * (limit + 1)), two]
        confirming = asyncio.create_task(send_once(ends.producer, batch))
        got = await take(ends.consumer, 2)
        for delivery in got:
            await delivery.ack()
        small, large, other = await asyncio.wait_for(confirming, PATIENCE)
        assert small.delivered and other.delivered, (small, other)
        assert large.too_large and not large.retryable and large.reason, large
        _in_order(subject, _numbers(got), [0, 2])
        await nothing_more(ends.consumer)


@asyncio_test
async def test_what_the_consumer_cannot_decode_is_handed_over_marked(
        subject: Subject, broker: Any, network: Network) -> None:
    async with _ends(subject, broker, network) as ends:
        if subject.poison is None:
            # The protocol carries any bytes as a body: bytes that are no JSON and no
            # UTF-8 are a payload, never an undecodable delivery.
            odd = ends.message(b"\xff\xfe{not json")
            delivery = await ends.through(odd)
            assert delivery.undecodable is None
            assert delivery.message.body_bytes() == odd.body_bytes()
            return
        await subject.poison(broker, ends.lane)
        good, bad, after = await take(ends.consumer, 3)
        assert good.undecodable is None and after.undecodable is None
        assert _numbers([good, after]) == [0, 2]
        assert isinstance(bad.undecodable, str) and bad.undecodable, bad.undecodable
        for delivery in (good, bad, after):
            await delivery.ack()  # the route dead-letters `bad` and acks it: moves past
        await nothing_more(ends.consumer)


# ---------------------------------------------------------------------------- request-reply

@asyncio_test
async def test_request_reply_where_the_profile_allows_it(
        subject: Subject, broker: Any, network: Network) -> None:
    async with _ends(subject, broker, network) as ends:
        [request] = ends.records([7])
        if not _replies(subject, ends.lane):
            # No way to answer: a received message carries no answer hook.
            assert (await ends.through(request)).answer is None
            return
        producer = ends.producer
        assert isinstance(producer, Requester)
        asking = asyncio.create_task(send_request(producer, request))
        [delivery] = await take(ends.consumer, 1)
        assert number(delivery.message) == 7 and delivery.answer is not None
        answer: dict[str, JSON] = {"answer": 7}
        await delivery.answer(NativeMessage(subject.protocol, {}, data=answer), "")
        await delivery.ack()
        [outcome] = await asyncio.wait_for(asking, PATIENCE)
        assert outcome.delivered and outcome.reply is not None, outcome
        reply = outcome.reply
        assert (reply.data if reply.has_json_data else json.loads(reply.body_bytes())) == answer


async def send_request(producer: Requester, message: NativeMessage) -> list[Outcome]:
    return await (await producer.request([message], PATIENCE / 2))
