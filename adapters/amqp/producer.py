"""The AMQP 1.0 sink: a sender link on the proton thread; each submitted batch is sent
in order and confirmed by the broker's dispositions.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import uuid
from collections.abc import Sequence

from proton import Condition, Event, Link, Message, Receiver, Sender
from proton import Delivery as ProtonDelivery
from proton.reactor import AtLeastOnce

from adapters.amqp.link import LinkHandler, Note, describe, hint
from adapters.amqp.options import AmqpOptions
from adapters.amqp.proton_loop import ProtonThread
from adapters.amqp.record import to_message, to_record
from adapters.amqp.reply import requesting, token_of
from adapters.amqp.terminus import AutoDurability, apply_terminus
from gateway.ports import (
    Confirmation,
    EndpointSettings,
    NotConnected,
    Outcome,
    ReplyTable,
    confirmed,
)
from gateway.ports.pending import PendingBatch
from gateway.ports.reconnect import ReconnectGate
from gateway.record import NativeMessage

# Link refusals that say "this address will not work": retrying the message is useless.
_ADDRESS_ERRORS = frozenset(
    {"amqp:not-found", "amqp:unauthorized-access", "amqp:invalid-field", "amqp:not-allowed",
     "amqp:precondition-failed"}  # RabbitMQ: the queue exists with another durability
)


class _SenderHandler(LinkHandler):
    def __init__(self, opts: AmqpOptions, durability: AutoDurability) -> None:
        super().__init__(opts)
        self._durability = durability
        self._senders: dict[str, Sender] = {}
        # delivery tag -> (address, submit id, index) waiting for the disposition; the
        # tags are ours, unique across the links of the connection
        self._waiting: dict[str, tuple[str, int, int]] = {}
        self._tags = itertools.count()
        # (submit id, index, outcome) of this burst, handed over by end_of_burst()
        self._outcomes: list[tuple[int, int, Outcome]] = []
        # Request-reply: the receiver on the reply address, and the answers of this burst.
        self._replies: Receiver | None = None
        self._answers: list[NativeMessage] = []

    def listen(self, address: str) -> None:
        """Attach a receiver to the reply address (once per connection); the asyncio
        side hears `listening` when the broker answered the attach."""
        if self._replies is not None or self.closing or self.connection is None:
            return
        session = self.connection.session()
        session.open()
        receiver = session.receiver(f"xrgw-replies-{uuid.uuid4().hex[:12]}")
        receiver.source.address = address
        # A reply queue holds only answers to requests waiting now: nothing to keep over a
        # broker restart, so transient unless the endpoint says otherwise.
        durability = self.opts.terminus_durability
        apply_terminus(receiver.source, "none" if durability == "auto" else durability,
                       self.opts.expiry_policy, address)
        AtLeastOnce().apply(receiver)
        receiver.open()
        self._replies = receiver

    def on_link_opened(self, event: Event) -> None:
        link = event.link
        if link is None or not self._reply_link(link):
            return
        if link.remote_source.address is None:
            return  # refused: the detach with the error follows
        assert isinstance(link, Receiver)
        link.flow(self.opts.max_in_flight)
        self.post(Note("listening"))

    def _reply_name(self) -> str | None:
        return None if self._replies is None else self._replies.name

    def _reply_link(self, link: Link | None) -> bool:
        return link is not None and link.name == self._reply_name()

    def _stop_listening(self, why: str) -> None:
        receiver, self._replies = self._replies, None
        if receiver is not None:
            with contextlib.suppress(Exception):
                receiver.session.close()
        self.post(Note("listening", reason=why or "the reply receiver was detached"))

    def _answer(self, delivery: ProtonDelivery) -> None:
        """An answer on the reply receiver: read, accepted, its credit returned."""
        receiver = self._replies
        if receiver is None or delivery.partial:
            return
        msg = Message()
        msg.decode(receiver.recv(delivery.pending) or b"")
        receiver.advance()
        delivery.update(ProtonDelivery.ACCEPTED)
        delivery.settle()
        receiver.flow(1)
        self._answers.append(to_record(msg))

    def on_connection_opened(self, event: Event) -> None:
        self.post(Note("ready"))

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
            self.post(Note("outcomes", outcomes=outcomes))
        if self._answers:
            answers, self._answers = self._answers, []
            self.post(Note("answers", records=answers))

    def _open_sender(self, address: str) -> Sender:
        # A session of its own per address: RabbitMQ 3.x ends the whole session when it
        # refuses an attach, which would otherwise take the other addresses' links along.
        assert self.connection is not None
        session = self.connection.session()
        session.open()
        sender = session.sender(f"xrgw-{uuid.uuid4().hex[:12]}")
        sender.target.address = address
        apply_terminus(sender.target, self._durability.for_address(address),
                       self.opts.expiry_policy, address)
        AtLeastOnce().apply(sender)
        sender.open()
        self._senders[address] = sender
        return sender

    def on_session_error(self, event: Event) -> None:
        session = event.session
        if self._replies is not None and session is not None and (
                self._replies.session == session):
            condition = session.remote_condition
            self._stop_listening(hint(describe(condition, "session error")))
            return
        links = [s for s in self._senders.values() if session is not None and s.session == session]
        if not links:
            super().on_session_error(event)
            return
        condition = session.remote_condition if session is not None else None
        for link in links:
            self._link_failed(link, condition)

    def _link_failed(self, link: Link, condition: Condition | None) -> None:
        why = describe(condition, "link error")
        retryable = condition is None or str(condition.name) not in _ADDRESS_ERRORS
        address = link.target.address
        if address is not None and self._durability.refused(address, why):
            retryable = True  # the next attach takes the existing queue as it is
        self._drop_sender(link, hint(why), retryable)

    def on_delivery(self, event: Event) -> None:
        delivery = event.delivery
        if delivery is not None and self._reply_link(delivery.link):
            self._answer(delivery)
            return
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
        if self._reply_link(link):
            self._stop_listening(hint(describe(link.remote_condition, "link error")))
            return
        self._link_failed(link, link.remote_condition)

    def on_link_closing(self, event: Event) -> None:
        if self._reply_link(event.link):
            self._stop_listening("the broker detached the reply receiver")
            return
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
        why = describe(delivery.remote.condition, "rejected")
        return Outcome.failed(f"broker rejected: {why}", retryable=False)
    if state in (ProtonDelivery.RELEASED, ProtonDelivery.MODIFIED):
        return Outcome.failed("broker released the message", retryable=True)
    return None

_NO_DISPOSITION = Outcome.failed("no disposition from the broker in time")


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
        # Kept over reconnects: a queue found transient stays known as such.
        self._durability = AutoDurability(self._opts.terminus_durability)
        self._thread: ProtonThread[Note] | None = None
        self._handler: _SenderHandler | None = None
        self._ready: asyncio.Future[None] | None = None
        self._connected = False
        self._submitted: dict[int, PendingBatch] = {}
        self._submit_ids = itertools.count()
        self._gate = ReconnectGate(self._opts.reconnect_max)
        # Request-reply: answers come to `reply_address` (reply.py), correlated by their
        # correlation-id; `_listening` is the attach of its receiver on this connection
        # (its result: None when attached, else why not).
        self.replies = ReplyTable()
        self._listening: asyncio.Future[str | None] | None = None

    @property
    def connected(self) -> bool:
        return self._connected

    async def connect(self) -> None:
        await self._gate.connect(self._connect)

    async def _connect(self) -> None:
        await self._drop("reconnecting")
        handler = _SenderHandler(self._opts, self._durability)
        thread: ProtonThread[Note] = ProtonThread(
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
        submitted = PendingBatch(len(messages), _NO_DISPOSITION,
                                 loop.time() + self._opts.publish_timeout)
        # Forgotten once confirmed, whether all dispositions came or the deadline passed.
        submitted.future.add_done_callback(lambda _: self._submitted.pop(submit_id, None))
        self._submitted[submit_id] = submitted
        records = list(messages)  # the caller may reuse its sequence
        thread.call(lambda: handler.send(submit_id, records))
        return submitted.future

    async def request(self, messages: Sequence[NativeMessage], timeout: float) -> Confirmation:
        """AMQP request-reply: each message is sent with `reply-to` = `reply_address` and
        a correlation token as `correlation-id` (a binary CloudEvent also as its
        `correlationid` extension); the Confirmation resolves when every answer came or
        `timeout` passed. A message the broker did not accept fails as on `submit`."""
        address = self._opts.reply_address
        if not address:
            return confirmed([Outcome.failed("request-reply needs the endpoint's "
                                             "reply_address", retryable=False)
                              for _ in messages])
        why = await self._listen(address)
        if why is not None:
            return confirmed([Outcome.failed(why) for _ in messages])
        return await self.replies.send(
            messages, lambda record, token: requesting(record, address, token),
            self.submit, timeout)

    async def _listen(self, address: str) -> str | None:
        """Receive from the reply address on this connection; None once attached, else
        why not (the requests then fail, retryably)."""
        if not self._connected:
            reason = await self._try_reconnect()
            if reason is not None:
                return reason
        thread, handler = self._thread, self._handler
        assert thread is not None and handler is not None
        if self._listening is None:
            self._listening = asyncio.get_running_loop().create_future()
            thread.call(lambda: handler.listen(address))
        listening = self._listening
        try:
            async with asyncio.timeout(self._opts.connect_timeout):
                why = await asyncio.shield(listening)
        except TimeoutError:
            why = f"no attach of the reply receiver on {address} from the broker in time"
        if why is not None and self._listening is listening:
            self._listening = None  # the next request tries again
        return why

    def _listened(self, why: str) -> None:
        listening = self._listening
        if listening is not None and not listening.done():
            listening.set_result(why or None)
        elif why:
            # Attached before, gone now: the next request attaches again. Answers already
            # in the queue are received then; requests waiting meanwhile may time out.
            self._listening = None

    def _answered(self, records: Sequence[NativeMessage]) -> None:
        for record in records:
            self.replies.resolve(token_of(record), record)

    async def _try_reconnect(self) -> str | None:
        return await self._gate.try_reconnect(lambda: self._connected, self._connect)

    def _on_batch(self, thread: ProtonThread[Note], batch: list[Note]) -> None:
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
            elif note.kind == "answers":
                self._answered(note.records)
            elif note.kind == "listening":
                self._listened(note.reason)

    def _resolve(self, outcomes: Sequence[tuple[int, int, Outcome]]) -> None:
        for submit_id, index, outcome in outcomes:
            submitted = self._submitted.get(submit_id)
            if submitted is not None:
                submitted.resolve(index, outcome)

    def _lost(self, why: str) -> None:
        self._connected = False
        listening, self._listening = self._listening, None
        if listening is not None and not listening.done():
            listening.set_result(f"connection lost: {why}")
        if self._ready is not None and not self._ready.done():
            self._ready.set_exception(NotConnected(hint(why)))
            self._ready.exception()  # mark retrieved: nobody may be waiting
        submitted, self._submitted = self._submitted, {}
        lost = Outcome.failed(f"connection lost: {why}")
        for waiting in submitted.values():
            waiting.give_up(lost)

    async def _drop(self, why: str) -> None:
        thread, self._thread = self._thread, None
        self._lost(why)
        if thread is not None:
            with contextlib.suppress(Exception):
                await thread.stop()

    async def aclose(self) -> None:
        await self._drop("producer closed")
        self.replies.abandon("producer closed")
