"""Request-reply: a producer that sends a request and reports the answer it got back.

    Requester  request([NativeMessage, ...], timeout) -> Confirmation
               await Confirmation -> [Outcome(reply=answer) | Outcome.failed(...), ...]

A producer whose protocol can carry an answer (NATS request, MQTT 5 publish with a
response topic, HTTP egress call) implements `request` next to `submit`. Each message
waits for its own answer up to `timeout` seconds; none -> a failed, not retryable Outcome
whose reason starts with `NO_REPLY_PREFIX` (the service may have acted on the request:
sending it again could do it twice).

Answers that arrive on the producer's reply address (NATS inbox, MQTT response topic)
are matched to their request by a correlation token in a `ReplyTable`. An answer whose
token was given up on (timed out) is *late*; one without any token is *uncorrelated*.
Neither has a request to go to: the table reports both to its listener (the route counts
late ones and dead-letters uncorrelated ones with the reason).
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import Literal, Protocol, runtime_checkable

from gateway.cloudevents.bindings import decode
from gateway.cloudevents.errors import CloudEventError
from gateway.ports._adapter import Confirmation
from gateway.ports._outcome import Outcome
from gateway.record import NativeMessage

#: The CloudEvents extension attribute that carries the gateway's correlation token on a
#: request sent as a binary CloudEvent, and that an answer may carry back instead of the
#: protocol's own correlation (MQTT 5 correlation data, NATS reply subject).
CORRELATION_ATTRIBUTE = "correlationid"

#: The reason of a request that got no answer in time starts with this.
NO_REPLY_PREFIX = "no reply within"

#: What a `ReplyTable` tells its listener about an answer no request waits for.
Stray = Literal["late", "uncorrelated", "unknown"]
StrayListener = Callable[[Stray, NativeMessage], None]

#: Timed-out tokens remembered to tell a late answer from an unknown one; older ones are
#: forgotten (an answer for them then counts as unknown).
_REMEMBERED = 10_000


@runtime_checkable
class Requester(Protocol):
    """A producer that can also send requests and wait for their answers."""

    replies: ReplyTable

    async def request(self, messages: Sequence[NativeMessage], timeout: float
                      ) -> Confirmation: ...


def correlation_of(answer: NativeMessage) -> str | None:
    """The `correlationid` CloudEvents extension of an answer that is a CloudEvent
    carrying one (a service that copied the request's attributes), else None."""
    try:
        event = decode(answer)
    except CloudEventError:
        return None
    value = None if event is None else event.attributes.get(CORRELATION_ATTRIBUTE)
    return value if isinstance(value, str) and value else None


def no_reply(timeout: float) -> Outcome:
    return Outcome.failed(f"{NO_REPLY_PREFIX} {timeout:g} s", retryable=False)


#: One request of a batch: its token and the future of its answer, or the Outcome it
#: already has (it could not be sent).
Opened = tuple[str, "asyncio.Future[Outcome]"] | Outcome


class ReplyTable:
    """Requests waiting for their answer, by correlation token."""

    def __init__(self) -> None:
        self._prefix = uuid.uuid4().hex[:12]
        self._serial = itertools.count(1)
        self._waiting: dict[str, asyncio.Future[Outcome]] = {}
        self._expired: OrderedDict[str, None] = OrderedDict()
        self.listener: StrayListener | None = None
        self.late = 0  # answers that came after their request timed out (or unknown)
        self.uncorrelated = 0  # answers without a correlation token

    def __len__(self) -> int:
        return len(self._waiting)

    def issued(self, token: str) -> bool:
        """Whether `token` is one of this table's (waiting, timed out or forgotten): an
        answer with another token belongs to another requester sharing the reply address
        (gateway instances reading one Kafka reply topic), not a late one of ours."""
        return token.startswith(self._prefix)

    def open(self) -> tuple[str, asyncio.Future[Outcome]]:
        """A new token and the future its answer resolves."""
        token = f"{self._prefix}{next(self._serial)}"
        future: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        self._waiting[token] = future
        return token, future

    async def send(self, messages: Sequence[NativeMessage],
                   mark: Callable[[NativeMessage, str], NativeMessage],
                   submit: Callable[[Sequence[NativeMessage]], Awaitable[Confirmation]],
                   timeout: float) -> Confirmation:
        """Request-reply over a producer's own `submit`: each message marked as a request
        with a new token (`mark(record, token)`: the reply address and correlation), the
        batch submitted, and a Confirmation of the answers. A request the broker did not
        take fails with its own outcome, not with a timeout."""
        opened: list[Opened] = []
        requests: list[NativeMessage] = []
        for record in messages:
            token, future = self.open()
            opened.append((token, future))
            requests.append(mark(record, token))
        confirmation = await submit(requests)
        return asyncio.create_task(self._answers(confirmation, opened, timeout))

    async def _answers(self, confirmation: Confirmation, opened: list[Opened],
                       timeout: float) -> list[Outcome]:
        sent = await confirmation
        for item, outcome in zip(opened, sent, strict=True):
            if not outcome.delivered and not isinstance(item, Outcome):
                self.refuse(item[0], outcome)
        return await self.collect(opened, timeout)

    async def collect(self, opened: Sequence[Opened], timeout: float) -> list[Outcome]:
        """The outcome of each request of a batch (sent together: one deadline for all);
        `no_reply` for those unanswered after `timeout` seconds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        outcomes: list[Outcome] = []
        for item in opened:
            if isinstance(item, Outcome):
                outcomes.append(item)
                continue
            token, future = item
            try:
                outcomes.append(await asyncio.wait_for(future, max(0.0, deadline - loop.time())))
            except TimeoutError:
                self.give_up(token)
                outcomes.append(no_reply(timeout))
            finally:
                self._waiting.pop(token, None)
        return outcomes

    def give_up(self, token: str) -> None:
        """No answer is awaited on `token` any more; one that still comes is late."""
        if self._waiting.pop(token, None) is None:
            return
        self._expired[token] = None
        if len(self._expired) > _REMEMBERED:
            self._expired.popitem(last=False)

    def refuse(self, token: str, outcome: Outcome) -> None:
        """The request failed (not sent, no responders): its outcome, no answer."""
        future = self._waiting.pop(token, None)
        if future is not None and not future.done():
            future.set_result(outcome)

    def abandon(self, reason: str) -> None:
        """The reply address is gone (connection closed): every waiting request fails,
        retryably (the answer may never have been sent)."""
        for token in list(self._waiting):
            self.refuse(token, Outcome.failed(reason))

    def resolve(self, token: str | None, answer: NativeMessage) -> None:
        """An answer arrived carrying `token` (None or "": it carried none)."""
        future = self._waiting.pop(token, None) if token else None
        if future is not None:
            if not future.done():
                future.set_result(Outcome.answered(answer))
            return
        kind: Stray
        if not token:
            kind = "uncorrelated"
            self.uncorrelated += 1
        else:
            # Timed out, or unknown (another gateway's, or forgotten): dropped either way.
            kind = "late" if token in self._expired else "unknown"
            self.late += 1
        if self.listener is not None:
            self.listener(kind, answer)
