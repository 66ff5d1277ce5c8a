"""Request-reply in a route (`routes[].reply: true`): carry an answer back to the sender.

    source ──request──► route ──Requester.request──► service
      ▲                                                  │
      └──── Delivery.answer(reply in the source's protocol) ◄── Outcome.reply

The route sends each request with `Requester.request` instead of `submit`; the producer
correlates the answer (NATS inbox subject, MQTT 5 correlation data, the HTTP response)
and reports it as `Outcome.reply`. Before the source message is settled, the answer is
translated into the source's protocol (`reply_record`) and handed to the delivery's
`answer` hook, which addresses it (HTTP response, NATS reply subject, MQTT 5 response
topic with the request's correlation data).

A CloudEvent answer (binary or structured in the service's protocol) is re-encoded as a
binary CloudEvent of the source's protocol: attributes and extensions, the correlation
included, survive the hop. Any other answer is passed as it came: its body and content
type.

At least once, and what a timeout does: a request that got no answer within
`reply_timeout` is *not* sent again -- the service may have acted on it, and its sender
has been told (HTTP 504) or has given up on its own deadline. It is dead-lettered with
reason `no-reply` (for inspection and replay) and the source message is acked. A failure
to *send* the request (broker down, NATS "no responders", HTTP 5xx) is retried as on
any route, then dead-lettered as `undeliverable`; the sender is then told no answer
came (HTTP 504).

`Replies` is the route's part for this: it hands each batch's answers back before the
settler settles the batch (`ledger.answers` decides what each sender gets), and takes
the answers no request waits for -- late ones counted, uncorrelated ones dead-lettered.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from gateway.cloudevents.bindings import decode, encode
from gateway.cloudevents.errors import CloudEventError
from gateway.json.values import JSON
from gateway.ports import (
    NO_REPLY_PREFIX,
    Delivery,
    Outcome,
    Requester,
    Stray,
    StrayListener,
)
from gateway.protocols import find_profile
from gateway.record import NativeMessage
from gateway.runtime.ledger import Batch, answers
from gateway.runtime.output import Output
from gateway.runtime.stats import RouteStats

log = logging.getLogger("xrgw.reply")

#: The route's default wait for an answer, in seconds.
DEFAULT_TIMEOUT = 5.0


def reply_record(answer: NativeMessage, protocol: str) -> NativeMessage:
    """`answer` (a record of the service's protocol) as a record of `protocol`, without an
    address: the delivery's answer hook adds it."""
    if answer.protocol == protocol:
        return answer
    try:
        event = decode(answer)
    except CloudEventError:
        event = None
    if event is not None:
        return encode(event, protocol, "binary")
    return native_reply(answer, protocol)


def native_reply(answer: NativeMessage, protocol: str) -> NativeMessage:
    """The answer's body and content type in a record of `protocol`."""
    fields: dict[str, JSON] = {}
    content_type = answer.content_type
    prof = find_profile(protocol)
    ref = None if prof is None else prof.content_type
    if content_type is not None and ref is not None:
        if ref.name is None:
            fields[ref.field] = content_type
        else:
            fields[ref.field] = [{"name": ref.name, "value": content_type}]
    return NativeMessage(protocol, fields, answer.data, answer.payload, None, answer.raw)


async def hand_back(delivery: Delivery, outcome: Outcome | None, why: str) -> str:
    """Give the sender of `delivery` its answer (or tell it none came); the result for
    the reply metric: `answered`, `no-reply`, `failed` or `not-awaited`."""
    answer = delivery.answer
    if answer is None:
        return "not-awaited"
    try:
        if outcome is not None and outcome.reply is not None:
            await answer(reply_record(outcome.reply, delivery.message.protocol), "")
            return "answered"
        await answer(None, why)
    except Exception as exc:  # an answer that cannot be sent must not stop settling
        log.warning("could not answer the sender: %s", exc)  # pragma: no mutate
        return "failed"
    return "no-reply" if why.startswith(NO_REPLY_PREFIX) else "failed"


def stray_listener(count_late: Callable[[], None],
                   dead_letter: Callable[[NativeMessage], None]) -> StrayListener:
    """A `ReplyTable` listener: late (or unknown) answers are counted and dropped,
    uncorrelated ones dead-lettered."""
    def listen(kind: Stray, answer: NativeMessage) -> None:
        if kind == "uncorrelated":
            dead_letter(answer)
        else:
            count_late()
    return listen


#: What dead-letters an uncorrelated answer: the endpoint it came in on, the answer.
StrayDeadLetter = Callable[[str, NativeMessage], Coroutine[Any, Any, None]]


class Replies:
    """A reply route's answers: handed back to the senders of each batch before their
    messages settle; answers no request waits for counted (late) or dead-lettered
    (uncorrelated)."""

    def __init__(self, outputs: Sequence[Output], dead_letter: StrayDeadLetter,
                 stats: RouteStats) -> None:
        self._outputs = outputs
        self._dead_letter = dead_letter
        self._stats = stats
        self.strays: set[asyncio.Task[None]] = set()  # uncorrelated answers being dead-lettered

    async def hand_back(self, batch: Batch) -> None:
        """Answer the senders of `batch` (`ledger.answers` says with what)."""
        for message, outcome, why in answers(batch):
            self._stats.replied(await hand_back(message.delivery, outcome, why))

    def listen(self) -> None:
        """Take the answers no request waits for, on every output that requests."""
        for output in self._outputs:
            producer = output.producer
            if isinstance(producer, Requester):
                producer.replies.listener = stray_listener(
                    self._stats.late_replies(output.endpoint_id),
                    self._stray_handler(output.endpoint_id))

    def _stray_handler(self, endpoint: str) -> Callable[[NativeMessage], None]:
        def dead_letter(answer: NativeMessage) -> None:
            task = asyncio.get_running_loop().create_task(self._dead_letter(endpoint, answer))
            self.strays.add(task)
            task.add_done_callback(self.strays.discard)
        return dead_letter
