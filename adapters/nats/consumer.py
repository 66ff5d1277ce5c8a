"""The NATS source: a core subscription (queue group optional) or a JetStream pull
consumer, handed over in batches; JetStream acks follow settlement (`acks.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import Sequence
from typing import Any

import nats.errors
import nats.js.errors
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js.api import AckPolicy, ConsumerConfig, ConsumerInfo, DeliverPolicy

from adapters.nats.acks import AckFrontier, AckSlot
from adapters.nats.client import Client
from adapters.nats.connection import await_reconnect, log, now, open_client
from adapters.nats.options import NatsOptions
from adapters.nats.record import JetStreamAck, jetstream_ack, to_publish, to_record
from gateway.observability.logs import fields
from gateway.ports import (
    Answer,
    Delivery,
    EndOfInput,
    EndpointSettings,
    NotConnected,
    Settle,
    StreamPending,
)
from gateway.ports.inbox import Inbox, InboxCounts
from gateway.record import NativeMessage


class _FrontierHook:
    """The settle hook of one delivery under AckPolicy.ALL (`_ack_all_settler`): an
    object rather than a closure, so that a settled run of them is acked in one call to
    the consumer (`bulk`, `ports.ack_all`)."""

    __slots__ = ("acks", "consumer", "msg", "slot")

    def __init__(self, consumer: NatsConsumer, msg: Msg, acks: AckFrontier[Msg],
                 slot: AckSlot[Msg]) -> None:
        self.consumer = consumer
        self.msg = msg
        self.acks = acks
        self.slot = slot

    @property
    def bulk(self) -> NatsConsumer:
        return self.consumer

    # The consumer's private parts are this module's: the hook is the consumer's own.
    async def __call__(self, ack: bool, reason: str, retry: bool) -> None:
        consumer = self.consumer
        consumer._inbox.settled()
        if not ack and retry:
            await consumer._nak(self.msg)
        elif self.acks.settle(self.slot):
            consumer._ack_soon(self.acks)


class NatsConsumer(InboxCounts):
    """Core subscriptions (`subjects`) or a JetStream durable push consumer (`stream`)."""

    def __init__(self, settings: EndpointSettings) -> None:
        self._settings = settings
        self._opts = opts = NatsOptions.parse(settings)
        self.jetstream = opts.stream is not None
        # Shadow mode on JetStream: an ephemeral consumer with ack policy none; nothing
        # is acknowledged (or nacked) to the server.
        self.ephemeral = self.jetstream and opts.observe
        if opts.jetstream and not self.jetstream:
            raise ValueError("stream: a JetStream consumer needs the stream to consume")
        if not self.jetstream and not opts.subjects:
            raise ValueError("subjects: a core consumer needs at least one subject")
        self.durable = opts.durable or (
            "xrgw-"
            + hashlib.sha256(
                "\n".join((opts.stream or "", *sorted(opts.subjects))).encode()
            ).hexdigest()[:16]
        )
        self._client: Client | None = None
        self._parse_bodies = True  # False once the route may never read them
        self._subs: list[Subscription] = []
        self._inbox: Inbox[Msg] = Inbox(self._opts.max_in_flight)
        self._space = asyncio.Event()  # the buffer has room again
        self._dropped = 0
        self._dropping = False
        # AckPolicy.ALL durables: which message's +ACK covers the settled prefix.
        self._acks: AckFrontier[Msg] | None = None
        self._ack_scheduled = False
        self._ack_tasks: set[asyncio.Task[None]] = set()

    @property
    def connected(self) -> bool:
        return self._client is not None and self._client.is_connected

    @property
    def dropped(self) -> int:
        """Messages nats-py dropped because its pending limits were reached (core)."""
        return self._dropped

    async def connect(self) -> None:
        if self._inbox.closed:
            raise EndOfInput("consumer closed")
        client = self._client
        if client is not None and not client.is_closed:
            await await_reconnect(client, self._opts.connect_timeout)
            return
        await self._drop_client()
        client = await open_client(self._settings, self._opts, self._on_error, self._on_change)
        self._client = client
        try:
            if self.jetstream:
                await self._subscribe_jetstream(client)
            else:
                await self._subscribe_core(client)
        except (nats.errors.Error, TimeoutError) as exc:
            await self._drop_client()
            raise NotConnected(f"cannot subscribe: {exc!r}") from exc
        self._inbox.wake()

    async def read_batch(self, limit: int) -> list[Delivery]:
        # While nats-py reconnects the subscriptions come back by themselves: wait.
        return await self._inbox.read_batch(
            limit, self._take, lambda: self._client is not None and not self._client.is_closed)

    async def aclose(self) -> None:
        self._inbox.close()
        if self.jetstream and not self.ephemeral:
            # Buffered but never handed out: ask for redelivery now, not after ack_wait.
            for msg in self._inbox.buffer:
                with contextlib.suppress(Exception):
                    await msg.nak()
        self._inbox.buffer.clear()
        await self._drop_client()

    async def backlog(self) -> list[StreamPending]:
        stream = self._opts.stream
        if stream is None or self.ephemeral:
            return []  # core NATS keeps nothing for a subscriber; an observer owes nothing
        client = self._client
        if client is None or not client.is_connected:
            raise NotConnected("not connected")
        info = await client.jetstream(timeout=self._opts.connect_timeout).consumer_info(
            stream, self.durable)
        waiting = (info.num_pending or 0) + (info.num_ack_pending or 0)
        return [StreamPending(stream, self.durable, waiting)]

    # -- internals ---------------------------------------------------------------------
    async def _subscribe_core(self, client: Client) -> None:
        for subject in self._opts.subjects:
            sub = await client.subscribe(
                subject,
                queue=self._opts.queuegroup or "",
                cb=self._on_message,
                pending_msgs_limit=self._opts.pending_msgs_limit,
                pending_bytes_limit=self._opts.pending_bytes_limit,
            )
            self._subs.append(sub)
        # One round trip so that the subscriptions are in place when connect() returns.
        await client.flush(timeout=max(1, round(self._opts.connect_timeout)))

    async def _subscribe_jetstream(self, client: Client) -> None:
        opts = self._opts
        assert opts.stream is not None
        js = client.jetstream(timeout=opts.connect_timeout)
        if self.ephemeral:
            await self._subscribe_ephemeral(client, js)
            return
        try:
            info = await js.consumer_info(opts.stream, self.durable)
        except nats.js.errors.NotFoundError:
            info = await js.add_consumer(opts.stream, config=self._consumer_config(client))
            self._check_filter(info)
        config = info.config
        if not config.deliver_subject:
            raise nats.errors.Error(f"durable {self.durable!r} is a pull consumer")
        if config.max_ack_pending != opts.max_in_flight:
            log.warning(
                "NATS durable %r has max_ack_pending=%s, not max_in_flight=%s",
                self.durable,
                config.max_ack_pending,
                opts.max_in_flight,
            )
        # The durable's own policy decides (one made by an older xrgw acks explicitly).
        ack_all = config.ack_policy == AckPolicy.ALL
        if ack_all and opts.queuegroup:
            raise nats.errors.Error(
                f"durable {self.durable!r} acknowledges with ack policy all, which a queue "
                "group cannot share (one member's ack would cover another's messages): "
                "delete it to have it made again with explicit acks, or name another "
                "durable")
        self._acks = AckFrontier() if ack_all else None
        psub = await js.subscribe_bind(
            stream=opts.stream,
            config=config,
            consumer=info.name,
            cb=self._on_message,
            manual_ack=True,
            pending_msgs_limit=opts.pending_msgs_limit,
            pending_bytes_limit=opts.pending_bytes_limit,
        )
        self._subs.append(psub._sub)

    async def _subscribe_ephemeral(self, client: Client, js: Any) -> None:
        """Shadow mode: an ephemeral push consumer of the stream's new messages that
        acknowledges nothing; the server removes it when the gateway goes."""
        opts = self._opts
        assert opts.stream is not None
        subjects = list(opts.subjects)
        config = ConsumerConfig(
            deliver_subject=client.new_inbox(),
            ack_policy=AckPolicy.NONE,
            deliver_policy=DeliverPolicy.NEW,
            filter_subject=subjects[0] if len(subjects) == 1 else None,
            filter_subjects=subjects if len(subjects) > 1 else None,
            inactive_threshold=60.0,
        )
        info = await js.add_consumer(opts.stream, config=config)
        self._check_filter(info)
        psub = await js.subscribe_bind(
            stream=opts.stream, config=info.config, consumer=info.name,
            cb=self._on_message, manual_ack=True,
            pending_msgs_limit=opts.pending_msgs_limit,
            pending_bytes_limit=opts.pending_bytes_limit)
        self._subs.append(psub._sub)

    def _consumer_config(self, client: Client) -> ConsumerConfig:
        opts = self._opts
        subjects = list(opts.subjects)
        return ConsumerConfig(
            durable_name=self.durable,
            deliver_subject=client.new_inbox(),
            deliver_group=opts.queuegroup or None,
            # One +ACK per settled burst (adapters/nats/acks.py). A queue group shares
            # the durable: one member's ack would cover what another still holds.
            ack_policy=AckPolicy.EXPLICIT if opts.queuegroup else AckPolicy.ALL,
            max_ack_pending=opts.max_in_flight,
            ack_wait=opts.ack_wait,
            filter_subject=subjects[0] if len(subjects) == 1 else None,
            filter_subjects=subjects if len(subjects) > 1 else None,
        )

    def _check_filter(self, info: ConsumerInfo) -> None:
        # A server before 2.10 ignores filter_subjects and would deliver the whole stream.
        if len(self._opts.subjects) > 1 and not info.config.filter_subjects:
            raise nats.errors.Error("several subjects need nats-server 2.10+ (filter_subjects)")

    def _take(self, count: int) -> list[Delivery]:
        """The next `count` buffered messages as deliveries, without awaiting anything."""
        buffer = self._inbox.buffer
        msgs = [buffer.popleft() for _ in range(count)]
        self._space.set()
        received_at = now()  # one clock read per batch: they arrived together
        jetstream = self.jetstream
        parse = self._parse_bodies
        acks = self._acks
        if acks is not None:
            out = []
            for msg in msgs:
                ack = jetstream_ack(msg.reply)  # read once: the record's and the ack's
                out.append(Delivery(to_record(msg, True, received_at, ack, parse),
                                    self._ack_all_settler(msg, ack, acks)))
            return out
        return [
            Delivery(to_record(msg, jetstream, received_at, None, parse), self._settler(msg),
                     None if jetstream or not msg.reply else self._answerer(msg.reply))
            for msg in msgs
        ]

    def defer_bodies(self) -> None:
        """Bodies parsed when first read (`ports.defer_bodies`)."""
        self._parse_bodies = False

    def _answerer(self, reply_to: str) -> Answer:
        """Request-reply: publish the answer to the request's reply subject. No answer ->
        nothing is sent: the requester's own timeout tells it (NATS has no status to
        send for "the service did not answer")."""
        async def answer(reply: NativeMessage | None, why: str) -> None:
            client = self._client
            if reply is None or client is None:
                return
            args = to_publish(reply.replace_fields({**reply.fields, "subject": reply_to}))
            await client.publish(args.subject, args.payload, headers=args.headers)

        return answer

    def _settler(self, msg: Msg) -> Settle:
        async def settle(ack: bool, reason: str, retry: bool) -> None:
            self._inbox.settled()
            if not self.jetstream or self.ephemeral:
                return  # core NATS / an observer: nothing to tell the server
            try:
                if ack:
                    await msg.ack()
                elif retry:
                    await msg.nak(delay=self._opts.nak_delay or None)
                else:
                    await msg.term()
            except nats.errors.Error as exc:
                # The server redelivers after ack_wait: at-least-once still holds.
                log.debug("NATS settlement not sent (%r); redelivery after ack_wait", exc)

        return settle

    def _ack_all_settler(self, msg: Msg, ack: JetStreamAck | None,
                         acks: AckFrontier[Msg]) -> Settle:
        """Settlement under AckPolicy.ALL: an ack (or a dead-lettered message) only moves
        the frontier; the +ACK goes once the settling burst yields. A retry is a -NAK of
        this message, which keeps its place until its redelivery settles."""
        if ack is None:
            return self._settler(msg)  # no position to order by: settle it on its own
        return _FrontierHook(self, msg, acks, acks.track(ack.sequence, ack.delivery, msg))

    def ack_bulk(self, hooks: Sequence[_FrontierHook]) -> None:
        """Ack each of `hooks` as its own ack would, in order (`ports.BulkAcker`): the
        frontier moves per message, the window and the +ACK once for the run."""
        self._inbox.settled(len(hooks))
        ready: AckFrontier[Msg] | None = None
        for hook in hooks:
            if hook.acks.settle(hook.slot):
                ready = hook.acks
        if ready is not None:
            self._ack_soon(ready)

    def _ack_soon(self, acks: AckFrontier[Msg]) -> None:
        """Send the frontier's +ACK once the settling burst yields (once per burst)."""
        if not self._ack_scheduled:
            self._ack_scheduled = True
            asyncio.get_running_loop().call_soon(self._send_ack, acks)

    def _send_ack(self, acks: AckFrontier[Msg]) -> None:
        self._ack_scheduled = False
        msg = acks.take()
        if msg is None or acks is not self._acks:
            return  # nothing new, or the connection went since
        task = asyncio.ensure_future(self._ack(msg))
        self._ack_tasks.add(task)
        task.add_done_callback(self._ack_tasks.discard)

    async def _ack(self, msg: Msg) -> None:
        try:
            await msg.ack()
        except nats.errors.Error as exc:
            # The server redelivers after ack_wait: at-least-once still holds.
            log.debug("NATS ack not sent (%r); redelivery after ack_wait", exc)

    async def _nak(self, msg: Msg) -> None:
        try:
            await msg.nak(delay=self._opts.nak_delay or None)
        except nats.errors.Error as exc:
            log.debug("NATS nak not sent (%r); redelivery after ack_wait", exc)

    async def _on_message(self, msg: Msg) -> None:
        # Runs in nats-py's per-subscription task: waiting here leaves the next messages
        # in nats-py's bounded pending queue (which drops when full, see `dropped`).
        inbox = self._inbox
        while inbox.full and not inbox.closed:
            self._space.clear()
            await self._space.wait()
        if inbox.closed:
            return
        if self._dropping:
            self._dropping = False
            log.warning(
                "NATS slow consumer episode over; %d messages dropped so far", self._dropped
            )
        inbox.put(msg)

    async def _on_error(self, exc: Exception) -> None:
        if isinstance(exc, nats.errors.SlowConsumerError):
            self._dropped += 1
            if not self._dropping:
                self._dropping = True
                log.warning("NATS slow consumer: dropping messages on %s", exc.subject)
            return
        log.debug("NATS client error", extra=fields(error=exc))

    async def _on_change(self) -> None:
        self._inbox.wake()

    async def _drop_client(self) -> None:
        client, self._client = self._client, None
        self._subs = []
        acks, self._acks = self._acks, None
        last = None
        if acks is not None:
            last = acks.take()  # settled, its +ACK not sent yet: send it before closing
            acks.forget()  # the server redelivers whatever else was not acknowledged
        self._space.set()  # release a callback waiting for room
        if client is not None:
            if last is not None:
                await self._ack(last)
            if self._ack_tasks:
                await asyncio.gather(*self._ack_tasks, return_exceptions=True)
            with contextlib.suppress(Exception):
                await client.flush(timeout=1)  # settlements still in nats-py's buffer
            with contextlib.suppress(Exception):
                await client.close()
        self._inbox.wake()
