"""The MQTT source: a paho client on its own thread (`paho_loop.py`) whose PUBLISHes are
handed over in batches; QoS 1/2 messages are acknowledged when their delivery settles.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import deque
from functools import partial

import paho.mqtt.client as paho
from paho.mqtt.packettypes import PacketTypes

from adapters.mqtt.options import MqttOptions, link_security
from adapters.mqtt.paho_loop import UNCONFIRMED, PahoLink, new_properties, now
from adapters.mqtt.record import to_publish, to_record
from gateway.ports import Answer, Delivery, EndOfInput, EndpointSettings, NotConnected
from gateway.ports.inbox import Inbox, InboxCounts
from gateway.protocols import MQTT5, MQTT311
from gateway.record import NativeMessage


class MqttConsumer(InboxCounts):
    """Subscribes to `filters` on a persistent session and yields settled-once deliveries."""

    def __init__(self, settings: EndpointSettings) -> None:
        self._settings = settings
        self._opts = MqttOptions.parse(settings)
        if not self._opts.filters:
            raise ValueError("topicfilter: a consumer needs at least one topic filter")
        # A stable id is what makes the session (and redelivery) survive a restart.
        self.client_id = (
            settings.client_id
            or "xrgw-"
            + hashlib.sha256(
                "\n".join((settings.uri, *sorted(self._opts.filters))).encode()
            ).hexdigest()[:16]
        )
        self._link: PahoLink | None = None
        self._generation = 0
        # (connection generation, message): a message of an older connection is not acked
        self._inbox: Inbox[tuple[int, paho.MQTTMessage]] = Inbox(self._opts.max_in_flight)
        self._subscribing = False  # connect() is waiting for SUBACK: never pause reading
        self._parse_bodies = True  # False once the route may never read them
        self._answers = True  # False once the route answers nobody
        self.session_present = False

    @property
    def connected(self) -> bool:
        return self._link is not None and self._link.connected

    async def connect(self) -> None:
        if self._inbox.closed:
            raise EndOfInput("consumer closed")
        await self._drop_link()
        opts = self._opts
        link = PahoLink(
            client_id=self.client_id,
            v5=opts.v5,
            clean_start=opts.cleanstart,
            manual_ack=True,
            on_message=self._on_message,
            on_lost=self._on_lost,
            **link_security(self._settings, opts),
        )
        props = None
        if opts.v5:
            props = new_properties(
                PacketTypes.CONNECT,
                SessionExpiryInterval=opts.sessionexpiryinterval,
                ReceiveMaximum=opts.max_in_flight,
            )
        self._generation += 1
        self._link = link
        # Keep reading until the SUBACK is in: with a session present the broker resends
        # its unacked messages right after CONNACK (even before this coroutine resumes
        # from link.connect), up to Receive Maximum (= max_in_flight) of them, which
        # fills the buffer; pausing then would leave the SUBACK unread, and nothing
        # drains the buffer before connect() returns -> "no SUBACK" on every reconnect
        # after a crash with a full window. The buffer is bounded meanwhile by what the
        # broker may send unacked.
        self._subscribing = True
        try:
            self.session_present = await link.connect(
                opts.host,
                opts.port,
                keepalive=int(opts.keepalive),
                properties=props,
                timeout=opts.connect_timeout,
            )
            # Subscribe even when the session is present: it is idempotent and picks up
            # a changed filter list.
            try:
                granted = await link.subscribe(opts.subscriptions(),
                                               timeout=opts.connect_timeout)
            except TimeoutError:
                await self._drop_link()
                raise NotConnected("no SUBACK") from None
        finally:
            self._subscribing = False
        if self._link is link and self._inbox.full:
            link.pause_reading()  # the back-pressure deferred above
        refused = [f for f, g in zip(opts.filters, granted, strict=False) if g >= 0x80]
        if refused:
            await self._drop_link()
            raise NotConnected(f"subscription refused for {refused}")
        self._inbox.wake()

    async def read_batch(self, limit: int) -> list[Delivery]:
        return await self._inbox.read_batch(limit, self._take, lambda: self.connected)

    def defer_bodies(self) -> None:
        """`ports.DefersBodies`: from now on a body is parsed only if something reads its
        value (a route whose outputs take it as its bytes never does)."""
        self._parse_bodies = False

    def answer_nobody(self) -> None:
        """`ports.AnswersSenders`: from now on no answer hooks (no response topic looked
        for): the route answers nobody."""
        self._answers = False

    async def aclose(self) -> None:
        self._inbox.close()
        await self._drop_link()
        self._inbox.wake()

    # -- internals ---------------------------------------------------------------------
    def _take(self, count: int) -> list[Delivery]:
        """Up to `count` buffered messages as deliveries, in order received."""
        buffer = self._inbox.buffer
        taken = [buffer.popleft() for _ in range(count)]
        if self._link is not None and not self._inbox.full:
            self._link.resume_reading()
        received_at = now()  # one clock read per batch: they arrived together
        return [self._deliver(generation, message, received_at)
                for generation, message in taken]

    def _deliver(self, generation: int, message: paho.MQTTMessage,
                 received_at: str) -> Delivery:
        try:
            record = to_record(message, self._opts.v5, received_at, self._parse_bodies)
        except (UnicodeDecodeError, ValueError):
            # A non-compliant broker can pass a topic that is not UTF-8 (paho's `topic`
            # then raises). Keep the message so it can be dead-lettered, with the topic's
            # bytes escaped, instead of losing its slot in the window for good.
            topic = bytes(getattr(message, "_topic", b"")).decode("utf-8", "backslashreplace")
            record = NativeMessage(
                MQTT5 if self._opts.v5 else MQTT311,
                {"topic_name": topic, "qos": int(message.qos), "retain": bool(message.retain)},
                payload=bytes(message.payload) or None, received_at=received_at)
        return Delivery(record, partial(self._settle, generation, message.mid, message.qos),
                        self._answerer(message) if self._answers else None)

    def _answerer(self, message: paho.MQTTMessage) -> Answer | None:
        """Request-reply (MQTT 5): publish the answer to the request's response topic with
        its correlation data (as received, byte for byte). No answer -> nothing is sent:
        the requester's own timeout tells it."""
        props = getattr(message, "properties", None) if self._opts.v5 else None
        response_topic = getattr(props, "ResponseTopic", None)
        if not isinstance(response_topic, str) or not response_topic:
            return None
        correlation = getattr(props, "CorrelationData", None)
        correlation = bytes(correlation) if correlation is not None else None

        async def answer(reply: NativeMessage | None, why: str) -> None:
            link = self._link
            if reply is None or link is None:
                return
            args = to_publish(reply.replace_fields(
                {**reply.fields, "topic_name": response_topic, "retain": False}),
                True, self._opts.qos, False, correlation)
            batch = link.publish_batch([args], UNCONFIRMED)
            async with asyncio.timeout(self._opts.publish_timeout):
                [outcome] = await batch.future
            if not outcome.delivered:
                raise RuntimeError(outcome.reason or "not confirmed")

        return answer

    async def _settle(self, generation: int, mid: int, qos: int,
                      ack: bool, reason: str, retry: bool) -> None:
        # Synchronous unless the connection must go: the engine settles a batch in a burst,
        # and the PUBACKs queued here leave together in the link's next socket write.
        self._inbox.settled()
        link = self._link
        if qos == 0 or generation != self._generation or link is None:
            return  # nothing to send, or a stale packet id (it will be redelivered)
        if ack or not retry:
            link.ack(mid, qos)
        else:
            # No nack in MQTT: the broker resends unacked messages on reconnect.
            await self._drop_link()

    def _on_message(self, message: paho.MQTTMessage) -> None:
        # Called by the link for each message of a burst it parses, on the loop thread:
        # appending is the whole hand-over, and the reader wakes once per burst (setting
        # the event again is a no-op until the reader has cleared it).
        inbox = self._inbox
        inbox.put((self._generation, message))
        if inbox.full and self._link is not None and not self._subscribing:
            self._link.pause_reading()

    def _on_lost(self, why: str) -> None:
        self._forget_buffered()
        self._inbox.wake()

    def _forget_buffered(self) -> None:
        # Buffered QoS>=1 messages come again after reconnect; handing them out now would
        # only create deliveries whose acks cannot be sent. QoS 0 ones are kept.
        inbox = self._inbox
        inbox.buffer = deque(item for item in inbox.buffer if item[1].qos == 0)

    async def _drop_link(self) -> None:
        link, self._link = self._link, None
        if link is not None:
            await link.disconnect()
            self._forget_buffered()
            self._inbox.wake()
