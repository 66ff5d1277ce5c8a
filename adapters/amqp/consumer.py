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

Batches. Everything crosses between proton's thread and asyncio in bursts, never one
message at a time (see `adapters/_proton_loop.py` for why): the messages of one socket
read reach `read_batch()` as one hand-over with one receive time; the settlements the
engine makes in one go travel back as one hand-over; a `submit()` is one hand-over, and
the dispositions of one socket read come back as one.

Settlement (consumer). The receiver link is at-least-once (sender unsettled, receiver
settles first). `ack()` -> accepted; `nack(retry=True)` -> released (or
modified(delivery-failed), see `nack_outcome`), so the broker delivers it again;
`nack(retry=False)` -> rejected (the broker drops or dead-letters it). RabbitMQ 3.x
closes the session on a modified disposition ("Unrecognised state"), hence the default.
`ack()`/`nack()` return at once: the dispositions gathered until the event loop's next
turn go to the proton thread together. Deliveries not settled when the link goes (crash,
close, connection loss) are requeued by the broker. Deliveries of an older connection
are stale: settling them sends nothing, and they come again on the new one.

Back-pressure: the link is opened with `max_in_flight` credit and the credit of settled
deliveries is returned (one flow per burst of settlements), so the broker never sends
more than `max_in_flight` messages the gateway has not settled; `read_batch()` hands out
at most that many unsettled deliveries and waits while they are all out.

Producer: one sender link per target address (`properties.to` of the record, else
`node`), opened on first use and kept. `submit()` sends pipelined and confirms later
(see `AmqpProducer`). A message is delivered when the broker accepts it; rejected ->
failed, not retryable; released/modified -> failed, retryable; a refused link (e.g.
`amqp:not-found`) fails its messages, not retryable; no disposition within
`publish_timeout` -> failed, retryable. Broker down: `submit()` fails fast with retryable
Outcomes and reconnects at most once per backoff interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal, cast
from urllib.parse import unquote, urlsplit

from proton import Condition, Connection, Event, Link, Message, Receiver, Sender, SSLDomain
from proton import Delivery as ProtonDelivery
from proton.handlers import EndpointStateHandler
from proton.reactor import AtLeastOnce, LinkOption

from adapters._amqp_options import OPTIONS
from adapters._amqp_record import to_message, to_record
from adapters._amqp_terminus import apply_terminus, transient_queue_warning
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
    TlsSettings,
    confirmed,
)
from gateway.ports.netaddr import is_loopback
from gateway.protocols import AMQP, profile
from gateway.record import NativeMessage

__all__ = ["AmqpConsumer", "AmqpOptions", "AmqpProducer"]

_URIS = profile(AMQP).endpoint.uris
log = logging.getLogger(__name__)

# Link refusals that say "this address will not work": retrying the message is useless.
_ADDRESS_ERRORS = frozenset(
    {"amqp:not-found", "amqp:unauthorized-access", "amqp:invalid-field", "amqp:not-allowed",
     "amqp:precondition-failed"}  # RabbitMQ: the queue exists with another durability
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
    terminus_durability: str = "auto"
    expiry_policy: str = "session-end"
    tls: TlsSettings | None = None  # set: connect with TLS (amqps)
    # SASL PLAIN may go over a connection without TLS (loopback, or allow_plain_without_tls)
    plain_in_clear: bool = False

    def warn_transient_queue(self) -> None:
        """One log line when the options make RabbitMQ 3.x declare a transient queue."""
        warning = transient_queue_warning(self.terminus_durability, self.node)
        if warning is not None:
            log.warning(warning)

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
        plain_in_clear = not secure and bool(user) and (
            bool(opts["allow_plain_without_tls"]) or is_loopback(url.hostname or ""))
        if user and not secure and not plain_in_clear:
            raise ValueError(
                f"SASL PLAIN over amqp:// would send the password to {url.hostname} in "
                "clear text: use amqps:// (or a tls block), or set the option "
                "allow_plain_without_tls: true")
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
            terminus_durability=cast(str, opts["terminus-durability"]),
            expiry_policy=cast(str, opts["expiry-policy"]),
            tls=(settings.tls or TlsSettings()) if secure else None,
            plain_in_clear=plain_in_clear,
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
            # Proton refuses PLAIN without TLS unless told: only where parse allowed it.
            kwargs.update(allowed_mechs="PLAIN", allow_insecure_mechs=self.plain_in_clear)
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
    if "precondition-failed" in lowered and "durable" in lowered:
        return (f"{why} (the queue exists with another durability: set the endpoint's "
                "terminus-durability to match it, configuration for a durable queue, none "
                "for a transient one; or address it as /amq/queue/<name>, which attaches "
                "to an existing queue without declaring it)")
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
    """What the proton thread tells the asyncio side: one note per burst, not per message."""

    kind: Literal["ready", "lost", "messages", "outcomes"]
    first: int = 0  # messages: the token of records[0]; the others follow, one apart
    records: Sequence[NativeMessage] = ()
    outcomes: Sequence[tuple[int, int, Outcome]] = ()  # (submit id, index, outcome)
    reason: str = ""


class _Handler(LoopHandler[_Note]):
    """Connection-level behaviour shared by both directions (proton thread only)."""

    def __init__(self, opts: AmqpOptions) -> None:
        # prefetch=0: credit is ours to give (the back-pressure); settlement is ours too.
        super().__init__(prefetch=0, auto_accept=False, auto_settle=True)
        # Deliveries are read and settled by on_delivery() of the subclasses, not by
        # proton's message handlers: those look the link up several times per message (a
        # new wrapper object each time), and every event passed through two more
        # handlers. Only the endpoint-state handler (opened/closing/error) stays.
        handlers = self.handlers
        assert isinstance(handlers, list)  # (MessagingHandler builds a list)
        self.handlers = [h for h in handlers if isinstance(h, EndpointStateHandler)]
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
            # What this burst learnt before the loss (dispositions) must not be reported
            # as lost: that would resend messages the broker has accepted.
            self.end_of_burst()
            self.closing = True
            self.post(_Note("lost", reason=why))
        self.stop_container()


# ====================================================================== consumer


class _SourceTerminus(LinkOption):
    """The source's durability and expiry policy (`adapters/_amqp_terminus.py`)."""

    def __init__(self, durability: str, expiry_policy: str, address: str) -> None:
        self._args = (durability, expiry_policy, address)

    def apply(self, link: Link) -> None:
        apply_terminus(link.source, *self._args)


class _ReceiverHandler(_Handler):
    def __init__(self, opts: AmqpOptions, node: str) -> None:
        super().__init__(opts)
        self._node = node
        self._receiver: Receiver | None = None
        self._ready = False
        self._next_token = 0
        self._unsettled: dict[int, ProtonDelivery] = {}
        # The messages of the current burst, handed over together by end_of_burst().
        self._burst: list[NativeMessage] = []
        self._burst_first = 0
        self._burst_time = ""
        self._credit_due = 0  # settled, credit not yet returned (see settle_burst)

    def on_start(self, event: Event) -> None:
        super().on_start(event)
        assert self.connection is not None
        self._receiver = event.container.create_receiver(
            self.connection, source=self._node, options=[AtLeastOnce(), _SourceTerminus(
                self.opts.terminus_durability, self.opts.expiry_policy, self._node)]
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

    def on_delivery(self, event: Event) -> None:
        delivery, receiver = event.delivery, self._receiver
        if delivery is None or receiver is None or self.closing:
            return
        if delivery.aborted:
            # The broker gave up sending it: nothing to read; its credit comes back.
            delivery.settle()
            receiver.flow(1)
            return
        if delivery.partial or not delivery.readable:
            return  # more frames of this message follow
        msg = Message()
        msg.decode(receiver.recv(delivery.pending) or b"")
        receiver.advance()
        if not self._burst:
            self._burst_first = self._next_token
            # One receive time per burst: its messages came in with one socket read.
            self._burst_time = _now()
        self._unsettled[self._next_token] = delivery
        self._next_token += 1
        self._burst.append(to_record(msg, received_at=self._burst_time))

    def end_of_burst(self) -> None:
        if self._burst and not self.closing:
            burst, self._burst = self._burst, []
            self.post(_Note("messages", self._burst_first, records=burst))

    def lost(self, why: str) -> None:
        # The broker requeues what it sent on this link: handing these out would only
        # create deliveries whose settlement can no longer be sent.
        self._burst = []
        super().lost(why)

    def settle_burst(self, settlements: list[tuple[int, int, str]]) -> None:
        """Send the dispositions of a burst of (token, state, reason) and return their
        credit with one flow."""
        if self.closing:
            return
        settled = 0
        for token, state, reason in settlements:
            delivery = self._unsettled.pop(token, None)
            if delivery is None:
                continue
            if state == ProtonDelivery.MODIFIED:
                delivery.local.failed = True  # counts the attempt (delivery-count + 1)
            elif state == ProtonDelivery.REJECTED:
                delivery.local.condition = Condition("xrgw:rejected", reason or None)
            delivery.update(state)
            delivery.settle()
            settled += 1
        if settled:
            # The settled ones' credit goes back -- but on a later turn of the reactor,
            # once the dispositions are on the wire: proton writes a flow ahead of the
            # dispositions of the same turn, so RabbitMQ would send the next window
            # before it has the acks of this one, and a crash in between redelivers both
            # (two windows of duplicates instead of one; issue 33's flake under load).
            first = not self._credit_due
            self._credit_due += settled
            if first and self.thread is not None:
                self.thread.call(self._return_credit)

    def _return_credit(self) -> None:
        due, self._credit_due = self._credit_due, 0
        receiver = self._receiver
        if due and not self.closing and receiver is not None and (
                receiver.state & Link.LOCAL_ACTIVE):
            receiver.flow(due)  # the window slides


class _Settler:
    """The settlements of one connection, handed to its proton thread once per burst.

    The engine settles a whole batch in one go (each `ack()` returns without waiting), so
    the dispositions gathered until the event loop's next turn travel together: one
    hand-over, one flow frame, instead of one thread hop per message.
    """

    def __init__(
        self,
        thread: ProtonThread[_Note],
        handler: _ReceiverHandler,
        nack_outcome: Literal["modified", "released"],
        settled: Callable[[], None],
    ) -> None:
        self._thread = thread
        self._handler = handler
        self._retry_state = (
            ProtonDelivery.RELEASED if nack_outcome == "released" else ProtonDelivery.MODIFIED
        )
        self._settled = settled
        self._queued: list[tuple[int, int, str]] = []
        self._loop = asyncio.get_running_loop()

    async def settle(self, token: int, ack: bool, reason: str, retry: bool) -> None:
        self._settled()
        if ack:
            state = ProtonDelivery.ACCEPTED
        elif not retry:
            state = ProtonDelivery.REJECTED
        else:
            state = self._retry_state
        if not self._queued:
            self._loop.call_soon(self.flush)
        self._queued.append((token, state, reason))

    def flush(self) -> None:
        """Hand what was settled so far to the proton thread."""
        if not self._queued:
            return
        settlements, self._queued = self._queued, []
        handler = self._handler
        # A stale thread ignores the call: the broker requeued those messages already.
        self._thread.call(lambda: handler.settle_burst(settlements))


class AmqpConsumer:
    """Receives from `node` with credit-based flow control; settles only on ack/nack."""

    def __init__(self, settings: EndpointSettings) -> None:
        self._opts = AmqpOptions.parse(settings)
        if self._opts.node is None:
            raise ValueError("node: a consumer needs a source address")
        self._node: str = self._opts.node
        self._opts.warn_transient_queue()
        self._thread: ProtonThread[_Note] | None = None
        self._settler: _Settler | None = None
        self._ready: asyncio.Future[None] | None = None
        self._connected = False
        # (token, record) of the current connection's received, not yet handed out
        self._buffer: deque[tuple[int, NativeMessage]] = deque()
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
        self._thread = thread
        self._settler = _Settler(thread, handler, self._opts.nack_outcome, self._settled)
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
        while True:
            if self._closed:
                raise EndOfInput("consumer closed")
            # Credit bounds the buffer already; the count guards the caller's side too.
            room = min(limit, self._opts.max_in_flight - self._unsettled)
            if room > 0 and self._buffer:
                return self._hand_out(min(room, len(self._buffer)))
            if not self._connected:
                raise NotConnected("not connected")
            self._changed.clear()
            await self._changed.wait()

    async def aclose(self) -> None:
        self._closed = True
        await self._drop()
        self._changed.set()

    # -- internals ---------------------------------------------------------------------
    def _hand_out(self, count: int) -> list[Delivery]:
        # The buffer only ever holds the current connection's messages (emptied on loss).
        assert self._settler is not None
        settle = self._settler.settle
        pop = self._buffer.popleft
        deliveries: list[Delivery] = []
        for _ in range(count):
            token, record = pop()
            deliveries.append(Delivery(record, partial(settle, token)))
        self._unsettled += count
        return deliveries

    def _settled(self) -> None:
        self._unsettled -= 1
        self._changed.set()

    def _on_batch(self, thread: ProtonThread[_Note], batch: list[_Note]) -> None:
        if thread is not self._thread:
            return  # an old connection's last words
        for note in batch:
            if note.kind == "messages":
                self._buffer.extend(enumerate(note.records, note.first))
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
        if self._settler is not None:
            # Settled just before the close (a drain): queued ahead of the shutdown, so
            # the dispositions still go out and these are not delivered again.
            self._settler.flush()
        if thread is not None:
            await thread.stop()
        self._changed.set()


# ====================================================================== producer


class _SenderHandler(_Handler):
    def __init__(self, opts: AmqpOptions) -> None:
        super().__init__(opts)
        self._senders: dict[str, Sender] = {}
        # delivery tag -> (address, submit id, index) waiting for the disposition; the
        # tags are ours, unique across the links of the connection
        self._waiting: dict[str, tuple[str, int, int]] = {}
        self._tags = itertools.count()
        # (submit id, index, outcome) of this burst, handed over by end_of_burst()
        self._outcomes: list[tuple[int, int, Outcome]] = []

    def on_connection_opened(self, event: Event) -> None:
        self.post(_Note("ready"))

    def send(self, submit_id: int, records: list[NativeMessage]) -> None:
        """Send a submit's records in order, without waiting for any disposition."""
        for index, record in enumerate(records):
            failed = self._send(submit_id, index, record)
            if failed is not None:
                self._outcomes.append((submit_id, index, failed))

    def _send(self, submit_id: int, index: int, record: NativeMessage) -> Outcome | None:
        """Put one record on its link; an Outcome when it cannot be sent at all."""
        if self.closing:
            return Outcome.failed("connection closing")
        try:
            msg = to_message(record, self.opts.durable)
        except ValueError as exc:
            return Outcome.failed(str(exc), False)
        address = msg.address or self.opts.node
        if not address:
            return Outcome.failed("record has no properties.to and no node is set", False)
        sender = self._senders.get(address) or self._open_sender(address)
        tag = str(next(self._tags))  # (a delivery's tag property reads it back as str)
        msg.send(sender, tag)
        self._waiting[tag] = (address, submit_id, index)
        return None

    def end_of_burst(self) -> None:
        if self._outcomes:
            outcomes, self._outcomes = self._outcomes, []
            self.post(_Note("outcomes", outcomes=outcomes))

    def _open_sender(self, address: str) -> Sender:
        # A session of its own per address: RabbitMQ 3.x ends the whole session when it
        # refuses an attach, which would otherwise take the other addresses' links along.
        assert self.connection is not None
        session = self.connection.session()
        session.open()
        sender = session.sender(f"xrgw-{uuid.uuid4().hex[:12]}")
        sender.target.address = address
        apply_terminus(sender.target, self.opts.terminus_durability, self.opts.expiry_policy,
                       address)
        AtLeastOnce().apply(sender)
        sender.open()
        self._senders[address] = sender
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
        self._drop_sender(link, _hint(_describe(condition, "link error")), retryable)

    def on_delivery(self, event: Event) -> None:
        delivery = event.delivery
        if delivery is None or not delivery.updated:
            return
        outcome = _outcome_of(delivery)
        if outcome is not None:
            waiting = self._waiting.pop(delivery.tag, None)
            if waiting is not None:
                self._outcomes.append((waiting[1], waiting[2], outcome))
        if delivery.settled:
            delivery.settle()  # the broker has forgotten it: so can we

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
                self._fail_waiting(address, Outcome.failed(why, retryable))

    def _fail_waiting(self, address: str, failed: Outcome) -> None:
        # A scan, but only when a link fails, never per message.
        for tag, (to, submit_id, index) in list(self._waiting.items()):
            if to == address:
                del self._waiting[tag]
                self._outcomes.append((submit_id, index, failed))


def _outcome_of(delivery: ProtonDelivery) -> Outcome | None:
    """The Outcome of a sent message's disposition; None while it is not terminal."""
    state = delivery.remote_state
    if state == ProtonDelivery.ACCEPTED:
        return Outcome.ok()
    if state == ProtonDelivery.REJECTED:
        why = _describe(delivery.remote.condition, "rejected")
        return Outcome.failed(f"broker rejected: {why}", retryable=False)
    if state in (ProtonDelivery.RELEASED, ProtonDelivery.MODIFIED):
        return Outcome.failed("broker released the message", retryable=True)
    return None


class _Submitted:
    """One submit's outcomes, filled in as the broker's dispositions arrive."""

    __slots__ = ("future", "missing", "outcomes", "timer")

    def __init__(self, size: int, future: asyncio.Future[list[Outcome]]) -> None:
        self.future = future
        self.outcomes: list[Outcome | None] = [None] * size
        self.missing = size
        self.timer: asyncio.TimerHandle | None = None

    def resolve(self, index: int, outcome: Outcome) -> bool:
        """Record one message's outcome (the first one counts); True once all are in."""
        if self.outcomes[index] is None:
            self.outcomes[index] = outcome
            self.missing -= 1
        return self.missing == 0

    def finish(self, rest: Outcome) -> None:
        """Confirm the submit, `rest` standing in for the outcomes that never came."""
        if self.timer is not None:
            self.timer.cancel()
        if not self.future.done():  # (the caller may have given up and cancelled it)
            self.future.set_result([rest if o is None else o for o in self.outcomes])


class AmqpProducer:
    """Sends records and reports each as delivered only once the broker accepted it.

    `submit()` hands the whole batch to the proton thread at once and returns; the
    messages go out pipelined (no waiting for one disposition before the next send), and
    the returned Confirmation resolves when every message has its disposition, or at
    `publish_timeout` after the submit with the missing ones failed (retryable). The
    proton thread keeps the order of the submits, and of the messages in each.

    When the connection is down, `submit()` tries to reconnect, at most once per backoff
    interval (doubling up to `reconnect_max`); meanwhile it fails fast with retryable
    Outcomes instead of waiting.
    """

    def __init__(self, settings: EndpointSettings) -> None:
        self._opts = AmqpOptions.parse(settings)
        self._opts.warn_transient_queue()
        self._thread: ProtonThread[_Note] | None = None
        self._handler: _SenderHandler | None = None
        self._ready: asyncio.Future[None] | None = None
        self._connected = False
        self._submitted: dict[int, _Submitted] = {}
        self._submit_ids = itertools.count()
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
        if not messages:
            return confirmed([])
        if not self._connected:
            reason = await self._try_reconnect()
            if reason is not None:
                return confirmed([Outcome.failed(reason)] * len(messages))
        thread, handler = self._thread, self._handler
        assert thread is not None and handler is not None
        loop = asyncio.get_running_loop()
        submit_id = next(self._submit_ids)
        submitted = _Submitted(len(messages), loop.create_future())
        submitted.timer = loop.call_later(self._opts.publish_timeout, self._expire, submit_id)
        self._submitted[submit_id] = submitted
        records = list(messages)  # the caller may reuse its sequence
        thread.call(lambda: handler.send(submit_id, records))
        return submitted.future

    async def _try_reconnect(self) -> str | None:
        return await self._gate.try_reconnect(lambda: self._connected, self._connect)

    def _expire(self, submit_id: int) -> None:
        submitted = self._submitted.pop(submit_id, None)
        if submitted is not None:
            submitted.finish(Outcome.failed("no disposition from the broker in time"))

    def _on_batch(self, thread: ProtonThread[_Note], batch: list[_Note]) -> None:
        if thread is not self._thread:
            return
        for note in batch:
            if note.kind == "outcomes":
                self._resolve(note.outcomes)
            elif note.kind == "ready":
                if self._ready is not None and not self._ready.done():
                    self._ready.set_result(None)
            elif note.kind == "lost":
                self._lost(note.reason)

    def _resolve(self, outcomes: Sequence[tuple[int, int, Outcome]]) -> None:
        for submit_id, index, outcome in outcomes:
            submitted = self._submitted.get(submit_id)
            if submitted is not None and submitted.resolve(index, outcome):
                del self._submitted[submit_id]
                submitted.finish(outcome)  # (nothing is missing: `rest` is not used)

    def _lost(self, why: str) -> None:
        self._connected = False
        if self._ready is not None and not self._ready.done():
            self._ready.set_exception(NotConnected(_hint(why)))
            self._ready.exception()  # mark retrieved: nobody may be waiting
        submitted, self._submitted = self._submitted, {}
        lost = Outcome.failed(f"connection lost: {why}")
        for waiting in submitted.values():
            waiting.finish(lost)

    async def _drop(self, why: str) -> None:
        thread, self._thread = self._thread, None
        self._lost(why)
        if thread is not None:
            with contextlib.suppress(Exception):
                await thread.stop()

    async def aclose(self) -> None:
        await self._drop("producer closed")
