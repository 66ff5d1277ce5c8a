"""The MQTT sink: PUBLISHes through the paho client (`paho_loop.py`), confirmed by
PUBACK/PUBCOMP; request-reply over a response topic (MQTT 5).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Sequence

import paho.mqtt.client as paho

from adapters.mqtt.options import MqttOptions, link_security
from adapters.mqtt.paho_loop import UNCONFIRMED, PahoLink, now
from adapters.mqtt.record import PublishArgs, packet_size, to_publish, to_record
from gateway.cloudevents import with_extension
from gateway.ports import (
    CORRELATION_ATTRIBUTE,
    Confirmation,
    EndpointSettings,
    NotConnected,
    Opened,
    Outcome,
    ReplyTable,
    confirmed,
    correlation_of,
)
from gateway.ports.pending import PendingBatch
from gateway.ports.reconnect import ReconnectGate
from gateway.record import NativeMessage

#: Messages waiting for a slot in the broker's window beyond which `submit` waits:
#: enough to keep the window full between two submits, without an unbounded queue.
_MAX_BACKLOG = 4096

#: A payload this far under the packet limit leaves room for any topic and properties a
#: record has in practice; only nearer ones are measured exactly (`packet_size`).
_PACKET_SLACK = 256 * 1024


def _requesting(record: NativeMessage, response_topic: str, token: str) -> NativeMessage:
    """`record` as a request: response topic, correlation data, and the `correlationid`
    extension when it is a binary CloudEvent (the binding writes it)."""
    record = with_extension(record, CORRELATION_ATTRIBUTE, token)
    return record.replace_fields(
        {**record.fields, "response_topic": response_topic, "correlation_data": token})


class MqttProducer:
    """Publishes records and reports each as delivered only after PUBACK/PUBCOMP.

    When the connection is down, `submit()` tries to reconnect, at most once per backoff
    interval (doubling up to `reconnect_max`); meanwhile it fails fast with a retryable
    Outcome instead of waiting.
    """

    def __init__(self, settings: EndpointSettings) -> None:
        self._settings = settings
        self._opts = MqttOptions.parse(settings)
        self.client_id = settings.client_id or f"xrgw-pub-{uuid.uuid4().hex[:12]}"
        self._link: PahoLink | None = None
        self._gate = ReconnectGate(self._opts.reconnect_max)
        self._order = asyncio.Lock()
        # Request-reply (MQTT 5): answers come to one response topic of this producer,
        # correlated by correlation data (or the answer's `correlationid` extension).
        self.replies = ReplyTable()
        self.response_topic = f"xrgw/reply/{self.client_id}"
        self._listening: PahoLink | None = None  # the link subscribed to response_topic

    @property
    def connected(self) -> bool:
        return self._link is not None and self._link.connected

    @property
    def max_message_bytes(self) -> int:
        """The largest PUBLISH packet: `max_packet_size`, lowered by an MQTT 5 broker's
        CONNACK Maximum Packet Size."""
        link = self._link
        broker = None if link is None else link.max_packet_size
        return self._opts.max_packet_size if broker is None else min(
            broker, self._opts.max_packet_size)

    async def connect(self) -> None:
        await self._gate.connect(self._connect)

    async def _connect(self) -> None:
        if self._link is not None:
            await self._link.disconnect()
            self._link = None
        # Clean start: a producer needs no session, and a stale one would make the broker
        # expect packet ids this fresh client knows nothing about.
        link = PahoLink(
            client_id=self.client_id, v5=self._opts.v5, clean_start=True, manual_ack=False,
            on_message=self._on_answer, **link_security(self._settings, self._opts),
        )
        try:
            await link.connect(
                self._opts.host,
                self._opts.port,
                keepalive=int(self._opts.keepalive),
                timeout=self._opts.connect_timeout,
            )
        except NotConnected:
            raise
        self._link = link

    async def submit(self, messages: Sequence[NativeMessage]) -> Confirmation:
        # The lock is FIFO: a submit waiting for room keeps its place, so batches reach
        # the link (and the wire) in submit order.
        async with self._order:
            link = await self._live_link()
            if isinstance(link, str):
                return confirmed([Outcome.failed(link) for _ in messages])
            await link.wait_for_room(_MAX_BACKLOG)
            deadline = asyncio.get_running_loop().time() + self._opts.publish_timeout
            batch = link.publish_batch([self._publish_args(r, link.v5) for r in messages],
                                       UNCONFIRMED, deadline)
        return self._confirm(link, batch)

    async def request(self, messages: Sequence[NativeMessage], timeout: float) -> Confirmation:
        """MQTT 5 request-reply: each message is published with this producer's response
        topic and a correlation token as correlation data (a binary CloudEvent also as
        its `correlationid` extension); the Confirmation resolves when every answer came
        or `timeout` passed. A message the broker did not PUBACK fails retryably."""
        if not self._opts.v5:
            return confirmed([Outcome.failed("request-reply needs MQTT 5.0", retryable=False)
                              for _ in messages])
        async with self._order:
            link = await self._live_link()
            if isinstance(link, str):
                return confirmed([Outcome.failed(link) for _ in messages])
            if self._listening is not link:
                try:
                    granted = await link.subscribe([(self.response_topic, 1)],
                                                   timeout=self._opts.connect_timeout)
                except (NotConnected, TimeoutError) as exc:
                    return confirmed([Outcome.failed(f"cannot subscribe to the response "
                                                     f"topic: {exc}") for _ in messages])
                if granted[0] >= 0x80:
                    return confirmed([Outcome.failed("response topic subscription refused")
                                      for _ in messages])
                self._listening = link
            await link.wait_for_room(_MAX_BACKLOG)
            opened: list[Opened] = []
            items: list[PublishArgs | Outcome] = []
            for record in messages:
                token, future = self.replies.open()
                opened.append((token, future))
                items.append(self._publish_args(_requesting(
                    record, self.response_topic, token), True))
            deadline = asyncio.get_running_loop().time() + self._opts.publish_timeout
            batch = link.publish_batch(items, UNCONFIRMED, deadline)
        return asyncio.create_task(self._answers(link, batch, opened, timeout))

    async def _answers(self, link: PahoLink, batch: PendingBatch,
                       opened: list[Opened], timeout: float) -> list[Outcome]:
        published = await self._confirm(link, batch)
        for item, outcome in zip(opened, published, strict=True):
            if not outcome.delivered and not isinstance(item, Outcome):
                self.replies.refuse(item[0], outcome)
        return await self.replies.collect(opened, timeout)

    async def _live_link(self) -> PahoLink | str:
        """The connected link, reconnecting first if it is down; else why not (each
        message of the batch then fails with it, retryably)."""
        if not self.connected:
            reason = await self._try_reconnect()
            if reason is not None:
                return reason
        link = self._link
        assert link is not None
        return link

    def _on_answer(self, message: paho.MQTTMessage) -> None:
        try:
            record = to_record(message, True, now())
        except (UnicodeDecodeError, ValueError):
            return  # a topic that is not UTF-8 is not ours
        # The record has the correlation data as text already (our tokens are ASCII; data
        # that is not UTF-8 cannot be one of them).
        token = record.fields.get("correlation_data")
        self.replies.resolve(token if isinstance(token, str) and token
                             else correlation_of(record), record)

    def _publish_args(self, record: NativeMessage, v5: bool) -> PublishArgs | Outcome:
        try:
            args = to_publish(record, v5, self._opts.qos, self._opts.retain)
        except ValueError as exc:
            return Outcome.failed(str(exc), retryable=False)
        limit = self.max_message_bytes
        if len(args.payload) + _PACKET_SLACK > limit:  # near or over: measure exactly
            size = packet_size(args, v5)
            if size > limit:
                return Outcome.oversize(size, limit, "PUBLISH packet (max packet size)")
        return args

    async def _try_reconnect(self) -> str | None:
        return await self._gate.try_reconnect(lambda: self.connected, self._connect)

    @staticmethod
    async def _confirm(link: PahoLink, batch: PendingBatch) -> list[Outcome]:
        """The batch's outcomes once every message is confirmed, or at its deadline
        (`publish_timeout` after submit) with the unconfirmed ones failed, retryable."""
        outcomes = await batch.future  # a copy: late PUBACKs still fill in the batch
        if not batch.complete:
            # Its messages still waiting for a window slot are not sent any more: the
            # engine sends them again, and a late copy would only be a duplicate.
            link.withdraw(batch)
        return outcomes

    async def aclose(self) -> None:
        link, self._link = self._link, None
        if link is not None:
            with contextlib.suppress(Exception):
                await link.disconnect()
