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

Reply definitions (`routes[].reply_definitions`, `ReplyDefinitions` in
`gateway.runtime.replydefs`; the records a sender is handed are
`gateway.runtime.replyrecords`'s): the answer must be
accepted by one of them, by the same matcher (and schema policy) the requests go
through. A conforming answer is rendered for the sender: the CloudEvent of the definition
that matched it, and the fields of the sender-protocol definition paired with it (HTTP
`status` and headers, MQTT 5 properties, NATS headers). A non-conforming one is
dead-lettered as `nonconforming-reply` and the sender is told of a failure instead.

How a sender is told of a failure (no answer in time, a non-conforming answer, a request
that could not be sent) is its protocol's: one with a status (HTTP) gets it from its
adapter (504 / 502 with an RFC 9457 problem); one without (NATS, MQTT 5) gets nothing,
or a problem CloudEvent when the route asks for it (`routes[].reply_errors: problem`).

An HTTP CloudEvents batch is answered with a batch in the same format, one event per
member in the members' order: the member's answer as a CloudEvent, or a problem
CloudEvent for a member that got none (or a non-conforming one).

At least once, and what a timeout does: a request that got no answer within
`reply_timeout` is *not* sent again -- the service may have acted on it, and its sender
has been told (HTTP 504) or has given up on its own deadline. It is dead-lettered with
reason `no-reply` (for inspection and replay) and the source message is acked. A failure
to *send* the request (broker down, NATS "no responders", HTTP 5xx) is retried as on
any route, then dead-lettered as `undeliverable`; the sender is then told no answer
came (HTTP 502).

`Replies` is the route's part for this: it hands each batch's answers back before the
settler settles the batch (`ledger.member_answers` says what each sender got), and takes
the answers no request waits for -- late ones counted, uncorrelated ones dead-lettered.
Routes without `reply: true` have no `Replies`: nothing of this runs for them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Sequence
from typing import Any
from urllib.parse import quote

from gateway.cloudevents.bindings import detect_mode, encode, encode_batch
from gateway.cloudevents.event import CloudEvent
from gateway.deadletter import reasons
from gateway.matching.matcher import Explanation
from gateway.policies.reply import ReplyErrors
from gateway.ports import (
    NO_REPLY_PREFIX,
    Answer,
    Delivery,
    Outcome,
    Requester,
    Stray,
    StrayListener,
)
from gateway.protocols import find_profile
from gateway.record import NativeMessage
from gateway.runtime.ledger import Batch, MemberAnswer, member_answers
from gateway.runtime.output import Output
from gateway.runtime.replydefs import NONCONFORMING, ReplyDefinitions
from gateway.runtime.replyrecords import (
    ANSWER_TYPE,
    PROBLEM_TYPE,
    answer_event,
    native_reply,
    problem_event,
    reply_record,
    status_field,
    without_status,
)
from gateway.runtime.stats import RouteStats

log = logging.getLogger("xrgw.reply")

#: The route's default wait for an answer, in seconds.
DEFAULT_TIMEOUT = 5.0


async def hand_back(delivery: Delivery, outcome: Outcome | None, why: str) -> str:
    """Give the sender of `delivery` its answer (or tell it none came), as a route
    without reply definitions and with `reply_errors: none` does; the result for the
    reply metric: `answered`, `no-reply`, `failed` or `not-awaited`."""
    answer = delivery.answer
    if answer is None:
        return "not-awaited"
    if outcome is not None and outcome.reply is not None:
        return await _tell(answer, reply_record(outcome.reply, delivery.message.protocol),
                           "", "answered")
    return await _tell(answer, None, why, _failure_result(why))


def _failure_result(why: str) -> str:
    return "no-reply" if why.startswith(NO_REPLY_PREFIX) else "failed"


async def _tell(answer: Answer, record: NativeMessage | None, why: str, result: str) -> str:
    """Hand `record` (or `why`) to the sender's answer hook; `result`, or `failed` when
    it could not be sent (which must not stop settling)."""
    try:
        await answer(record, why)
    except Exception as exc:
        log.warning("could not answer the sender: %s", exc)  # pragma: no mutate
        return "failed"
    return result


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

# -- the route's part ---------------------------------------------------------------------------

#: What dead-letters an answer no request can take: the endpoint it came in on, the
#: answer, the reason, the detail (None: the reason's own) and why no definition took it.
AnswerDeadLetter = Callable[[str, NativeMessage, str, "str | None", Sequence[Explanation]],
                            Coroutine[Any, Any, None]]


class Replies:
    """A reply route's answers: judged by the reply definitions (if any), handed back to
    the senders of each batch before their messages settle; answers no request waits for
    counted (late) or dead-lettered (uncorrelated)."""

    def __init__(self, outputs: Sequence[Output], dead_letter: AnswerDeadLetter,
                 stats: RouteStats, definitions: ReplyDefinitions | None = None,
                 errors: ReplyErrors = "none") -> None:
        self._outputs = outputs
        self._dead_letter = dead_letter
        self._stats = stats
        self.definitions = definitions
        self.errors: ReplyErrors = errors
        # Where the problems and wrapped answers the gateway makes come from: the output
        # the requests went to (a reply route has one).
        self._source = (f"/xrgw/endpoints/{quote(outputs[0].endpoint_id, safe='')}"
                        if outputs else "/xrgw")  # a URI reference whatever the id holds
        self.strays: set[asyncio.Task[None]] = set()  # uncorrelated answers being dead-lettered

    async def hand_back(self, batch: Batch) -> None:
        """Answer the senders of `batch` (`ledger.member_answers` says with what)."""
        for message, parts in member_answers(batch):
            answer = message.delivery.answer
            assert answer is not None  # member_answers lists waiting senders only
            try:
                await self._answer(message.delivery, answer, message.whole is None, parts)
            except Exception:  # a bug here must not stop settling: the sender hears of it
                log.exception("could not shape the answer for the sender")  # pragma: no mutate
                self._stats.replied(await _tell(answer, None, "the answer could not be "
                                                "handed back", "failed"))

    async def _answer(self, delivery: Delivery, answer: Answer, converted: bool,
                      parts: Sequence[MemberAnswer]) -> None:
        """Answer one waiting sender (`converted`: its message did not fail as a whole)."""
        protocol = delivery.message.protocol
        prof = find_profile(protocol)
        if (converted and prof is not None and prof.batches
                and detect_mode(delivery.message) == "batch"):
            await self._answer_batch(answer, protocol, parts)
            return
        first = next((p for p in parts
                      if p.outcome is not None and p.outcome.reply is not None), None)
        part = first or (parts[0] if parts else MemberAnswer(None, "no answer", ""))
        self._stats.replied(await self._answer_one(answer, protocol, part))

    async def _answer_one(self, answer: Answer, protocol: str, part: MemberAnswer) -> str:
        """Hand one sender its answer, or tell it why none came; the metric's result."""
        outcome = part.outcome
        if outcome is not None and outcome.reply is not None:
            shaped = await self._shaped(outcome.reply, protocol, part.endpoint)
            if isinstance(shaped, NativeMessage):
                return await _tell(answer, shaped, "", "answered")
            return await self._fail(answer, protocol, shaped, "nonconforming")
        return await self._fail(answer, protocol, part.why, _failure_result(part.why))

    async def _shaped(self, reply: NativeMessage, protocol: str,
                      endpoint: str) -> NativeMessage | str:
        """The answer for the sender, or why it has none (the answer was dead-lettered)."""
        definitions = self.definitions
        if definitions is None:
            return without_status(reply_record(reply, protocol))
        judged = definitions.judge(reply)
        if judged.conversion is None:
            await self._dead_letter(endpoint, reply, reasons.NONCONFORMING_REPLY,
                                    f"{judged.detail} (on {endpoint})", judged.explain)
            return NONCONFORMING
        rendered = definitions.render(reply, judged.conversion, protocol)
        if isinstance(rendered, str):
            await self._dead_letter(endpoint, reply, reasons.NONCONFORMING_REPLY,
                                    f"{rendered} (on {endpoint})", ())
            return NONCONFORMING
        return rendered

    async def _fail(self, answer: Answer, protocol: str, why: str, result: str) -> str:
        """Tell a sender no (conforming) answer came, as its protocol can be told
        (`status_field`, `reply_errors`)."""
        if status_field(protocol) is None and self.errors == "problem":
            record = encode(problem_event(why, self._source), protocol, "binary")
            return await _tell(answer, record, "", result)
        return await _tell(answer, None, why, result)

    async def _answer_batch(self, answer: Answer, protocol: str,
                            parts: Sequence[MemberAnswer]) -> None:
        """An HTTP CloudEvents batch: a batch of the same format, one event per member in
        order -- its answer, or a problem."""
        events: list[CloudEvent] = []
        results: list[str] = []
        for part in parts:
            outcome = part.outcome
            event: CloudEvent | None = None
            why, result = part.why, _failure_result(part.why)
            if outcome is not None and outcome.reply is not None:
                event, why = await self._member_event(outcome.reply, part.endpoint)
                result = "answered" if event is not None else "nonconforming"
            events.append(event if event is not None else problem_event(why, self._source))
            results.append(result)
        told = await _tell(answer, encode_batch(events, protocol), "", "answered")
        for result in results:
            self._stats.replied(result if told == "answered" else "failed")

    async def _member_event(self, reply: NativeMessage,
                            endpoint: str) -> tuple[CloudEvent | None, str]:
        """A batch member's answer as a CloudEvent, or None and why it has none."""
        definitions = self.definitions
        if definitions is None:
            return answer_event(reply, self._source), ""
        judged = definitions.judge(reply)
        if judged.conversion is None:
            await self._dead_letter(endpoint, reply, reasons.NONCONFORMING_REPLY,
                                    f"{judged.detail} (on {endpoint})", judged.explain)
            return None, NONCONFORMING
        event = judged.conversion.event
        return (event if event is not None else answer_event(reply, self._source)), ""

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
            task = asyncio.get_running_loop().create_task(self._dead_letter(
                endpoint, answer, reasons.UNCORRELATED_REPLY, None, ()))
            self.strays.add(task)
            task.add_done_callback(self.strays.discard)
        return dead_letter


__all__ = ["ANSWER_TYPE", "DEFAULT_TIMEOUT", "NONCONFORMING", "PROBLEM_TYPE", "Replies",
           "ReplyDefinitions", "answer_event", "hand_back", "native_reply", "problem_event",
           "reply_record", "stray_listener"]
