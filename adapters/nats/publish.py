"""Publishing a batch to NATS: writing it in order, and matching JetStream PubAcks to the
messages they confirm (a batch's outcomes by index, its deadline).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence

import nats.errors
import nats.js.errors
from nats.aio.msg import Msg

from adapters.nats.client import Client
from adapters.nats.record import publish_frame, to_publish, written_frame
from gateway.ports import Outcome
from gateway.ports.pending import PendingBatch
from gateway.record import NativeMessage

#: JetStream publishes awaiting their PubAck, per producer; `submit` waits (up to
#: `publish_timeout`) for room beyond that. The engine's own window usually binds first;
#: this keeps a runaway caller from growing the reply table without bound.
_MAX_UNACKED = 16_384

_NO_PUBACK = Outcome.failed("no PubAck in time")


async def publish_all(
    client: Client,
    messages: Sequence[NativeMessage],
    reply_of: Callable[[int], str] | None = None,
) -> list[Outcome | None]:
    """Publish in order into nats-py's buffer (no awaiting the network unless that buffer
    is full): the failure of each message that was not sent, None for the sent ones.
    `reply_of(i)` is the reply subject of message i ("": the record's own); None: ""
    for every one (core NATS: no call per message)."""
    outcomes: list[Outcome | None] = [None] * len(messages)
    frames: list[bytes] = []
    sent: list[int] = []
    size = 0
    max_payload = client.max_payload
    for index, record in enumerate(messages):
        reply = "" if reply_of is None else reply_of(index)
        written = written_frame(record, reply)
        if written is not None and written[1] <= max_payload:
            frame, payload_size = written
        else:  # any other record, or one to refuse: the general way says why
            try:
                args = to_publish(record)
                payload_size = len(args.payload)
                if payload_size > max_payload:
                    outcomes[index] = Outcome.oversize(payload_size, max_payload,
                                                       "payload (server max_payload)")
                    continue
                frame = publish_frame(args, reply)
            except ValueError as exc:
                outcomes[index] = Outcome.failed(str(exc), retryable=False)
                continue
        if len(frame) > max_payload:
            # The server counts an HPUB's headers against max_payload too: the frame
            # less its protocol line and final CRLF (only measured when it could be over).
            total = len(frame) - frame.index(b"\r\n") - 4
            if total > max_payload:
                outcomes[index] = Outcome.oversize(total, max_payload,
                                                   "headers and payload (server max_payload)")
                continue
        frames.append(frame)
        sent.append(index)
        size += payload_size
    if frames:
        try:
            await client.send_frames(frames, size)
        except nats.errors.Error as exc:
            # The connection, not the messages: none of the batch was queued.
            outcome = _failure(exc)
            for index in sent:
                outcomes[index] = outcome
    return outcomes


class PubAcks:
    """The PubAcks of a client's JetStream publishes: one wildcard inbox subscription,
    a reply subject per message (`<inbox>.<n>`), answers routed to the message's batch.
    (nats-py's `publish_async` does the same, but with a future, a done callback and a
    wait_for task per message, and a new inbox per `jetstream()` context.)"""

    def __init__(self, prefix: str) -> None:
        self._prefix = prefix
        self._serial = 0
        self._waiting: dict[str, tuple[Batch, int]] = {}
        self._room = asyncio.Event()
        self._room.set()

    @classmethod
    async def start(cls, client: Client) -> PubAcks:
        acks = cls(client.new_inbox() + ".")
        await client.subscribe(acks._prefix + "*", cb=acks._on_reply)
        return acks

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    async def room(self, timeout: float) -> bool:
        """Wait until fewer than _MAX_UNACKED are waiting; False after `timeout`."""
        if len(self._waiting) < _MAX_UNACKED:
            return True
        try:
            async with asyncio.timeout(timeout):
                while len(self._waiting) >= _MAX_UNACKED:
                    self._room.clear()
                    await self._room.wait()
        except TimeoutError:
            return False
        return True

    def expect(self, batch: Batch, index: int) -> str:
        """A new reply subject whose answer settles message `index` of `batch`."""
        self._serial += 1
        reply = f"{self._prefix}{self._serial}"
        self._waiting[reply] = (batch, index)
        return reply

    def forget(self, reply: str) -> None:
        """No answer is awaited on `reply` any more (not sent, or timed out)."""
        if self._waiting.pop(reply, None) is not None and len(self._waiting) < _MAX_UNACKED:
            self._room.set()

    def abandon(self, reason: str) -> None:
        """Fail every publish still waiting: its answer can no longer arrive."""
        waiting, self._waiting = self._waiting, {}
        failed = Outcome.failed(reason)
        for batch, index in waiting.values():
            batch.settle(index, failed)
        self._room.set()

    async def _on_reply(self, msg: Msg) -> None:
        entry = self._waiting.pop(msg.subject, None)
        if entry is None:
            return  # its batch stopped waiting (timeout, closed)
        if len(self._waiting) < _MAX_UNACKED:
            self._room.set()
        batch, index = entry
        batch.settle(index, _pub_ack_outcome(msg))


class Batch:
    """One JetStream `submit`: its outcomes fill in as the PubAcks arrive (a
    `PendingBatch`, one timer per batch); `confirmed()` waits for the last one, or until
    the deadline, and stops expecting the PubAcks that did not come."""

    def __init__(self, acks: PubAcks, size: int, deadline: float) -> None:
        self._acks = acks
        self._pending = PendingBatch(size, _NO_PUBACK, deadline)
        self._replies: list[str] = [""] * size

    @property
    def outcomes(self) -> list[Outcome | None]:
        return self._pending.outcomes

    def expect(self, index: int) -> str:
        reply = self._replies[index] = self._acks.expect(self, index)
        return reply

    def unsent(self, index: int, outcome: Outcome) -> None:
        """Message `index` was not sent: no PubAck to wait for."""
        self._acks.forget(self._replies[index])
        self.settle(index, outcome)

    def settle(self, index: int, outcome: Outcome) -> None:
        self._pending.resolve(index, outcome)

    async def confirmed(self) -> list[Outcome]:
        outcomes = await self._pending.future
        for index, outcome in enumerate(self._pending.outcomes):
            if outcome is None:
                self._acks.forget(self._replies[index])
        return outcomes


#: JetStream's API error "message size exceeds maximum allowed" (JSStreamMessageExceedsMaximumErr).
_JS_MESSAGE_TOO_LARGE = 10054


def _pub_ack_outcome(msg: Msg) -> Outcome:
    """The answer of JetStream to one publish: a PubAck, an API error, or "no responders"
    (no stream takes the subject)."""
    if msg.headers and msg.headers.get("Status") == "503":
        return _failure(nats.js.errors.NoStreamResponseError())
    try:
        answer = json.loads(msg.data)
    except (ValueError, UnicodeDecodeError):
        return Outcome.failed(f"unreadable PubAck {msg.data[:80]!r}")
    error = answer.get("error") if isinstance(answer, dict) else None
    if isinstance(error, dict):
        code = error.get("code")
        code = code if isinstance(code, int) else 0
        if error.get("err_code") == _JS_MESSAGE_TOO_LARGE:
            return Outcome.refused_as_too_large(
                f"JetStream refused: {error.get('description')} (the stream's max_msg_size)")
        return Outcome.failed(
            f"JetStream refused: {error.get('description')} (code {code}, err_code "
            f"{error.get('err_code')})",
            retryable=code >= 500,
        )
    return Outcome.ok()


def _failure(exc: nats.errors.Error) -> Outcome:
    """A per-message publish error as an Outcome: a verdict on the message or the link."""
    if isinstance(exc, nats.js.errors.NoStreamResponseError):
        # No stream takes the subject -- or JetStream is still starting after a restart.
        return Outcome.failed("no JetStream stream answered for the subject")
    if isinstance(exc, nats.errors.MaxPayloadError):
        return Outcome.refused_as_too_large(f"refused: {exc!r}")
    permanent = (
        nats.errors.BadSubjectError,
        nats.errors.BadHeaderError,
    )
    if isinstance(exc, permanent):
        return Outcome.failed(f"refused: {exc!r}", retryable=False)
    return Outcome.failed(repr(exc))
