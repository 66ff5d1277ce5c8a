"""The NATS sink: core publishes or JetStream publishes confirmed by PubAcks
(`publish.py`); request-reply over an inbox.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import cast

import nats.errors
import nats.js.errors
from nats.aio.msg import Msg

from adapters.nats.client import Client
from adapters.nats.connection import await_reconnect, log, now, open_client, shown
from adapters.nats.options import NatsOptions
from adapters.nats.publish import Batch, PubAcks, publish_all
from adapters.nats.record import to_record
from gateway.cloudevents import with_extension
from gateway.observability.logs import fields
from gateway.ports import (
    CORRELATION_ATTRIBUTE,
    Confirmation,
    EndpointSettings,
    NotConnected,
    Opened,
    Outcome,
    ReplyTable,
    confirmed,
)
from gateway.ports.reconnect import ReconnectGate
from gateway.record import NativeMessage


class NatsProducer:
    """Publishes batches; a batch is delivered after one flush round trip (core) or when
    its PubAcks arrived (JetStream). `submit` returns once the batch is in nats-py's
    buffer, so the next batch follows on the wire while this one is being confirmed."""

    def __init__(self, settings: EndpointSettings) -> None:
        self._settings = settings
        self._opts = NatsOptions.parse(settings)
        self._client: Client | None = None
        self._pub_acks: PubAcks | None = None  # JetStream: the client's reply inbox
        self._gate = ReconnectGate(self._opts.reconnect_max)
        # Request-reply: answers come to `<inbox>.<token>` on one wildcard subscription.
        self.replies = ReplyTable()
        self._inbox: str | None = None
        #: The connection (`Client.connection`) that left a batch without a PONG; a new
        #: connection (nats-py's reconnect ends with a PING/PONG) or a confirmed batch
        #: clears it.
        self._unconfirmed: int | None = None

    @property
    def connected(self) -> bool:
        """Connected, and the server answered the last flush: a connection that takes
        writes but confirms nothing (a partition, a hung server) is not ready."""
        client = self._client
        return (client is not None and client.is_connected
                and self._unconfirmed != client.connection)

    @property
    def max_message_bytes(self) -> int | None:
        """The server's `max_payload` (from its INFO; headers count against it too)."""
        client = self._client
        return None if client is None else client.max_payload

    async def connect(self) -> None:
        await self._gate.connect(self._connect)

    async def _connect(self) -> None:
        client = self._client
        if client is not None and not client.is_closed:
            await await_reconnect(client, self._opts.connect_timeout)
            return
        await self._drop_client("connection closed")
        client = await open_client(self._settings, self._opts, self._on_error, _nothing)
        client.on_lost = self._connection_lost
        if self._opts.jetstream:
            try:
                self._pub_acks = await PubAcks.start(client)
            except (nats.errors.Error, TimeoutError) as exc:
                with contextlib.suppress(Exception):
                    await client.close()
                raise NotConnected(f"cannot subscribe to the PubAck inbox: {exc!r}") from exc
        self._client = client

    async def submit(self, messages: Sequence[NativeMessage]) -> Confirmation:
        client = await self._ready()
        if isinstance(client, str):
            return confirmed([Outcome.failed(client) for _ in messages])
        if self._opts.jetstream:
            acks = self._pub_acks
            assert acks is not None  # subscribed before the client was kept
            return await self._submit_jetstream(client, acks, messages)
        return await self._submit_core(client, messages)

    async def _ready(self) -> Client | str:
        """The connected client, or at once why there is none."""
        if self._client is None or self._client.is_closed:
            reason = await self._gate.try_reconnect(
                lambda: self._client is not None and not self._client.is_closed, self._connect
            )
            if reason is not None:
                return reason
        client = self._client
        assert client is not None
        if not client.is_connected:
            # nats-py would buffer and send later; the engine wants an answer now.
            return "not connected (nats-py is reconnecting)"
        return client

    async def _submit_core(
        self, client: Client, messages: Sequence[NativeMessage]
    ) -> Confirmation:
        connection = client.connection  # before queueing: the frames may go out at once
        outcomes = await publish_all(client, messages)
        if all(o is not None for o in outcomes):
            return confirmed(cast(list[Outcome], outcomes))
        # One PING for the whole batch, sent behind its publishes (see Client._send_ping).
        return asyncio.create_task(self._flushed(client, connection, outcomes))

    async def _flushed(self, client: Client, connection: int,
                       outcomes: list[Outcome | None]) -> list[Outcome]:
        """The batch's outcomes once the server confirmed it on the connection it was
        queued on; if that connection broke first, or the PONG did not come, the whole
        batch is retryable (sent again: at-least-once, duplicates at most a window)."""
        why = await client.confirm(connection, self._opts.publish_timeout)
        if why is None:
            if self._unconfirmed is not None:
                self._unconfirmed = None
                log.info("NATS server %s confirms publishes again",
                         ", ".join(shown(s) for s in self._opts.servers))
            if outcomes.count(None) == len(outcomes):  # nothing refused before sending
                return [Outcome.ok()] * len(outcomes)
            return [o if o is not None else Outcome.ok() for o in outcomes]
        if why.startswith("no PONG") and connection == client.connection:
            # A connection that holds a PING this long is as good as dead (a partition,
            # a hung server); nats-py would notice only after two idle PINGs two minutes
            # apart. Reconnecting fails every batch still waiting on it, at once.
            self._suspect(connection, why)
            with contextlib.suppress(Exception):
                await client.force_reconnect()
        failed = Outcome.failed(f"not confirmed by the server: {why}")
        return [o if o is not None else failed for o in outcomes]

    def _connection_lost(self) -> None:
        """What waits for an answer on the broken connection gets none: fail it now."""
        if self._pub_acks is not None:
            self._pub_acks.abandon("the connection broke before the PubAck")

    def _suspect(self, connection: int, why: str) -> None:
        """Not ready until reconnected or a batch is confirmed; logged once per episode."""
        if self._unconfirmed is None:
            log.warning("NATS server %s does not confirm publishes (%s); reconnecting",
                        ", ".join(shown(s) for s in self._opts.servers), why)
        self._unconfirmed = connection

    async def _submit_jetstream(
        self, client: Client, acks: PubAcks, messages: Sequence[NativeMessage]
    ) -> Confirmation:
        timeout = self._opts.publish_timeout
        if not await acks.room(timeout):
            return confirmed([Outcome.failed("too many PubAcks outstanding") for _ in messages])
        batch = Batch(acks, len(messages), asyncio.get_running_loop().time() + timeout)
        unsent = await publish_all(client, messages, batch.expect)
        for index, outcome in enumerate(unsent):
            if outcome is not None:
                batch.unsent(index, outcome)
        return asyncio.create_task(batch.confirmed())

    async def request(self, messages: Sequence[NativeMessage], timeout: float) -> Confirmation:
        """Core NATS request-reply: each message is published with a reply subject of
        the gateway's inbox whose last token correlates the answer; the Confirmation
        resolves when every answer came or `timeout` passed. A binary CloudEvent also
        carries the token as its `correlationid` extension. "No responders" (the server
        says no one subscribes) fails the message retryably."""
        client = await self._ready()
        if isinstance(client, str):
            return confirmed([Outcome.failed(client) for _ in messages])
        inbox = await self._reply_inbox(client)
        if inbox is None:
            return confirmed([Outcome.failed("cannot subscribe to the reply inbox")
                              for _ in messages])
        waiting = [self.replies.open() for _ in messages]
        tokens = [token for token, _ in waiting]
        # The same batched publish as `submit`, each with its token's reply subject.
        unsent = await publish_all(
            client, [with_extension(r, CORRELATION_ATTRIBUTE, t)
                     for r, t in zip(messages, tokens, strict=True)],
            lambda index: inbox + tokens[index])
        for token, outcome in zip(tokens, unsent, strict=True):
            if outcome is not None:
                self.replies.refuse(token, outcome)
        opened: list[Opened] = list(waiting)
        return asyncio.create_task(self.replies.collect(opened, timeout))

    async def _reply_inbox(self, client: Client) -> str | None:
        if self._inbox is None:
            inbox = f"_INBOX.xrgw.{client.new_inbox().rpartition('.')[2]}."
            try:
                await client.subscribe(inbox + "*", cb=self._on_answer)
            except (nats.errors.Error, TimeoutError):
                return None
            self._inbox = inbox
        return self._inbox

    async def _on_answer(self, msg: Msg) -> None:
        token = msg.subject.rpartition(".")[2]
        if msg.headers and msg.headers.get("Status") == "503" and not msg.data:
            self.replies.refuse(token, Outcome.failed("no responders"))
            return
        self.replies.resolve(token, to_record(msg, False, now()))

    async def _on_error(self, exc: Exception) -> None:
        log.debug("NATS client error", extra=fields(error=exc))

    async def _drop_client(self, reason: str) -> None:
        client, self._client = self._client, None
        if self._inbox is not None:
            self._inbox = None  # subscribed on the old connection
            self.replies.abandon(reason)
        acks, self._pub_acks = self._pub_acks, None
        if acks is not None:
            acks.abandon(reason)  # their PubAcks went to the old connection's inbox
        if client is not None:
            with contextlib.suppress(Exception):
                await client.close()

    async def aclose(self) -> None:
        await self._drop_client("producer closed")


async def _nothing() -> None:
    return None
