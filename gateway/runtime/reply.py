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

Reply definitions (`routes[].reply_definitions`, `ReplyDefinitions`): the answer must be
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
import uuid
from collections.abc import Callable, Coroutine, Sequence
from http import HTTPStatus
from typing import Any, NamedTuple
from urllib.parse import quote

from gateway.cloudevents.bindings import decode, detect_mode, encode, encode_batch
from gateway.cloudevents.errors import CloudEventError
from gateway.cloudevents.event import CloudEvent
from gateway.convert import Conversion, Converter
from gateway.deadletter import reasons
from gateway.definitions.model import MessageDefinition
from gateway.envelope.native import render_native
from gateway.envelope.render import RenderError
from gateway.json.values import JSON, as_text
from gateway.matching.matcher import Explanation
from gateway.policies.reply import ReplyErrors
from gateway.policies.schema import SchemaPolicy
from gateway.ports import (
    NO_REPLY_PREFIX,
    Answer,
    Delivery,
    Outcome,
    Requester,
    Stray,
    StrayListener,
)
from gateway.protocols import field_access, find_profile
from gateway.record import NativeMessage
from gateway.runtime.ledger import Batch, MemberAnswer, member_answers
from gateway.runtime.output import Output
from gateway.runtime.stats import RouteStats

log = logging.getLogger("xrgw.reply")

#: The route's default wait for an answer, in seconds.
DEFAULT_TIMEOUT = 5.0

#: The CloudEvents type of the problem a sender is told a failure with (NATS, MQTT 5 with
#: `reply_errors: problem`; a failed member of an HTTP batch). Its data is an RFC 9457
#: problem object, as the HTTP ingress answers it.
PROBLEM_TYPE = "io.xrgw.reply.problem"
PROBLEM_CONTENT_TYPE = "application/problem+json"
#: The CloudEvents type of a native answer (not a CloudEvent, no reply definition made it
#: one) carried as a member of an HTTP batch answer.
ANSWER_TYPE = "io.xrgw.reply"
#: What a sender is told when the service's answer conforms to no reply definition.
NONCONFORMING = "the service's answer conforms to no reply definition"


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


def status_field(protocol: str) -> str | None:
    """Where an answer of `protocol` carries its status (HTTP `status`); None: nowhere."""
    prof = find_profile(protocol)
    how = None if prof is None else prof.request_reply
    return None if how is None else how.status


def problem_status(why: str) -> int:
    """The HTTP status of a failure told with `why`: 504 when no answer came in time,
    else 502 (the gateway got no usable answer from the service)."""
    return 504 if why.startswith(NO_REPLY_PREFIX) else 502


def problem_event(why: str, source: str) -> CloudEvent:
    """The problem CloudEvent a sender is told a failure with: an RFC 9457 problem object
    (`about:blank`, the status's phrase as title) as its data, as the HTTP ingress
    answers it."""
    status = problem_status(why)
    problem: dict[str, JSON] = {"type": "about:blank", "title": HTTPStatus(status).phrase,
                                "status": status, "detail": why}
    return CloudEvent.create({"specversion": "1.0", "id": uuid.uuid4().hex,
                              "source": source, "type": PROBLEM_TYPE,
                              "datacontenttype": PROBLEM_CONTENT_TYPE}, problem)


def answer_event(answer: NativeMessage, source: str) -> CloudEvent:
    """`answer` as a CloudEvent: itself when it is one, else its body in one of type
    `ANSWER_TYPE` (a member of an HTTP batch answer)."""
    try:
        event = decode(answer)
    except CloudEventError:
        event = None
    if event is not None:
        return event
    attributes: dict[str, Any] = {"specversion": "1.0", "id": uuid.uuid4().hex,
                                  "source": source, "type": ANSWER_TYPE}
    content_type = answer.content_type
    if content_type is not None:
        attributes["datacontenttype"] = content_type
    try:
        if answer.has_json_data:
            return CloudEvent.create(attributes, answer.data, has_data=True)
        return CloudEvent.create(attributes, answer.payload)
    except CloudEventError:  # a content type that is no media type: the bytes, untyped
        attributes.pop("datacontenttype", None)
        return CloudEvent.create(attributes, answer.body_bytes() or None)


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


# -- reply definitions --------------------------------------------------------------------------

class Judged(NamedTuple):
    """An answer judged by the reply definitions: the conversion that accepted it, or
    why none did (the dead letter's detail and explanation)."""

    conversion: Conversion | None
    detail: str = ""
    explain: Sequence[Explanation] = ()


class ReplyDefinitions:
    """The definitions a reply route's answers must conform to (`reply_definitions`):
    matched by the core's matcher, rendered for the sender by the definition of the
    sender's protocol paired with the one that matched (`paired`)."""

    def __init__(self, definitions: Sequence[MessageDefinition],
                 schema: SchemaPolicy = "tiebreak") -> None:
        self.definitions = tuple(definitions)
        self._converter = Converter(self.definitions, schema=schema)
        # `paired`'s answers, by the matched definition's identity and the protocol.
        self._pairs: dict[tuple[int, str], MessageDefinition | None] = {}

    def judge(self, answer: NativeMessage) -> Judged:
        """Whether a definition accepts `answer` (and its schema, with `schema: enforce`)."""
        conversion = self._converter.convert(answer)
        if conversion.match.definition is not None and conversion.reason != \
                reasons.INVALID_DATA:
            return Judged(conversion)
        detail = f"{NONCONFORMING}: {conversion.reason}"
        if conversion.detail:
            detail += f" ({conversion.detail})"
        return Judged(None, detail, conversion.explain)

    def paired(self, matched: MessageDefinition, protocol: str) -> MessageDefinition | None:
        """The reply definition of `protocol`'s family that renders the answer `matched`
        accepted: `matched` itself when it is of that family, else the first declared one
        that derives from it (or it from that one, `basemessage`), else the first that
        declares the same literal CloudEvents `type`, else the first that shares a base
        message with it; None: the answer is rendered without one."""
        key = (id(matched), protocol)
        if key not in self._pairs:
            self._pairs[key] = self._pair(matched, protocol)
        return self._pairs[key]

    def _pair(self, matched: MessageDefinition, protocol: str) -> MessageDefinition | None:
        prof = find_profile(protocol)
        if prof is None:
            return None
        family = prof.family
        candidates = [d for d in self.definitions
                      if (p := find_profile(d.protocol)) is not None and p.family == family]
        if matched in candidates:
            return matched
        lineage = _lineage(matched)
        kind = _literal_type(matched)
        # Nearest first: an overlay of the matched definition (or its own base), then one
        # of the same CloudEvents type, then one that shares any base (a catalog-wide
        # base shared by every definition must not pick an unrelated reply first).
        def derived(c: MessageDefinition) -> bool:
            return matched.xid in c.base_chain or c.xid in matched.base_chain

        def same_type(c: MessageDefinition) -> bool:
            return kind is not None and _literal_type(c) == kind

        def shares_base(c: MessageDefinition) -> bool:
            return bool(lineage & _lineage(c))

        for related in (derived, same_type, shares_base):
            found = next((c for c in candidates if related(c)), None)
            if found is not None:
                return found
        return None

    def render(self, answer: NativeMessage, conversion: Conversion,
               protocol: str) -> NativeMessage | str:
        """The conforming `answer` as a record of `protocol` for its sender, or why it
        cannot be (a placeholder of the sender's definition without a value)."""
        event = conversion.event
        base = (encode(event, protocol, "binary") if event is not None
                else reply_record(answer, protocol))
        matched = conversion.match.definition
        sender = None if matched is None else self.paired(matched, protocol)
        if sender is None or matched is None:
            return _without_status(base)
        # The context as `render_native` would build it from the event, without matching
        # its templates again when the matcher captured them already (the sender's
        # envelope templates are the matched one's, as with a `basemessage` overlay).
        if event is None or _templates(sender).items() <= _templates(matched).items():
            context = ({} if event is None else
                       {k: as_text(v) for k, v in event.canonical_attributes().items()})
            context.update(conversion.match.context)
            rendered = render_native(sender, None, context)
        else:  # templates of its own may capture other names
            rendered = render_native(sender, event, conversion.match.context)
        if isinstance(rendered, RenderError):
            return f"{NONCONFORMING} for the sender ({rendered.message})"
        return _overlay(_without_status(base), rendered, sender)


def _lineage(definition: MessageDefinition) -> set[str]:
    """The definition and the base messages merged into it."""
    return {definition.xid, *definition.base_chain}


def _templates(definition: MessageDefinition) -> dict[str, str]:
    """The definition's `envelopemetadata` values that hold placeholders."""
    return {name: prop.value for name, prop in definition.envelope_metadata.items()
            if isinstance(prop.value, str) and "{" in prop.value}


def _literal_type(definition: MessageDefinition) -> str | None:
    prop = definition.envelope_metadata.get("type")
    value = None if prop is None else prop.value
    return value if isinstance(value, str) and "{" not in value else None


def _without_status(record: NativeMessage) -> NativeMessage:
    """`record` without the status the service answered with (an HTTP egress call's
    2xx): the sender gets the status of its reply definition, or the default (200)."""
    status = status_field(record.protocol)
    if status is None or status not in record.fields:
        return record
    return record.replace_fields({k: v for k, v in record.fields.items() if k != status})


def _overlay(base: NativeMessage, rendered: NativeMessage,
             definition: MessageDefinition) -> NativeMessage:
    """`base` with the fields `definition` declares, as `rendered` has them: scalars
    replaced, named entries (headers, user properties, sections) replaced by name and
    added. The address is not taken: the answer hook addresses the answer."""
    prof = find_profile(base.protocol)
    address = None if prof is None or prof.address is None else prof.address.field
    declared = {c.field for c in definition.protocol_options} - {address}
    fields: dict[str, JSON] = dict(base.fields)
    for name in declared:
        value = rendered.fields.get(name)
        if value is None:
            continue
        kind = field_access(base.protocol, name, None).kind
        old = fields.get(name)
        if isinstance(value, list) and isinstance(old, list):
            names = {str(e.get("name", "")).lower() for e in value if isinstance(e, dict)}
            kept = [e for e in old if not (isinstance(e, dict)
                                           and str(e.get("name", "")).lower() in names)]
            fields[name] = [*kept, *value]
        elif isinstance(value, dict) and isinstance(old, dict) and kind != "scalar":
            fields[name] = {**old, **value}
        else:
            fields[name] = value
    return base.replace_fields(fields)


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
        part = first or (parts[0] if parts else MemberAnswer(None, None, "no answer", ""))
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
            return _without_status(reply_record(reply, protocol))
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
