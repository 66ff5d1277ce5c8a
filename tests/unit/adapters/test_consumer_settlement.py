"""What the MQTT and NATS consumers tell the broker when a delivery settles, without a
broker: the client library's connection is replaced by a stand-in that records the acks,
nacks and disconnects it is asked for. (The AMQP consumer's dispositions are checked the
same way in test_amqp_bridge.py; that the broker then redelivers or forgets is pinned by
the integration tests.)"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, cast

import nats.errors
import paho.mqtt.client as paho
import pytest
from hypothesis import given
from hypothesis import strategies as st
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from adapters.mqtt.consumer import MqttConsumer
from adapters.mqtt.paho_loop import PahoLink
from adapters.nats.acks import AckFrontier
from adapters.nats.connection import log
from adapters.nats.consumer import NatsConsumer
from adapters.nats.record import JetStreamAck
from gateway.ports import Delivery, EndpointSettings, ack_all, answer_nobody, defer_bodies
from gateway.record import NativeMessage

_RECORD = NativeMessage("NATS", {}, None)

# -- MQTT --------------------------------------------------------------------------------


class _Link:
    """Stands in for the paho link: records PUBACK/PUBREC requests and disconnects."""

    def __init__(self) -> None:
        self.connected = True
        self.acks: list[tuple[int, int]] = []
        self.disconnects = 0

    def ack(self, mid: int, qos: int) -> None:
        self.acks.append((mid, qos))

    async def disconnect(self) -> None:
        self.disconnects += 1
        self.connected = False

    def resume_reading(self) -> None:
        pass

    def pause_reading(self) -> None:
        pass


def test_mqtt_a_consumer_told_to_answer_nobody_makes_no_answer_hooks() -> None:
    """`ports.answer_nobody`: an MQTT 5 request (a response topic) gets an answer hook
    until the route says it answers nobody, then none."""
    async def main() -> None:
        consumer = _mqtt5()

        def request(mid: int) -> None:
            message = paho.MQTTMessage(mid, b"t/x")
            message.qos = 1
            message.payload = b"{}"
            message.properties = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
            message.properties.ResponseTopic = "answers/1"
            consumer._inbox.put((1, message))

        request(1)
        [asked] = await _read(consumer, 1)
        assert answer_nobody(consumer)
        request(2)
        [unasked] = await _read(consumer, 1)
        assert asked.answer is not None
        assert unasked.answer is None
    asyncio.run(main())


def _mqtt5() -> MqttConsumer:
    """An MQTT 5 consumer on a fake link, as connected."""
    consumer = MqttConsumer(EndpointSettings(
        "mqtt://127.0.0.1:1",
        options={"topicfilter": "t/#", "max_in_flight": 8, "protocol": "5.0"}))
    consumer._link = cast(PahoLink, _Link())
    consumer._generation = 1
    return consumer


def _mqtt(link: _Link) -> MqttConsumer:
    consumer = MqttConsumer(EndpointSettings(
        "mqtt://127.0.0.1:1", options={"topicfilter": "t/#", "max_in_flight": 8}))
    consumer._link = cast(PahoLink, link)
    consumer._generation = 1
    return consumer


def _publish(consumer: MqttConsumer, mid: int, qos: int, generation: int = 1) -> None:
    message = paho.MQTTMessage(mid, b"t/x")
    message.qos = qos
    message.payload = b"{}"
    consumer._inbox.put((generation, message))


async def _read(consumer: MqttConsumer, count: int) -> list[Delivery]:
    deliveries = await consumer.read_batch(count)
    assert len(deliveries) == count
    return deliveries


def test_mqtt_an_ack_sends_the_packet_id_and_qos_of_the_message() -> None:
    async def main() -> None:
        link = _Link()
        consumer = _mqtt(link)
        _publish(consumer, 11, 1)
        _publish(consumer, 12, 2)
        first, second = await _read(consumer, 2)
        assert consumer.unsettled == 2
        await second.ack()
        assert consumer.unsettled == 1
        await first.ack()
        assert link.acks == [(12, 2), (11, 1)]
        assert consumer.unsettled == 0 and link.disconnects == 0
    asyncio.run(main())


def test_mqtt_a_message_never_to_come_again_is_acked_a_retry_drops_the_connection() -> None:
    """MQTT has no nack: a dead-lettered message (retry=False) is acknowledged so that
    the broker forgets it; a retry leaves it unacknowledged and reconnects, after which
    the broker sends it again."""
    async def main() -> None:
        link = _Link()
        consumer = _mqtt(link)
        _publish(consumer, 21, 1)
        _publish(consumer, 22, 1)
        poison, later = await _read(consumer, 2)
        await poison.nack("poison", retry=False)
        assert link.acks == [(21, 1)] and link.disconnects == 0
        await later.nack("later", retry=True)
        assert link.acks == [(21, 1)]  # not acked: the broker resends it
        assert link.disconnects == 1 and consumer._link is None
        assert consumer.unsettled == 0
    asyncio.run(main())


def test_mqtt_nothing_is_sent_for_qos_0_a_stale_connection_or_none() -> None:
    async def main() -> None:
        link = _Link()
        consumer = _mqtt(link)
        _publish(consumer, 0, 0)  # QoS 0: nothing to acknowledge
        _publish(consumer, 31, 1, generation=0)  # received on the connection before
        _publish(consumer, 32, 1)
        _publish(consumer, 33, 1)
        at_most_once, stale, current, unlinked = await _read(consumer, 4)
        await at_most_once.nack("later", retry=True)
        await stale.nack("later", retry=True)
        await stale_ack(stale)
        await current.ack()
        consumer._link = None
        await unlinked.ack()
        assert link.acks == [(32, 1)]  # the stale packet id would ack another message
        assert link.disconnects == 0  # no reconnect for messages not of this connection
        assert consumer.unsettled == 0
    asyncio.run(main())


async def stale_ack(delivery: Delivery) -> None:
    """A delivery settles once: a second settlement is refused before the adapter."""
    with pytest.raises(Exception, match="already settled"):
        await delivery.ack()


# -- NATS --------------------------------------------------------------------------------


_CLOSED = nats.errors.ConnectionClosedError()


class _Msg:
    """Stands in for a nats-py Msg: records what was said to the server about it."""

    def __init__(self, name: str, fail: bool = False) -> None:
        self.name = name
        self.said: list[tuple[str, Any]] = []
        self._fail = fail

    async def _say(self, what: str, arg: Any = None) -> None:
        self.said.append((what, arg))
        if self._fail:
            raise _CLOSED

    async def ack(self) -> None:
        await self._say("ack")

    async def nak(self, delay: float | None = None) -> None:
        await self._say("nak", delay)

    async def term(self) -> None:
        await self._say("term")


def _nats(**options: Any) -> NatsConsumer:
    consumer = NatsConsumer(EndpointSettings(
        "nats://127.0.0.1:1", options={"subjects": "s.>", **options}))
    consumer._inbox.unsettled = 3  # as if three deliveries were handed out
    return consumer


async def _settle(consumer: NatsConsumer, msg: _Msg, ack: bool, retry: bool = True) -> None:
    await consumer._settler(cast(Any, msg))(ack, "" if ack else "why", retry)


def test_nats_jetstream_acks_naks_with_the_delay_or_terminates() -> None:
    async def main() -> None:
        consumer = _nats(stream="S", nak_delay=2)
        done, later, poison = _Msg("done"), _Msg("later"), _Msg("poison")
        await _settle(consumer, done, True)
        await _settle(consumer, later, False, retry=True)
        await _settle(consumer, poison, False, retry=False)
        assert done.said == [("ack", None)]
        assert later.said == [("nak", 2.0)]
        assert poison.said == [("term", None)]
        assert consumer.unsettled == 0
    asyncio.run(main())


def test_nats_a_nak_without_a_delay_asks_for_redelivery_at_once() -> None:
    async def main() -> None:
        consumer = _nats(stream="S")
        later = _Msg("later")
        await _settle(consumer, later, False, retry=True)
        assert later.said == [("nak", None)]
    asyncio.run(main())


def test_nats_core_and_shadow_consumers_tell_the_server_nothing() -> None:
    async def main() -> None:
        for consumer in (_nats(), _nats(stream="S", observe=True)):
            msgs = [_Msg("a"), _Msg("b"), _Msg("c")]
            await _settle(consumer, msgs[0], True)
            await _settle(consumer, msgs[1], False, retry=True)
            await _settle(consumer, msgs[2], False, retry=False)
            assert [m.said for m in msgs] == [[], [], []]
            assert consumer.unsettled == 0
    asyncio.run(main())


def test_nats_a_settlement_the_server_cannot_take_is_left_to_redelivery(
        caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> None:
        consumer = _nats(stream="S")
        for ack, retry in ((True, False), (False, True), (False, False)):
            gone = _Msg("gone", fail=True)
            await _settle(consumer, gone, ack, retry)  # does not raise
            assert len(gone.said) == 1
        assert consumer.unsettled == 0
    with caplog.at_level(logging.DEBUG, logger=log.name):
        asyncio.run(main())
    said = [r.getMessage() for r in caplog.records if r.name == log.name]
    assert said == [f"NATS settlement not sent ({_CLOSED!r}); redelivery after ack_wait"] * 3


def _ack_all(consumer: NatsConsumer, *names: str) -> tuple[
        AckFrontier[Any], list[_Msg], list[Any]]:
    acks: AckFrontier[Any] = AckFrontier()
    consumer._acks = acks
    msgs = [_Msg(name, fail=name.startswith("gone")) for name in names]
    settlers = [consumer._ack_all_settler(cast(Any, msg), JetStreamAck("S", n, n), acks)
                for n, msg in enumerate(msgs, start=1)]
    return acks, msgs, settlers


def test_nats_ack_all_one_ack_per_burst_for_the_settled_prefix() -> None:
    async def main() -> None:
        consumer = _nats(stream="S")
        _, msgs, settle = _ack_all(consumer, "one", "two", "three")
        await settle[0](True, "", False)
        await settle[1](False, "poison", False)  # dead-lettered: settled, the frontier moves
        assert [m.said for m in msgs] == [[], [], []]  # the +ACK waits for the burst's end
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert [m.said for m in msgs] == [[], [("ack", None)], []]  # one +ACK covers 1..2
        await settle[2](True, "", False)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert msgs[2].said == [("ack", None)]
        assert consumer.unsettled == 0
        for _ in range(5):  # (the done callbacks run on later turns)
            await asyncio.sleep(0)
        assert not consumer._ack_tasks  # each ack's task is forgotten once done
    asyncio.run(main())


def test_nats_ack_all_a_retry_naks_that_message_and_holds_the_frontier() -> None:
    async def main() -> None:
        consumer = _nats(stream="S", nak_delay=1.5)
        _, msgs, settle = _ack_all(consumer, "one", "two")
        await settle[0](False, "later", True)
        await settle[1](True, "", False)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert msgs[0].said == [("nak", 1.5)]
        assert msgs[1].said == []  # an ack of 2 would cover 1, which is to come again
    asyncio.run(main())


def test_nats_ack_all_sends_nothing_for_a_frontier_of_a_connection_gone() -> None:
    async def main() -> None:
        consumer = _nats(stream="S")
        _, msgs, settle = _ack_all(consumer, "one")
        consumer._acks = None  # the connection went: the server redelivers it anyway
        await settle[0](True, "", False)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert msgs[0].said == []
    asyncio.run(main())


def test_nats_ack_all_without_a_position_settles_the_message_on_its_own() -> None:
    async def main() -> None:
        consumer = _nats(stream="S")
        acks: AckFrontier[Any] = AckFrontier()
        consumer._acks = acks
        msg = _Msg("unordered")
        await consumer._ack_all_settler(cast(Any, msg), None, acks)(True, "", False)
        assert msg.said == [("ack", None)]  # at once, not behind the frontier
        assert len(acks) == 0
    asyncio.run(main())


def test_nats_ack_all_a_redelivery_is_not_acked_past_a_message_delivered_before_it() -> None:
    """The server ignores an ack whose delivery sequence is below the highest acked: an
    ack of the redelivered 1 (delivery 3) would make it ignore 2's (delivery 2)."""
    async def main() -> None:
        consumer = _nats(stream="S")
        acks, msgs, settle = _ack_all(consumer, "one", "two")
        await settle[0](False, "later", True)  # -NAK: 1 comes again, as delivery 3
        again = _Msg("one again")
        redelivered = consumer._ack_all_settler(cast(Any, again), JetStreamAck("S", 1, 3), acks)
        await redelivered(True, "", False)
        for _ in range(3):
            await asyncio.sleep(0)
        assert again.said == [] and msgs[1].said == []  # 2 is pending: no ack yet
        await settle[1](True, "", False)
        for _ in range(3):
            await asyncio.sleep(0)
        assert msgs[1].said == [("ack", None)] and again.said == []  # 2's ack covers 1
    asyncio.run(main())


def test_nats_ack_all_an_ack_or_nak_the_server_cannot_take_is_logged_and_left(
        caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> None:
        consumer = _nats(stream="S", nak_delay=1)
        _, msgs, settle = _ack_all(consumer, "gone 1", "gone 2")
        await settle[1](False, "later", True)
        await settle[0](True, "", False)
        for _ in range(5):
            await asyncio.sleep(0)
        assert msgs[1].said == [("nak", 1.0)] and msgs[0].said == [("ack", None)]
    with caplog.at_level(logging.DEBUG, logger=log.name):
        asyncio.run(main())
    said = [r.getMessage() for r in caplog.records if r.name == log.name]
    assert said == [f"NATS nak not sent ({_CLOSED!r}); redelivery after ack_wait",
                    f"NATS ack not sent ({_CLOSED!r}); redelivery after ack_wait"]


@given(st.lists(st.sampled_from(["ack", "retry", "later"]), min_size=1, max_size=8))
def test_nats_ack_all_in_bulk_says_what_acking_each_in_order_says(hows: list[str]) -> None:
    """`NatsConsumer.ack_bulk` (the route's `ports.ack_all`) against each delivery's own
    ack: the same +ACK and -NAKs, the same window. "retry": nacked for redelivery first;
    "later": left unsettled; "ack": acked with the batch."""
    def said(bulk: bool) -> tuple[object, ...]:
        async def main() -> tuple[object, ...]:
            consumer = _nats(stream="S")
            consumer._inbox.unsettled = len(hows)
            _, msgs, settle = _ack_all(consumer, *(f"m{n}" for n in range(len(hows))))
            deliveries = [Delivery(_RECORD, hook) for hook in settle]
            for delivery, how in zip(deliveries, hows, strict=True):
                if how == "retry":
                    await delivery.nack("later", retry=True)
            batch = [d for d, how in zip(deliveries, hows, strict=True) if how == "ack"]
            if bulk:
                await ack_all(batch)
            else:
                for delivery in batch:
                    await delivery.ack()
            await _spin()
            return [m.said for m in msgs], consumer.unsettled
        return asyncio.run(main())

    assert said(bulk=True) == said(bulk=False)


def test_nats_ack_all_hooks_name_their_consumer_for_bulk_acks() -> None:
    async def main() -> None:
        consumer = _nats(stream="S")
        _, msgs, settle = _ack_all(consumer, "one", "two", "three")
        assert all(getattr(hook, "bulk", None) is consumer for hook in settle)
        await ack_all([Delivery(_RECORD, hook) for hook in settle])
        await _spin()
        assert [m.said for m in msgs] == [[], [], [("ack", None)]]  # one +ACK for all
        assert consumer.unsettled == 0
    asyncio.run(main())


async def _spin(rounds: int = 6) -> None:
    for _ in range(rounds):
        await asyncio.sleep(0)


def test_mqtt_a_consumer_told_to_defer_bodies_leaves_a_declared_json_body_unparsed() -> None:
    """`ports.defer_bodies`: an MQTT 5 body declared JSON (its Content Type) is parsed
    only when read, and reads as one parsed at once; one without is parsed at once."""
    async def main() -> None:
        consumer = _mqtt5()

        def publish(mid: int, declared: bool) -> None:
            message = paho.MQTTMessage(mid, b"t/x")
            message.qos = 1
            message.payload = b'{"a": 1}'
            message.properties = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
            if declared:
                message.properties.ContentType = "application/json"
            consumer._inbox.put((1, message))

        publish(1, True)
        [at_once] = await _read(consumer, 1)
        assert defer_bodies(consumer)
        publish(2, True)
        publish(3, False)
        deferred, bare = await _read(consumer, 2)
        assert at_once.message.unparsed_body() is None
        assert deferred.message.unparsed_body() == b'{"a": 1}'
        assert bare.message.unparsed_body() is None
        assert deferred.message.data == at_once.message.data == bare.message.data == {"a": 1}
    asyncio.run(main())
