"""Request/answer pairs in the traffic, and the reply definitions they propose.

A request carries where its answer goes (and often a correlation value); its answer
arrives at that address (carrying the correlation back). The conventions below say where
each of them sits in a record. They are recognised by the record's fields, not by protocol
name, so a protocol whose records lack a convention's fields never matches it:

- NATS: the request's `reply-to`; the answer arrives on that `subject`.
- MQTT 5: the request's `response_topic` and `correlation_data`; the answer arrives on
  that `topic_name` with the same `correlation_data`.
- AMQP 1.0: the request's `properties.reply-to` and `properties.correlation-id` (else its
  `message-id`); the answer carries that value as `properties.correlation-id`.
- Kafka (Spring's `ReplyingKafkaTemplate`): the request's headers `kafka_replyTopic` and
  `kafka_correlationId`; the answer arrives on that `topic` with the same header.

While records stream past, `ReplyPairs.see` remembers each request's reply address (a
bounded table: the oldest unanswered requests are forgotten) and recognises an answer by
it; a record that could be an answer is held back for a bounded window, so an answer read
before its request (separate subscriptions) is still paired. Answers are taken out of
the ordinary learning -- their addresses are the requesters' inboxes, not kinds of
messages -- and sampled with their request (bounded). After the request definitions are
proposed, `reply_proposals` finds each sampled request's definition X and proposes
`X.reply` from the answers of X: their constants (the answer's address and correlation,
per requester, left out), a JSON Schema of their bodies, and the link of the two.

The link is the one `docs/request-reply.md` documents (`gateway.learn.document`): the
reply sits in a group of replies a route names in `reply_definitions`, and both
definitions declare the CloudEvents extension attribute `correlationid`.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

from gateway.json.values import JSON, as_text
from gateway.learn.model import LearnOptions, Proposal, ReplyProposal
from gateway.learn.slots import MAX_VALUE_LENGTH, Observation, Slot, address_ref, observe
from gateway.protocols import FieldRef, find_profile
from gateway.record import NativeMessage


@dataclass(frozen=True)
class Convention:
    """Where one request-reply convention keeps the reply address and the correlation.

    reply_to     - in the request: where the answer goes;
    answer_at    - in the answer: where it was sent (None: records do not say, the
                   correlation alone pairs them);
    request_key  - in the request: the correlation value (the first present one);
    answer_key   - in the answer: the same value.
    """

    how: str
    reply_to: FieldRef
    answer_at: FieldRef | None
    request_key: tuple[FieldRef, ...] = ()
    answer_key: FieldRef | None = None


CONVENTIONS = (
    Convention("a reply subject (reply-to)", FieldRef("reply-to"), FieldRef("subject")),
    Convention("a response topic and correlation data", FieldRef("response_topic"),
               FieldRef("topic_name"), (FieldRef("correlation_data"),),
               FieldRef("correlation_data")),
    Convention("reply-to and correlation-id properties", FieldRef("properties", "reply-to"),
               None, (FieldRef("properties", "correlation-id"),
                      FieldRef("properties", "message-id")),
               FieldRef("properties", "correlation-id")),
    Convention("kafka_replyTopic and kafka_correlationId headers",
               FieldRef("headers", "kafka_replyTopic"), FieldRef("topic"),
               (FieldRef("headers", "kafka_correlationId"),),
               FieldRef("headers", "kafka_correlationId")),
)

#: (protocol, answer address or None, correlation or None): how an answer finds its request.
Key = tuple[str, str | None, str | None]


def read_ref(record: NativeMessage, ref: FieldRef) -> str | None:
    """The text at `ref` in `record` (a scalar field, a section member, or the first entry
    of that name in a {name, value} list, names compared ignoring case); None if absent."""
    raw = record.fields.get(ref.field)
    if ref.name is None:
        value: JSON = raw
    elif isinstance(raw, dict):
        value = raw.get(ref.name)
    elif isinstance(raw, list):
        wanted = ref.name.lower()
        value = next((e.get("value") for e in raw if isinstance(e, dict)
                      and str(e.get("name", "")).lower() == wanted), None)
    else:
        value = None
    if value is None or isinstance(value, (dict, list)):
        return None
    text = as_text(value)
    return text or None


def _conventions(protocol: str) -> tuple[Convention, ...]:
    """The conventions whose fields records of `protocol` have (read from its profile)."""
    prof = find_profile(protocol)
    if prof is None:
        return ()
    fields = prof.record_fields
    return tuple(c for c in CONVENTIONS if c.reply_to.field in fields
                 and (c.answer_at is None or c.answer_at.field in fields))


_BY_PROTOCOL: dict[str, tuple[Convention, ...]] = {}


def conventions_of(protocol: str) -> tuple[Convention, ...]:
    found = _BY_PROTOCOL.get(protocol)
    if found is None:
        found = _BY_PROTOCOL[protocol] = _conventions(protocol)
    return found


@dataclass
class Pair:
    """One sampled request and its answer."""

    request: Observation
    answer: Observation
    convention: Convention


@dataclass
class ReplyPairs:
    """Requests waiting for their answer (bounded), and the request/answer pairs seen."""

    options: LearnOptions
    waiting: OrderedDict[Key, tuple[Observation, Convention]] = field(
        default_factory=OrderedDict)
    pairs: list[Pair] = field(default_factory=list)
    answered: int = 0  # answers recognised (sampled or not)
    forgotten: int = 0  # requests forgotten unanswered to stay bounded
    bodies: int = 0  # answer bodies kept
    # Records that may be answers whose request was not read yet, oldest first; by the
    # answer key(s) they would pair with.
    held: OrderedDict[int, tuple[Observation, list[Key]]] = field(default_factory=OrderedDict)
    held_by_key: dict[Key, int] = field(default_factory=dict)
    _serial: int = 0

    def see(self, record: NativeMessage) -> list[Observation]:
        """Take `record`; the observations to learn now as kinds of messages.

        An answer to a request seen before is sampled with its request, never learned.
        A request is learned at once and remembered until its answer comes. Any other
        record that could be an answer (it has an answer's address or correlation) is
        held back for a while (`reply_lookback` records): an observer reading requests
        and answers on separate subscriptions (NATS `quote.>` and `_INBOX.>`) may read
        an answer before its request. Held records are learned when they leave the
        window, or at the end (`flush`)."""
        conventions = conventions_of(record.protocol)
        if not conventions:
            return [observe(record)]
        answer_keys = [k for c in conventions if (k := _answer_key(record, c)) is not None]
        for key in answer_keys:
            waiting = self.waiting.pop(key, None)
            if waiting is not None:
                self._pair(waiting[0], observe(record), waiting[1])
                return []
        seen = observe(record)
        for convention in conventions:
            asked = _request_key(record, convention)
            if asked is None:
                continue
            early = self.held_by_key.pop(asked, None)
            if early is not None:  # its answer was read first
                answer, keys = self.held.pop(early)
                for other in keys:
                    self.held_by_key.pop(other, None)
                self._pair(seen, answer, convention)
            else:
                self.waiting[asked] = (seen, convention)
                if len(self.waiting) > self.options.reply_waiting_cap:
                    self.waiting.popitem(last=False)
                    self.forgotten += 1
            return [seen]
        if not answer_keys:
            return [seen]
        return self._hold(seen, answer_keys)

    def _hold(self, seen: Observation, keys: list[Key]) -> list[Observation]:
        serial = self._serial = self._serial + 1
        self.held[serial] = (seen, keys)
        for key in keys:
            self.held_by_key[key] = serial
        if len(self.held) <= self.options.reply_lookback:
            return []
        evicted, (oldest, old_keys) = self.held.popitem(last=False)
        for key in old_keys:
            if self.held_by_key.get(key) == evicted:
                del self.held_by_key[key]
        return [oldest]

    def flush(self) -> list[Observation]:
        """The records still held back: learned, no request came for them."""
        out = [seen for seen, _ in self.held.values()]
        self.held.clear()
        self.held_by_key.clear()
        return out

    def _pair(self, request: Observation, answer: Observation,
              convention: Convention) -> None:
        self.answered += 1
        if len(self.pairs) >= self.options.reply_pair_cap:
            return
        if answer.has_json_body:
            if self.bodies >= self.options.reply_body_cap:
                answer = Observation(answer.protocol, answer.segments, answer.values, None,
                                     False, answer.content_type)
            else:
                self.bodies += 1
        self.pairs.append(Pair(request, answer, convention))


def _request_key(record: NativeMessage, convention: Convention) -> Key | None:
    reply_to = read_ref(record, convention.reply_to)
    if reply_to is None:
        return None
    correlation = next((v for ref in convention.request_key
                        if (v := read_ref(record, ref)) is not None), None)
    if convention.answer_at is None:
        if correlation is None:
            return None  # nothing the answer could be recognised by
        return record.protocol, None, correlation
    return record.protocol, reply_to, correlation


def _answer_key(record: NativeMessage, convention: Convention) -> Key | None:
    address = None
    if convention.answer_at is not None:
        address = read_ref(record, convention.answer_at)
        if address is None:
            return None
    correlation = (None if convention.answer_key is None
                   else read_ref(record, convention.answer_key))
    if address is None and correlation is None:
        return None
    return record.protocol, address, correlation


# ---------------------------------------------------------------------- after proposing

def request_of(seen: Observation, proposals: Sequence[Proposal]) -> Proposal | None:
    """The proposed definition a request belongs to: of its protocol and address length,
    every constant holding, the most constrained one."""
    best: Proposal | None = None
    best_score = -1
    for proposal in proposals:
        if proposal.protocol != seen.protocol or _segments(proposal) != seen.segments:
            continue
        if len(proposal.constants) > best_score and all(
                _text(seen.values.get(slot)) == as_text(value)[:MAX_VALUE_LENGTH]
                for slot, value in proposal.constants.items()):
            best, best_score = proposal, len(proposal.constants)
    return best


def _segments(proposal: Proposal) -> int:
    indexes = [s.segment for s in (*proposal.constants, *proposal.placeholders)
               if s.is_segment]
    indexes += [s.segment for s in proposal.left_out if s.is_segment]
    return max(indexes) + 1 if indexes else 0


def _text(value: tuple[str, JSON] | None) -> str | None:
    return None if value is None else value[0]


def reply_proposals(pairs: Sequence[Pair], proposals: Sequence[Proposal],
                    options: LearnOptions) -> list[ReplyProposal]:
    """`X.reply` for each proposed definition X with at least `min_group_size` sampled
    answers; each is also set as `X.reply`."""
    answers: dict[str, list[Pair]] = {}
    owners: dict[str, Proposal] = {}
    for pair in pairs:
        owner = request_of(pair.request, proposals)
        if owner is not None:
            answers.setdefault(owner.message_id, []).append(pair)
            owners[owner.message_id] = owner
    out: list[ReplyProposal] = []
    for message_id, answered in sorted(answers.items()):
        if len(answered) < options.min_group_size:
            continue
        owner = owners[message_id]
        reply = _reply(owner, answered)
        owner.reply = reply
        out.append(reply)
    return out


def _reply(owner: Proposal, pairs: Sequence[Pair]) -> ReplyProposal:
    protocol = Counter(p.answer.protocol for p in pairs).most_common(1)[0][0]
    mine = [p for p in pairs if p.answer.protocol == protocol]
    convention = Counter(p.convention.how for p in mine).most_common(1)[0][0]
    used = next(p.convention for p in mine if p.convention.how == convention)
    skipped = _per_requester(protocol, used)
    constants: dict[Slot, JSON] = {}
    first = mine[0].answer.values
    segments: list[str] = []
    for slot, (text, raw) in sorted(first.items()):
        if (slot.field, slot.member.lower()) in skipped:
            continue
        if all(_text(p.answer.values.get(slot)) == text for p in mine):
            if slot.is_segment:
                segments.append(text)
            else:
                constants[slot] = raw
    address, separator = address_ref(protocol)
    # The address is the requester's inbox where the answer arrives there; else (AMQP,
    # paired by correlation alone) it is a constant of the answer when all of it is.
    if (used.answer_at is None and address is not None and segments
            and len(segments) == mine[0].answer.segments):
        constants[Slot(address.field, address.name or "")] = separator.join(segments)
    content_types = Counter(p.answer.content_type for p in mine
                            if p.answer.content_type is not None)
    return ReplyProposal(
        protocol=protocol, count=len(mine), request_id=owner.message_id,
        message_id=f"{owner.message_id}.reply", type=f"{owner.type}.reply",
        convention=convention, constants=constants,
        correlation=used.answer_key,
        bodies=[p.answer.body for p in mine if p.answer.has_json_body],
        content_types=dict(content_types),
        non_json=sum(1 for p in mine if not p.answer.has_json_body and p.answer.values),
        every_request_answered=len(pairs) == owner.count,
        reply_to=used.reply_to)


def _per_requester(protocol: str, convention: Convention) -> set[tuple[str, str]]:
    """The answer's places that differ per request: its address and correlation."""
    out = set()
    if convention.answer_at is not None:  # arrives at the requester's inbox: per requester
        prof = find_profile(protocol)
        if prof is not None and prof.address is not None:
            out.add((prof.address.field, (prof.address.name or "").lower()))
    for ref in (convention.answer_at, convention.answer_key):
        if ref is not None:
            out.add((ref.field, (ref.name or "").lower()))
    return out
