"""MQTT 3.1.1 / 5.0 consumer and producer (paho-mqtt 2 driven by asyncio).

Options: `adapters/_mqtt_options.py` (one spec: names, xRegistry spellings, types,
defaults; rendered in docs/configuration.md).

Security. `mqtts://host[:8883]` or `ssl://` (or a `tls` block) connects with TLS (see
`adapters/_tls.py`): the server is verified against `tls.ca_file` (default: the system
CAs) including its host name, and `tls.cert_file`/`tls.key_file` add a client
certificate (mutual TLS). `username` and `password` (or the URI's `user:password@`) go
into CONNECT. A refused login fails `connect()` with `CONNACK refused: Not authorized` /
`Bad user name or password`; a rejected certificate with `TLS: server certificate
rejected: ...` or `TLS: the server refused the client certificate ...`. The password is
never logged.

Settlement. The consumer connects with manual acks, clean start off (unless
`cleanstart`) and a stable client id (default derived from URI and filters), so the
broker keeps unacknowledged QoS>=1 messages across restarts. `ack()` sends PUBACK (QoS
1) / PUBCOMP (QoS 2). MQTT has no negative ack, and a broker resends unacked messages
only on reconnect, so `nack(retry=True)` closes the connection: `read_batch()` raises
NotConnected, the engine calls `connect()` again, and the broker redelivers every
unacked message (DUP set). Deliveries of an older connection are stale: settling them
sends nothing (their packet ids belong to the old connection) and they are redelivered,
which keeps at-least-once. `nack(retry=False)` acks: the caller has given up on the
message (dead-lettered it). QoS 0 has nothing to settle. Settling does not wait for
the network: the PUBACKs of a burst of settlements go out together in the link's next
socket write (MQTT 3.1.1 wants them in receive order; the engine settles in order).

QoS 2 caveat: paho answers PUBREC on receipt, which hands the message over for good; an
unacked QoS 2 message is not redelivered after a reconnect. Use QoS 1 when the gateway
must see a message again after a failure.

Batches. `read_batch(limit)` waits for the first message, then returns every message
the link has parsed so far (at most `limit`, and at most as many as the unsettled limit
leaves room for), with one receive timestamp for the batch. The link parses everything
one socket read brought in before the loop resumes the reader, so the messages of a
burst reach the buffer together and wake the reader once.

Back-pressure: at most `max_in_flight` deliveries are unsettled (`read_batch()` waits),
and at most `max_in_flight` received ones are buffered; when the buffer is full the
socket is no longer read, so TCP pushes back on the broker. With MQTT 5 the broker's
Receive Maximum enforces the same bound for QoS>=1 before anything is sent. A buffer
held full for longer than the keepalive makes paho drop the connection (redelivery
follows).

Publishing. `submit()` converts the batch and hands it to the link in one call, which
sends as many QoS>=1 PUBLISHes as the broker's Receive Maximum allows (MQTT 5; 100 on
3.1.1) in one socket write and keeps the rest in order in a backlog, sent as PUBACKs
free the window; `submit()` itself waits only when that backlog is long
(`_MAX_BACKLOG`). The Confirmation resolves when every message of the batch is
confirmed (PUBACK/PUBCOMP; QoS 0: once written) or `publish_timeout` after submit.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import ssl
import time
import uuid
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, cast
from urllib.parse import unquote, urlsplit

import paho.mqtt.client as paho
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.subscribeoptions import SubscribeOptions

from adapters._mqtt_options import MAX_PACKET_SIZE, OPTIONS
from adapters._mqtt_record import PublishArgs, packet_size, to_publish, to_record
from adapters._paho_loop import PahoLink, PublishBatch, new_properties
from adapters._reconnect import ReconnectGate
from adapters._schemes import check_scheme
from adapters._tls import client_context, wants_tls
from gateway.ports import (
    CORRELATION_ATTRIBUTE,
    Answer,
    Confirmation,
    Delivery,
    EndOfInput,
    EndpointSettings,
    NotConnected,
    Opened,
    Outcome,
    ReplyTable,
    confirmed,
    correlation_of,
)
from gateway.protocols import MQTT5, MQTT311, profile
from gateway.record import NativeMessage

__all__ = ["MqttConsumer", "MqttOptions", "MqttProducer"]

_URIS = profile(MQTT5).endpoint.uris  # 3.1.1 has the same


@dataclass(frozen=True)
class MqttOptions:
    host: str
    port: int
    tls: ssl.SSLContext | None
    v5: bool
    filters: tuple[str, ...]
    qos: int
    session_expiry: int
    keepalive: int
    max_in_flight: int
    connect_timeout: float
    publish_timeout: float
    reconnect_max: float
    retain: bool = False
    clean_start: bool = False
    retain_as_published: bool = False
    retain_handling: int = 0
    max_packet_size: int = MAX_PACKET_SIZE

    @classmethod
    def parse(cls, settings: EndpointSettings) -> MqttOptions:
        """Read the options (`adapters/_mqtt_options.py`); raises ValueError naming the bad
        one."""
        url = urlsplit(settings.uri)
        check_scheme(url.scheme, _URIS)
        secure = wants_tls(url.scheme, _URIS, settings.tls)
        opts = OPTIONS.read(settings.options)
        raw_filters = opts["topicfilter"] or ()
        filters = (raw_filters,) if isinstance(raw_filters, str) else tuple(
            str(f) for f in cast(list[str], raw_filters))
        v5 = opts["protocol"] != "3.1.1"
        session_expiry, clean_start = _session(
            opts, OPTIONS.canonical(settings.options), filters, v5)
        return cls(
            host=url.hostname or "127.0.0.1",
            port=url.port or (8883 if secure else 1883),
            tls=client_context(settings.tls) if secure else None,
            v5=v5,
            filters=filters,
            qos=cast(int, opts["qos"]),
            session_expiry=session_expiry,
            keepalive=int(cast(float, opts["keepalive"])),
            max_in_flight=cast(int, opts["max_in_flight"]),
            connect_timeout=cast(float, opts["connect_timeout"]),
            publish_timeout=cast(float, opts["publish_timeout"]),
            reconnect_max=cast(float, opts["reconnect_max"]),
            retain=cast(bool, opts["retain"]),
            clean_start=clean_start,
            retain_as_published=cast(bool, opts["retainaspublished"]),
            retain_handling=cast(int, opts["retainhandling"]),
            max_packet_size=cast(int, opts["max_packet_size"]),
        )

    def subscriptions(self) -> list[tuple[str, Any]]:
        """SUBSCRIBE entries: MQTT 5 carries the subscription options, 3.1.1 the QoS only."""
        if not self.v5:
            return [(f, self.qos) for f in self.filters]
        return [(f, SubscribeOptions(qos=self.qos, retainAsPublished=self.retain_as_published,
                                     retainHandling=self.retain_handling))
                for f in self.filters]


def _session(opts: dict[str, object], written: dict[str, object],
             filters: tuple[str, ...], v5: bool) -> tuple[int, bool]:
    """(session expiry, clean start) of a consumer. On a shared subscription the session
    ends with the connection unless the operator chose otherwise: a broker keeps giving
    a disconnected member's session its share of new messages (mosquitto 2.0 does, for
    the session's whole expiry), and hands a dead member's unacknowledged ones to the
    others only when its session ends, if at all (the MQTT 5 spec's SHOULD). With a
    persistent session and a replica that never comes back under the same client id (a
    Deployment's new pod), those messages wait the whole expiry and are then dropped.
    MQTT 3.1.1 has no expiry: a clean session is the only session that ends."""
    expiry = cast(int, opts["sessionexpiryinterval"])
    clean = cast(bool, opts["cleanstart"])
    shared = bool(opts["sharedsubscriptiongroup"]) or any(
        f.startswith("$share/") for f in filters)
    if shared and "sessionexpiryinterval" not in written:
        expiry = 0
    if shared and not v5 and "cleanstart" not in written:
        clean = True
    return expiry, clean


def _link_security(settings: EndpointSettings, opts: MqttOptions) -> dict[str, Any]:
    """PahoLink keyword arguments: TLS context and credentials."""
    url = urlsplit(settings.uri)
    username = settings.username or (unquote(url.username) if url.username else None)
    password = settings.password or (unquote(url.password) if url.password else None)
    return {"tls": opts.tls, "username": username, "password": password}


#: What a message reports when its PUBACK/PUBCOMP did not come within publish_timeout.
_UNCONFIRMED = Outcome.failed("no PUBACK/PUBCOMP in time")
#: Messages waiting for a slot in the broker's window beyond which `submit` waits:
#: enough to keep the window full between two submits, without an unbounded queue.
_MAX_BACKLOG = 4096
#: A payload this far under the packet limit leaves room for any topic and properties a
#: record has in practice; only nearer ones are measured exactly (`packet_size`).
_PACKET_SLACK = 256 * 1024


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


# ====================================================================== consumer


class MqttConsumer:
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
        self._buffer: deque[tuple[int, paho.MQTTMessage]] = deque()
        self._unsettled = 0
        self._changed = asyncio.Event()
        self._closed = False
        self._subscribing = False  # connect() is waiting for SUBACK: never pause reading
        self.session_present = False

    @property
    def connected(self) -> bool:
        return self._link is not None and self._link.connected

    @property
    def unsettled(self) -> int:
        return self._unsettled

    async def connect(self) -> None:
        if self._closed:
            raise EndOfInput("consumer closed")
        await self._drop_link()
        opts = self._opts
        link = PahoLink(
            client_id=self.client_id,
            v5=opts.v5,
            clean_start=opts.clean_start,
            manual_ack=True,
            on_message=self._on_message,
            on_lost=self._on_lost,
            **_link_security(self._settings, opts),
        )
        props = None
        if opts.v5:
            props = new_properties(
                PacketTypes.CONNECT,
                SessionExpiryInterval=opts.session_expiry,
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
                keepalive=opts.keepalive,
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
        if self._link is link and len(self._buffer) >= opts.max_in_flight:
            link.pause_reading()  # the back-pressure deferred above
        refused = [f for f, g in zip(opts.filters, granted, strict=False) if g >= 0x80]
        if refused:
            await self._drop_link()
            raise NotConnected(f"subscription refused for {refused}")
        self._changed.set()

    async def read_batch(self, limit: int) -> list[Delivery]:
        while True:
            if self._closed:
                raise EndOfInput("consumer closed")
            room = min(limit, self._opts.max_in_flight - self._unsettled)
            if room > 0 and self._buffer:
                return self._take(room)
            if not self.connected:
                raise NotConnected("not connected")
            self._changed.clear()
            await self._changed.wait()

    async def aclose(self) -> None:
        self._closed = True
        await self._drop_link()
        self._changed.set()

    # -- internals ---------------------------------------------------------------------
    def _take(self, count: int) -> list[Delivery]:
        """Up to `count` buffered messages as deliveries, in order received."""
        buffer = self._buffer
        taken = [buffer.popleft() for _ in range(min(count, len(buffer)))]
        self._unsettled += len(taken)
        if self._link is not None and len(buffer) < self._opts.max_in_flight:
            self._link.resume_reading()
        received_at = _now()  # one clock read per batch: they arrived together
        return [self._deliver(generation, message, received_at)
                for generation, message in taken]

    def _deliver(self, generation: int, message: paho.MQTTMessage,
                 received_at: str) -> Delivery:
        try:
            record = to_record(message, self._opts.v5, received_at)
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
                        self._answerer(message))

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
            batch = link.publish_batch([args], _UNCONFIRMED)
            async with asyncio.timeout(self._opts.publish_timeout):
                await batch.done
            if not batch.outcomes[0].delivered:
                raise RuntimeError(batch.outcomes[0].reason or "not confirmed")

        return answer

    async def _settle(self, generation: int, mid: int, qos: int,
                      ack: bool, reason: str, retry: bool) -> None:
        # Synchronous unless the connection must go: the engine settles a batch in a burst,
        # and the PUBACKs queued here leave together in the link's next socket write.
        self._unsettled -= 1
        self._changed.set()
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
        buffer = self._buffer
        buffer.append((self._generation, message))
        if (len(buffer) >= self._opts.max_in_flight and self._link is not None
                and not self._subscribing):
            self._link.pause_reading()
        self._changed.set()

    def _on_lost(self, why: str) -> None:
        self._forget_buffered()
        self._changed.set()

    def _forget_buffered(self) -> None:
        # Buffered QoS>=1 messages come again after reconnect; handing them out now would
        # only create deliveries whose acks cannot be sent. QoS 0 ones are kept.
        self._buffer = deque(item for item in self._buffer if item[1].qos == 0)

    async def _drop_link(self) -> None:
        link, self._link = self._link, None
        if link is not None:
            await link.disconnect()
            self._forget_buffered()
            self._changed.set()


# ====================================================================== producer


def _requesting(record: NativeMessage, response_topic: str, token: str) -> NativeMessage:
    """`record` as a request: response topic, correlation data, and the `correlationid`
    extension when it is a binary CloudEvent (MQTT 5 binary mode: user properties)."""
    fields = {**record.fields, "response_topic": response_topic, "correlation_data": token}
    pairs = record.pairs("user_properties")
    if any(name == "specversion" for name, _ in pairs):
        fields["user_properties"] = [{"name": n, "value": v} for n, v in
                                     [*pairs, (CORRELATION_ATTRIBUTE, token)]]
    return record.replace_fields(fields)


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
            on_message=self._on_answer, **_link_security(self._settings, self._opts),
        )
        try:
            await link.connect(
                self._opts.host,
                self._opts.port,
                keepalive=self._opts.keepalive,
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
                                       _UNCONFIRMED)
        return self._confirm(link, batch, deadline)

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
            batch = link.publish_batch(items, _UNCONFIRMED)
        return asyncio.create_task(self._answers(link, batch, deadline, opened, timeout))

    async def _answers(self, link: PahoLink, batch: PublishBatch, deadline: float,
                       opened: list[Opened], timeout: float) -> list[Outcome]:
        published = await self._confirm(link, batch, deadline)
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
            record = to_record(message, True, _now())
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
    async def _confirm(link: PahoLink, batch: PublishBatch, deadline: float) -> list[Outcome]:
        """The batch's outcomes once every message is confirmed, or at the deadline
        (`publish_timeout` after submit) with the unconfirmed ones failed, retryable."""
        try:
            async with asyncio.timeout_at(deadline):
                await batch.done
        except TimeoutError:
            # Its messages still waiting for a window slot are not sent any more: the
            # engine sends them again, and a late copy would only be a duplicate.
            link.withdraw(batch)
            return list(batch.outcomes)  # a copy: late PUBACKs still fill in the batch
        return batch.outcomes

    async def aclose(self) -> None:
        link, self._link = self._link, None
        if link is not None:
            with contextlib.suppress(Exception):
                await link.disconnect()
