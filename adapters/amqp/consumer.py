"""The AMQP 1.0 source: a receiver link on the proton thread, its messages handed over in
batches, each settled (accepted, released, modified, rejected) from the event loop.
See the package docstring for the contract.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from functools import partial
from typing import Literal

from proton import Condition, Event, Link, Message, Receiver
from proton import Delivery as ProtonDelivery
from proton.reactor import AtLeastOnce, LinkOption

from adapters.amqp.answers import AnswerSender
from adapters.amqp.link import LinkHandler, Note, describe, hint
from adapters.amqp.options import AmqpOptions
from adapters.amqp.proton_loop import ProtonThread
from adapters.amqp.record import to_record
from adapters.amqp.terminus import AutoDurability, apply_terminus
from adapters.amqp.wire import Decoded, decoded
from gateway.ports import Delivery, EndOfInput, EndpointSettings, NotConnected
from gateway.ports.inbox import Inbox, InboxCounts
from gateway.protocols import AMQP
from gateway.record import NativeMessage


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _decoded(note: Note, parse: bool = True) -> list[tuple[NativeMessage, str | None]]:
    """The records of a burst the proton thread handed over still encoded, each with why
    it could not be read (None: it could).

    Decoded here, on the event loop, not on the proton thread where they arrived: every
    attribute a record reads is a call into proton-c that gives the GIL up and must take
    it back, and while the event loop was busy converting the previous burst each such
    hand-back waited for it (the GIL changes hands every 5 ms at most), so the proton
    thread, and with it the route, ran at a fraction of its speed. The usual message is
    read straight from its sections (`wire.py`, no proton call at all); anything else as
    proton decodes it.

    Reading is meant to be total (proton decodes any bytes into some message, and
    `to_record` maps every value), but a message it fails on must not take its burst
    with it: the burst would be neither handed out nor settled, its credit gone, and the
    same message back at the next attach. Such a message is handed out as its bytes,
    undecodable: the route dead-letters it with the reason and goes on."""
    received_at = note.reason
    records: list[tuple[NativeMessage, str | None]] = []
    for encoded in note.encoded:
        try:
            msg: Message | Decoded | None = decoded(encoded)
            if msg is None:
                msg = Message()
                msg.decode(encoded)
            records.append((to_record(msg, received_at, parse), None))
        except Exception as exc:  # any failure is this message's alone
            why = f"the AMQP message cannot be read: {type(exc).__name__}: {exc}"
            records.append((NativeMessage(AMQP, {}, payload=bytes(encoded),
                                          received_at=received_at), why))
    return records


class _SourceTerminus(LinkOption):
    """The source's durability and expiry policy (`adapters/amqp/terminus.py`)."""

    def __init__(self, durability: str, expiry_policy: str, address: str) -> None:
        self._args = (durability, expiry_policy, address)

    def apply(self, link: Link) -> None:
        apply_terminus(link.source, *self._args)


class _ReceiverHandler(LinkHandler):
    def __init__(self, opts: AmqpOptions, node: str, durability: str) -> None:
        super().__init__(opts)
        self._node = node
        self._durability = durability
        self._receiver: Receiver | None = None
        self._ready = False
        self._next_token = 0
        self._unsettled: dict[int, ProtonDelivery] = {}
        # The messages of the current burst, handed over together by end_of_burst().
        self._burst: list[bytes] = []
        self._burst_first = 0
        self._burst_time = ""
        self._credit_due = 0  # settled, credit not yet returned (see settle_burst)

    def on_start(self, event: Event) -> None:
        super().on_start(event)
        assert self.connection is not None
        self._receiver = event.container.create_receiver(
            self.connection, source=self._node, options=[AtLeastOnce(), _SourceTerminus(
                self._durability, self.opts.expiry_policy, self._node)]
        )

    def on_link_opened(self, event: Event) -> None:
        link = event.receiver
        if self._ready or link is None:
            return
        if link.remote_source.address is None:
            return  # the broker refused the source; its detach with the error follows
        self._ready = True
        link.flow(self.opts.max_in_flight)
        self.post(Note("ready"))

    def on_link_error(self, event: Event) -> None:
        link = event.link
        self.lost(describe(link.remote_condition if link else None, "link error"))

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
        # Only the bytes here: decoding is for the event loop (see `_decoded`).
        encoded = receiver.recv(delivery.pending) or b""
        receiver.advance()
        if not self._burst:
            self._burst_first = self._next_token
            # One receive time per burst: its messages came in with one socket read.
            self._burst_time = _now()
        self._unsettled[self._next_token] = delivery
        self._next_token += 1
        self._burst.append(encoded)

    def end_of_burst(self) -> None:
        if self._burst and not self.closing:
            burst, self._burst = self._burst, []
            self.post(Note("messages", self._burst_first, encoded=burst,
                           reason=self._burst_time))

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
        thread: ProtonThread[Note],
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


class AmqpConsumer(InboxCounts):
    """Receives from `node` with credit-based flow control; settles only on ack/nack."""

    def __init__(self, settings: EndpointSettings) -> None:
        self._opts = AmqpOptions.parse(settings)
        if self._opts.node is None:
            raise ValueError("node: a consumer needs a source address")
        self._node: str = self._opts.node
        self._opts.warn_transient_queue()
        self._durability = AutoDurability(self._opts.terminus_durability)
        self._thread: ProtonThread[Note] | None = None
        self._settler: _Settler | None = None
        self._ready: asyncio.Future[None] | None = None
        self._connected = False
        # (token, (record, why it is undecodable or None)) of the current connection's
        # received, not yet handed out; credit bounds the buffer already, the window
        # guards the caller's side too
        self._inbox: Inbox[tuple[int, tuple[NativeMessage, str | None]]] = Inbox(
            self._opts.max_in_flight)
        # Request-reply: a message with a reply-to is answered there (reply.py).
        self._answers = AnswerSender(settings)
        self._parse_bodies = True  # False once the route may never read them

    @property
    def connected(self) -> bool:
        return self._connected

    async def connect(self) -> None:
        try:
            await self._attach()
        except NotConnected as exc:
            if not self._durability.refused(self._node, str(exc)):
                raise
            await self._attach()  # to the existing queue, as it is

    async def _attach(self) -> None:
        if self._inbox.closed:
            raise EndOfInput("consumer closed")
        await self._drop()
        handler = _ReceiverHandler(self._opts, self._node,
                                   self._durability.for_address(self._node))
        thread: ProtonThread[Note] = ProtonThread(
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
        self._inbox.wake()

    async def read_batch(self, limit: int) -> list[Delivery]:
        return await self._inbox.read_batch(limit, self._hand_out, lambda: self._connected)

    def defer_bodies(self) -> None:
        """`ports.DefersBodies`: from now on a data body is parsed only if something reads
        its value (a route whose outputs take it as its bytes never does)."""
        self._parse_bodies = False

    async def aclose(self) -> None:
        self._inbox.close()
        await self._drop()
        self._inbox.wake()
        await self._answers.aclose()

    # -- internals ---------------------------------------------------------------------
    def _hand_out(self, count: int) -> list[Delivery]:
        # The buffer only ever holds the current connection's messages (emptied on loss).
        assert self._settler is not None
        settle = self._settler.settle
        pop = self._inbox.buffer.popleft
        answerer = self._answers.answerer
        deliveries: list[Delivery] = []
        for _ in range(count):
            token, (record, undecodable) = pop()
            deliveries.append(Delivery(record, partial(settle, token),
                                       None if undecodable else answerer(record),
                                       undecodable=undecodable))
        return deliveries

    def _settled(self) -> None:
        self._inbox.settled()

    def _on_batch(self, thread: ProtonThread[Note], batch: list[Note]) -> None:
        if thread is not self._thread:
            return  # an old connection's last words
        for note in batch:
            if note.kind == "messages":
                self._inbox.buffer.extend(enumerate(_decoded(note, self._parse_bodies),
                                                    note.first))
            elif note.kind == "ready":
                if self._ready is not None and not self._ready.done():
                    self._ready.set_result(None)
            elif note.kind == "lost":
                self._lost(note.reason)
        self._inbox.wake()

    def _lost(self, why: str) -> None:
        self._connected = False
        # Unsettled messages of a lost link are requeued by the broker; handing out the
        # buffered ones would only create deliveries whose settlement cannot be sent.
        self._inbox.buffer.clear()
        if self._ready is not None and not self._ready.done():
            self._ready.set_exception(NotConnected(hint(why)))
            self._ready.exception()  # mark retrieved: nobody may be waiting

    async def _drop(self) -> None:
        thread, self._thread = self._thread, None
        self._connected = False
        self._inbox.buffer.clear()
        if self._settler is not None:
            # Settled just before the close (a drain): queued ahead of the shutdown, so
            # the dispositions still go out and these are not delivered again.
            self._settler.flush()
        if thread is not None:
            await thread.stop()
        self._inbox.wake()
