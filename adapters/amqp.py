"""AMQP 1.0 consumer and producer (python-qpid-proton on its own thread, bridged to asyncio).

Options: `adapters/_amqp_options.py` (one spec: names, xRegistry spellings, types,
defaults; rendered in docs/configuration.md).

The URI is `amqp://[user:password@]host[:port]` or, with TLS, `amqps://...[:5671]` (a
`tls` block also means TLS);
`EndpointSettings.username/password` win over the URI's. With credentials SASL PLAIN is
used, otherwise ANONYMOUS. TLS (see `adapters/_tls.py`): the server is verified against
`tls.ca_file` (default: the system CAs) and its host name; `tls.cert_file`/`key_file`
add a client certificate. A refused login fails `connect()` with
`amqp:unauthorized-access: ... (check the endpoint's username/password)`, a failed
handshake with `TLS: ...`. The password is never logged nor part of a repr.

Settlement (consumer). The receiver link is at-least-once (sender unsettled, receiver
settles first). `ack()` -> accepted; `nack(retry=True)` -> released (or
modified(delivery-failed), see `nack_outcome`), so the broker delivers it again;
`nack(retry=False)` -> rejected (the broker drops or dead-letters it). RabbitMQ 3.x
closes the session on a modified disposition ("Unrecognised state"), hence the default.
Deliveries not settled when the link goes (crash, close, connection loss) are requeued
by the broker. Deliveries of an older connection are stale:
settling them sends nothing, and they come again on the new one.

Back-pressure: the link is opened with `max_in_flight` credit and one credit is returned
per settled delivery, so the broker never sends more than `max_in_flight` messages the
gateway has not settled; `read()` waits while that many are unsettled.

Producer: one sender link per target address (`properties.to` of the record, else
`node`), opened on first use and kept. A message is delivered when the broker accepts it;
rejected -> failed, not retryable; released/modified -> failed, retryable; a refused link
(e.g. `amqp:not-found`) fails its messages, not retryable. Broker down: `write()` fails
fast with a retryable Outcome and reconnects at most once per backoff interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
import uuid
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast
from urllib.parse import unquote, urlsplit

from proton import Condition, Connection, Event, Link, Receiver, Sender, SSLDomain
from proton import Delivery as ProtonDelivery
from proton.reactor import AtLeastOnce

from adapters._amqp_options import OPTIONS
from adapters._amqp_record import to_message, to_record
from adapters._proton_loop import LoopHandler, ProtonThread
from adapters._reconnect import ReconnectGate
from adapters._schemes import check_scheme
from adapters._tls import client_context, wants_tls
from gateway.ports import (
    Confirmation,
    Delivery,
    EndOfInput,
    EndpointSettings,
    NotConnected,
    Outcome,
    Settle,
    TlsSettings,
    confirmed,
)
from gateway.protocols import AMQP, profile
from gateway.record import NativeMessage

__all__ = ["AmqpConsumer", "AmqpOptions", "AmqpProducer"]

_URIS = profile(AMQP).endpoint.uris

# Link refusals that say "this address will not work": retrying the message is useless.
_ADDRESS_ERRORS = frozenset(
    {"amqp:not-found", "amqp:unauthorized-access", "amqp:invalid-field", "amqp:not-allowed"}
)


@dataclass(frozen=True)
class AmqpOptions:
    url: str
    user: str | None
    password: str | None = field(repr=False)
    node: str | None
    max_in_flight: int
    nack_outcome: Literal["modified", "released"]
    durable: bool
    heartbeat: float
    connect_timeout: float
    publish_timeout: float
    reconnect_max: float
    tls: TlsSettings | None = None  # set: connect with TLS (amqps)

    @classmethod
    def parse(cls, settings: EndpointSettings) -> AmqpOptions:
        """Read the options (`adapters/_amqp_options.py`); raises ValueError naming the
        bad one."""
        url = urlsplit(settings.uri)
        check_scheme(url.scheme, _URIS)
        secure = wants_tls(url.scheme, _URIS, settings.tls)
        if secure:
            client_context(settings.tls)  # check the files here, not on the proton thread
        opts = OPTIONS.read(settings.options)
        node = cast(str | None, opts["node"])
        if node is not None and not node:
            raise ValueError("node: expected an address string, got ''")
        user = settings.username or (unquote(url.username) if url.username else None)
        password = settings.password or (unquote(url.password) if url.password else None)
        scheme, port = ("amqps", 5671) if secure else ("amqp", 5672)
        return cls(
            url=f"{scheme}://{url.hostname or '127.0.0.1'}:{url.port or port}",
            user=user,
            password=password,
            node=node,
            max_in_flight=cast(int, opts["max_in_flight"]),
            nack_outcome="modified" if opts["nack_outcome"] == "modified" else "released",
            durable=cast(bool, opts["durable"]),
            heartbeat=cast(float, opts["heartbeat"]),
            connect_timeout=cast(float, opts["connect_timeout"]),
            publish_timeout=cast(float, opts["publish_timeout"]),
            reconnect_max=cast(float, opts["reconnect_max"]),
            tls=(settings.tls or TlsSettings()) if secure else None,
        )

    def connect_kwargs(self) -> dict[str, Any]:
        """Container.connect() arguments (call on the proton thread: builds SSLDomain)."""
        kwargs: dict[str, Any] = {"url": self.url, "reconnect": False}
        if self.tls is not None:
            kwargs["ssl_domain"] = _ssl_domain(self.tls)
        if self.heartbeat > 0:
            kwargs["heartbeat"] = self.heartbeat
        if self.user:
            kwargs.update(user=self.user, password=self.password or "")
            kwargs.update(allowed_mechs="PLAIN", allow_insecure_mechs=True)
        else:
            kwargs["allowed_mechs"] = "ANONYMOUS"
        return kwargs


def _ssl_domain(tls: TlsSettings) -> SSLDomain:
    domain = SSLDomain(SSLDomain.MODE_CLIENT)
    if tls.ca_file:
        domain.set_trusted_ca_db(tls.ca_file)
    if tls.insecure:
        domain.set_peer_authentication(SSLDomain.ANONYMOUS_PEER)
    elif tls.ca_file:
        domain.set_peer_authentication(SSLDomain.VERIFY_PEER_NAME, tls.ca_file)
    else:
        domain.set_peer_authentication(SSLDomain.VERIFY_PEER_NAME)  # system CAs
    if tls.cert_file:
        domain.set_credentials(tls.cert_file, tls.key_file or tls.cert_file, None)
    return domain


def _hint(why: str) -> str:
    """An operator's next step for the usual refusals."""
    lowered = why.lower()
    if "unauthorized-access" in lowered or "authentication failed" in lowered:
        return f"{why} (check the endpoint's username/password)"
    if "ssl" in lowered or "tls" in lowered or "certificate" in lowered:
        return (f"TLS: {why} (check tls.ca_file for the server certificate, "
                "tls.cert_file/key_file for a client certificate)")
    return why


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _describe(condition: Condition | None, default: str) -> str:
    if condition is None:
        return default
    return (
        f"{condition.name}: {condition.description}"
        if condition.description
        else str(condition.name)
    )


@dataclass(frozen=True)
class _Note:
    """What the proton thread tells the asyncio side."""

    kind: Literal["ready", "lost", "message", "outcome"]
    token: int = 0
    record: NativeMessage | None = None
    outcome: Outcome | None = None
    reason: str = ""


class _Handler(LoopHandler[_Note]):
    """Connection-level behaviour shared by both directions (proton thread only)."""

    def __init__(self, opts: AmqpOptions) -> None:
        # prefetch=0: credit is ours to give (the back-pressure); settlement is ours too.
        super().__init__(prefetch=0, auto_accept=False, auto_settle=True)
        self.opts = opts
        self.connection: Connection | None = None
        self.closing = False

    def on_start(self, event: Event) -> None:
        self.connection = event.container.connect(**self.opts.connect_kwargs())

    def close_endpoints(self) -> None:
        self.closing = True
        if self.connection is not None:
            self.connection.close()

    def on_connection_closed(self, event: Event) -> None:
        self.lost("connection closed")

    def on_transport_error(self, event: Event) -> None:
        transport = event.transport
        self.lost(_describe(transport.condition if transport else None, "transport error"))

    def on_connection_error(self, event: Event) -> None:
        connection = event.connection
        self.lost(
            _describe(connection.remote_condition if connection else None, "connection error")
        )

    def on_session_error(self, event: Event) -> None:
        session = event.session
        self.lost(_describe(session.remote_condition if session else None, "session error"))

    def on_disconnected(self, event: Event) -> None:
        transport = event.transport
        self.lost(_describe(transport.condition if transport else None, "disconnected"))

    def crashed(self, exc: BaseException) -> None:
        if not self.closing:
            self.closing = True
            self.post(_Note("lost", reason=f"proton reactor failed: {exc!r}"))

    def lost(self, why: str) -> None:
        """The connection is over: tell asyncio once, then end the reactor."""
        if not self.closing:
            self.closing = True
            self.post(_Note("lost", reason=why))
        self.stop_container()


# ====================================================================== consumer


class _ReceiverHandler(_Handler):
    def __init__(self, opts: AmqpOptions, node: str) -> None:
        super().__init__(opts)
        self._node = node
        self._receiver: Receiver | None = None
        self._ready = False
        self._tokens = itertools.count()
        self._unsettled: dict[int, ProtonDelivery] = {}

    def on_start(self, event: Event) -> None:
        super().on_start(event)
        assert self.connection is not None
        self._receiver = event.container.create_receiver(
            self.connection, source=self._node, options=AtLeastOnce()
        )

    def on_link_opened(self, event: Event) -> None:
        link = event.receiver
        if self._ready or link is None:
            return
        if link.remote_source.address is None:
            return  # the broker refused the source; its detach with the error follows
        self._ready = True
        link.flow(self.opts.max_in_flight)
        self.post(_Note("ready"))

    def on_link_error(self, event: Event) -> None:
        link = event.link
        self.lost(_describe(link.remote_condition if link else None, "link error"))

    def on_link_closing(self, event: Event) -> None:
        self.lost("the broker detached the link")

    def on_message(self, event: Event) -> None:
        token = next(self._tokens)
        assert event.delivery is not None
        self._unsettled[token] = event.delivery
        self.post(_Note("message", token, to_record(event.message, received_at=_now())))

    def settle_token(self, token: int, state: int, reason: str) -> None:
        delivery = self._unsettled.pop(token, None)
        if delivery is None or self.closing:
            return
        if state == ProtonDelivery.MODIFIED:
            delivery.local.failed = True  # counts the attempt (delivery-count + 1)
        elif state == ProtonDelivery.REJECTED:
            delivery.local.condition = Condition("xrgw:rejected", reason or None)
        delivery.update(state)
        delivery.settle()
        if self._receiver is not None and self._receiver.state & Link.LOCAL_ACTIVE:
            self._receiver.flow(1)  # the settled one's credit goes back: the window slides


class AmqpConsumer:
    """Receives from `node` with credit-based flow control; settles only on ack/nack."""

    def __init__(self, settings: EndpointSettings) -> None:
        self._opts = AmqpOptions.parse(settings)
        if self._opts.node is None:
            raise ValueError("node: a consumer needs a source address")
        self._node: str = self._opts.node
        self._thread: ProtonThread[_Note] | None = None
        self._handler: _ReceiverHandler | None = None
        self._ready: asyncio.Future[None] | None = None
        self._connected = False
        self._buffer: deque[tuple[ProtonThread[_Note], _ReceiverHandler, int, NativeMessage]]
        self._buffer = deque()
        self._unsettled = 0
        self._changed = asyncio.Event()
        self._closed = False

    @property
    def connected(self) -> bool:
        return self._connected

    @property
    def unsettled(self) -> int:
        return self._unsettled

    async def connect(self) -> None:
        if self._closed:
            raise EndOfInput("consumer closed")
        await self._drop()
        handler = _ReceiverHandler(self._opts, self._node)
        thread: ProtonThread[_Note] = ProtonThread(
            handler, lambda batch: self._on_batch(thread, batch), "xrgw-amqp-consumer"
        )
        self._thread, self._handler = thread, handler
        self._ready = asyncio.get_running_loop().create_future()
        thread.start()
        try:
            async with asyncio.timeout(self._opts.connect_timeout):
                await self._ready
        except TimeoutError:
            await self._drop()
            raise NotConnected(f"no attach from {self._opts.url} in time") from None
        except NotConnected:
            await self._drop()
            raise
        self._connected = True
        self._changed.set()

    async def read_batch(self, limit: int) -> list[Delivery]:
        return [await self._read_one()]

    async def _read_one(self) -> Delivery:
        while True:
            if self._closed:
                raise EndOfInput("consumer closed")
            # Credit bounds the buffer already; the count guards the caller's side too.
            if self._unsettled < self._opts.max_in_flight and self._buffer:
                thread, handler, token, record = self._buffer.popleft()
                self._unsettled += 1
                return Delivery(record, self._settler(thread, handler, token))
            if not self._connected:
                raise NotConnected("not connected")
            self._changed.clear()
            await self._changed.wait()

    async def aclose(self) -> None:
        self._closed = True
        await self._drop()
        self._changed.set()

    # -- internals ---------------------------------------------------------------------
    def _settler(
        self, thread: ProtonThread[_Note], handler: _ReceiverHandler, token: int
    ) -> Settle:
        async def settle(ack: bool, reason: str, retry: bool) -> None:
            self._unsettled -= 1
            self._changed.set()
            if ack:
                state = ProtonDelivery.ACCEPTED
            elif not retry:
                state = ProtonDelivery.REJECTED
            elif self._opts.nack_outcome == "released":
                state = ProtonDelivery.RELEASED
            else:
                state = ProtonDelivery.MODIFIED
            # A stale thread ignores the call: the broker requeued the message already.
            thread.call(lambda: handler.settle_token(token, state, reason))

        return settle

    def _on_batch(self, thread: ProtonThread[_Note], batch: list[_Note]) -> None:
        if thread is not self._thread:
            return  # an old connection's last words
        for note in batch:
            if note.kind == "message" and note.record is not None:
                assert self._handler is not None
                self._buffer.append((thread, self._handler, note.token, note.record))
            elif note.kind == "ready":
                if self._ready is not None and not self._ready.done():
                    self._ready.set_result(None)
            elif note.kind == "lost":
                self._lost(note.reason)
        self._changed.set()

    def _lost(self, why: str) -> None:
        self._connected = False
        # Unsettled messages of a lost link are requeued by the broker; handing out the
        # buffered ones would only create deliveries whose settlement cannot be sent.
        self._buffer.clear()
        if self._ready is not None and not self._ready.done():
            self._ready.set_exception(NotConnected(_hint(why)))
            self._ready.exception()  # mark retrieved: nobody may be waiting

    async def _drop(self) -> None:
        thread, self._thread = self._thread, None
        self._connected = False
        self._buffer.clear()
        if thread is not None:
            await thread.stop()
        self._changed.set()


# ====================================================================== producer


class _SenderHandler(_Handler):
    def __init__(self, opts: AmqpOptions) -> None:
        super().__init__(opts)
        self._senders: dict[str, Sender] = {}
        # link name -> delivery tag -> token of the write waiting for the disposition
        self._pending: dict[str, dict[str | bytes, int]] = {}

    def on_connection_opened(self, event: Event) -> None:
        self.post(_Note("ready"))

    def send(self, items: list[tuple[int, NativeMessage]]) -> None:
        for token, record in items:
            if self.closing:
                self.post(_Note("outcome", token, outcome=Outcome.failed("connection closing")))
                continue
            try:
                msg = to_message(record, self.opts.durable)
            except ValueError as exc:
                self.post(_Note("outcome", token, outcome=Outcome.failed(str(exc), False)))
                continue
            address = msg.address or self.opts.node
            if not address:
                failed = Outcome.failed("record has no properties.to and no node is set", False)
                self.post(_Note("outcome", token, outcome=failed))
                continue
            sender = self._senders.get(address) or self._open_sender(address)
            delivery = msg.send(sender)  # (Sender.send's type also allows raw bytes)
            self._pending[sender.name][delivery.tag] = token

    def _open_sender(self, address: str) -> Sender:
        # A session of its own per address: RabbitMQ 3.x ends the whole session when it
        # refuses an attach, which would otherwise take the other addresses' links along.
        assert self.connection is not None
        session = self.connection.session()
        session.open()
        sender = session.sender(f"xrgw-{uuid.uuid4().hex[:12]}")
        sender.target.address = address
        AtLeastOnce().apply(sender)
        sender.open()
        self._senders[address] = sender
        self._pending[sender.name] = {}
        return sender

    def on_session_error(self, event: Event) -> None:
        session = event.session
        links = [s for s in self._senders.values() if session is not None and s.session == session]
        if not links:
            super().on_session_error(event)
            return
        condition = session.remote_condition if session is not None else None
        for link in links:
            self._link_failed(link, condition)

    def _link_failed(self, link: Link, condition: Condition | None) -> None:
        retryable = condition is None or str(condition.name) not in _ADDRESS_ERRORS
        self._drop_sender(link, _describe(condition, "link error"), retryable)

    def _resolve(self, event: Event, outcome: Outcome) -> None:
        link, delivery = event.link, event.delivery
        if link is None or delivery is None:
            return
        token = self._pending.get(link.name, {}).pop(delivery.tag, None)
        if token is not None:
            self.post(_Note("outcome", token, outcome=outcome))

    def on_accepted(self, event: Event) -> None:
        self._resolve(event, Outcome.ok())

    def on_rejected(self, event: Event) -> None:
        delivery = event.delivery
        why = _describe(delivery.remote.condition if delivery else None, "rejected")
        self._resolve(event, Outcome.failed(f"broker rejected: {why}", retryable=False))

    def on_released(self, event: Event) -> None:  # released or modified
        self._resolve(event, Outcome.failed("broker released the message", retryable=True))

    def on_link_error(self, event: Event) -> None:
        link = event.link
        if link is None:
            return
        self._link_failed(link, link.remote_condition)

    def on_link_closing(self, event: Event) -> None:
        if event.link is not None:
            self._drop_sender(event.link, "the broker detached the link", True)

    def _drop_sender(self, link: Link, why: str, retryable: bool) -> None:
        # Forget the link so the next message to that address attaches again.
        for address, sender in list(self._senders.items()):
            if sender.name == link.name:
                del self._senders[address]
                with contextlib.suppress(Exception):  # the session may be gone already
                    sender.session.close()
        for token in self._pending.pop(link.name, {}).values():
            self.post(_Note("outcome", token, outcome=Outcome.failed(why, retryable)))


class AmqpProducer:
    """Sends records and reports each as delivered only once the broker accepted it.

    When the connection is down, `write()` tries to reconnect, at most once per backoff
    interval (doubling up to `reconnect_max`); meanwhile it fails fast with a retryable
    Outcome instead of waiting.
    """

    def __init__(self, settings: EndpointSettings) -> None:
        self._opts = AmqpOptions.parse(settings)
        self._thread: ProtonThread[_Note] | None = None
        self._handler: _SenderHandler | None = None
        self._ready: asyncio.Future[None] | None = None
        self._connected = False
        self._pending: dict[int, asyncio.Future[Outcome]] = {}
        self._tokens = itertools.count()
        self._gate = ReconnectGate(self._opts.reconnect_max)

    @property
    def connected(self) -> bool:
        return self._connected

    async def connect(self) -> None:
        await self._gate.connect(self._connect)

    async def _connect(self) -> None:
        await self._drop("reconnecting")
        handler = _SenderHandler(self._opts)
        thread: ProtonThread[_Note] = ProtonThread(
            handler, lambda batch: self._on_batch(thread, batch), "xrgw-amqp-producer"
        )
        self._thread, self._handler = thread, handler
        self._ready = asyncio.get_running_loop().create_future()
        thread.start()
        try:
            async with asyncio.timeout(self._opts.connect_timeout):
                await self._ready
        except (TimeoutError, NotConnected) as exc:
            await self._drop("connect failed")
            if isinstance(exc, NotConnected):
                raise
            raise NotConnected(f"no open from {self._opts.url} in time") from None
        self._connected = True

    async def submit(self, messages: Sequence[NativeMessage]) -> Confirmation:
        return confirmed(await self._write(messages))

    async def _write(self, messages: Sequence[NativeMessage]) -> list[Outcome]:
        if not messages:
            return []
        if not self._connected:
            reason = await self._try_reconnect()
            if reason is not None:
                return [Outcome.failed(reason) for _ in messages]
        thread, handler = self._thread, self._handler
        assert thread is not None and handler is not None
        loop = asyncio.get_running_loop()
        items: list[tuple[int, NativeMessage]] = []
        futures: list[asyncio.Future[Outcome]] = []
        for record in messages:
            token = next(self._tokens)
            future: asyncio.Future[Outcome] = loop.create_future()
            self._pending[token] = future
            items.append((token, record))
            futures.append(future)
        thread.call(lambda: handler.send(items))
        await asyncio.wait(futures, timeout=self._opts.publish_timeout)
        outcomes: list[Outcome] = []
        for (token, _), future in zip(items, futures, strict=True):
            self._pending.pop(token, None)
            if future.done():
                outcomes.append(future.result())
            else:
                future.cancel()
                outcomes.append(Outcome.failed("no disposition from the broker in time"))
        return outcomes

    async def _try_reconnect(self) -> str | None:
        return await self._gate.try_reconnect(lambda: self._connected, self._connect)

    def _on_batch(self, thread: ProtonThread[_Note], batch: list[_Note]) -> None:
        if thread is not self._thread:
            return
        for note in batch:
            if note.kind == "outcome" and note.outcome is not None:
                future = self._pending.pop(note.token, None)
                if future is not None and not future.done():
                    future.set_result(note.outcome)
            elif note.kind == "ready":
                if self._ready is not None and not self._ready.done():
                    self._ready.set_result(None)
            elif note.kind == "lost":
                self._lost(note.reason)

    def _lost(self, why: str) -> None:
        self._connected = False
        if self._ready is not None and not self._ready.done():
            self._ready.set_exception(NotConnected(_hint(why)))
            self._ready.exception()  # mark retrieved: nobody may be waiting
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_result(Outcome.failed(f"connection lost: {why}"))

    async def _drop(self, why: str) -> None:
        thread, self._thread = self._thread, None
        self._lost(why)
        if thread is not None:
            with contextlib.suppress(Exception):
                await thread.stop()

    async def aclose(self) -> None:
        await self._drop("producer closed")
