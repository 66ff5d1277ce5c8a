"""The route's ledger: what became of each message of a batch, and how each is settled.

Pure bookkeeping -- no event loop, no I/O, no metrics -- so every decision the settler
takes can be tested on its own (`tests/unit/runtime/test_ledger.py`):

    Batch ─┬─ Message (one delivery) ── Member (one event of it; an HTTP batch has several)
           └─ Sent (one per output: the records submitted, the member each belongs to)

Guarantees the route builds on:

- A message is acked only when no member of it failed, or when every failed part was
  dead-lettered. What failed is dead-lettered once per failed part: the message as it
  came when it did not convert, else each failed member alone, with every output's
  failure in its detail (`failed_parts`).
- Settlement follows the batch's order (`verdicts`): the source sees acks in the order it
  gave the messages, so the order per partition, topic, subject or link holds.
- A record whose sender stopped waiting (`ABANDONED`) is neither sent again nor
  dead-lettered: its sender was told to try again itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import NamedTuple

from gateway.convert import Conversion, Converter
from gateway.deadletter import reasons
from gateway.envelope.outgoing import member_record
from gateway.matching.matcher import Explanation, MatchResult
from gateway.ports import NO_REPLY_PREFIX, Confirmation, Delivery, Outcome
from gateway.protocols.accessors import ACCESSORS
from gateway.record import NativeMessage
from gateway.runtime.output import Output


class Member:
    """One event of a source message (an HTTP batch has several; everything else one):
    what failed about it, if anything, and the dead letter to write when something did."""

    __slots__ = ("_failures", "_original", "conversion", "definition", "delivery", "reason",
                 "source")

    def __init__(self, source: NativeMessage, conversion: Conversion,
                 delivery: Delivery | None = None) -> None:
        self.source = source
        self.conversion = conversion
        self.delivery = delivery  # whose settlement it waits for
        self.definition: str | None = None
        self.reason: str | None = None  # a dead-letter reason once something failed
        # What failed, per output (`fail`): made on the first failure only, as most
        # members never fail (an empty list per message was one more object to free).
        self._failures: list[str] | None = None
        self._original: NativeMessage | None = None

    @property
    def failures(self) -> Sequence[str]:
        """What failed, one "endpoint: why" each, in order."""
        return self._failures or ()

    def fail(self, failure: str) -> None:
        """Add one failure ("endpoint: why")."""
        if self._failures is None:
            self._failures = [failure]
        else:
            self._failures.append(failure)

    def original(self) -> NativeMessage:
        """What to dead-letter (and sample) for this event of `source` (`member_record`):
        built once, on failure only, for the report and the dead letter alike."""
        if self._original is None:
            conversion = self.conversion
            self._original = member_record(self.source,
                                           conversion.source_event or conversion.event)
        return self._original


class WrittenMember(Member):
    """A member the fused path wrote (`runtime/wirepath.py`): its records were written
    from the source record with no event made. Its conversion is made when first asked
    for (a dead letter, the tap, a reply), by rendering the record again with the same
    match and receive time: the same event, as the writer takes only records whose event
    is the same when rendered again (`envelope/wirewriter.py`), once a record without an
    identity gets back the random id it was written with (`made_id`)."""

    __slots__ = ("_converter", "_made", "_made_id", "_match", "_now")
    _made: Conversion | None  # None until made

    def __init__(self, source: NativeMessage, match: MatchResult, converter: Converter,
                 now: datetime, delivery: Delivery | None,
                 definition: str | None = None, made_id: str | None = None) -> None:
        self._match = match
        self._converter = converter
        self._now = now
        self._made = None  # no conversion yet: made on demand
        self._made_id = made_id
        # `Member.__init__`'s state, written here: this runs for every message the fused
        # path writes, and going through it (and the `conversion` setter) was nearly half
        # of building the member (625 against 345 ns, measured). Every slot of `Member`
        # is set (tests/unit/runtime/test_ledger.py).
        self.source = source
        self.delivery = delivery
        self.definition = definition
        self.reason = None
        self._failures = None
        self._original = None

    @property
    def conversion(self) -> Conversion:
        made = self._made
        if made is None:
            made = self._converter.convert_matched(self.source, self._match, self._now)
            event = made.event
            if (self._made_id is not None and event is not None
                    and ACCESSORS[self.source.protocol].identity(self.source.fields) is None):
                # Rendered again it got another random id: the one it was sent with.
                made = replace(made, event=event.with_id(self._made_id))
            self._made = made
        return made

    @conversion.setter
    def conversion(self, conversion: Conversion) -> None:
        self._made = conversion


class Message:
    """One delivery of the batch and its members."""

    __slots__ = ("delivery", "members", "whole")

    def __init__(self, delivery: Delivery, members: Sequence[Member] = ()) -> None:
        self.delivery = delivery
        # A tuple where the members are known when it is made (the fused path's one
        # member: one object fewer per message than a list), a list the general path
        # fills as it renders.
        self.members = members
        # The whole message failed to convert: dead-letter it as it came.
        self.whole: Member | None = None


class Sent:
    """What one output was given in one submit: records and the members they belong to."""

    __slots__ = ("confirmation", "output", "owners", "records", "replies")

    def __init__(self, output: Output) -> None:
        self.output = output
        self.records: list[NativeMessage] = []
        self.owners: list[Member] = []
        self.confirmation: Confirmation | None = None
        # Reply routes: the final outcome of each record that carried an answer, by index.
        self.replies: dict[int, Outcome] = {}


class Batch:
    """The unit of the route: messages read together, in order, and what each output
    was given of them."""

    __slots__ = ("messages", "sent", "started")

    def __init__(self, messages: list[Message], sent: list[Sent], started: float) -> None:
        self.messages = messages
        self.sent = sent
        self.started = started

    def extend(self, more: Batch) -> None:
        """Append `more` (the next slice of the same read, for the same outputs)."""
        self.messages.extend(more.messages)
        for sent, added in zip(self.sent, more.sent, strict=True):
            sent.records.extend(added.records)
            sent.owners.extend(added.owners)

    def deliveries(self) -> list[Delivery]:
        return [message.delivery for message in self.messages]


class Letter:
    """One dead letter to write: for which message, of what, why, and whether it is
    the body-less form already."""

    __slots__ = ("definition", "detail", "explain", "message", "original", "reason", "record",
                 "withheld")

    def __init__(self, message: Message, original: NativeMessage, reason: str, detail: str,
                 definition: str | None) -> None:
        self.message = message
        self.original = original
        self.reason = reason
        self.detail = detail
        self.definition = definition
        self.explain: Sequence[Explanation] = ()  # why no definition took it, if none did
        self.record = original  # replaced by the dead-letter record before it is sent
        self.withheld = False


# -- what failed, and why --------------------------------------------------------------------

#: What `failed_parts` yields per failed part: original, member, detail, explanation.
FailedPart = tuple[NativeMessage, Member, str, Sequence[Explanation]]
_NOTHING_FAILED: tuple[FailedPart, ...] = ()


def failed_parts(message: Message) -> Sequence[FailedPart]:
    """What to dead-letter of one message: the whole message when it failed to convert,
    else each failed member (original, member, detail, explanation)."""
    whole = message.whole
    if whole is not None:
        return [(whole.source, whole, whole.conversion.detail, whole.conversion.explain)]
    members = message.members
    if len(members) == 1 and members[0].reason is None:
        return _NOTHING_FAILED  # nearly every message: no list built for it
    parts: list[FailedPart] = []
    for member in message.members:
        if member.reason is None:
            continue
        if member.failures:
            parts.append((member.original(), member, "; ".join(member.failures), ()))
        else:
            parts.append((member.original(), member, member.conversion.detail,
                          member.conversion.explain))
    return parts


#: The retry verdict on a record whose sender stopped waiting: not sent again, not
#: dead-lettered (the sender was answered 504 and decides), settled as usual.
ABANDONED = "the sender stopped waiting"


def failure_reason(why: str, last: Outcome) -> str:
    """The dead-letter reason of a record given up with `why` after `last`."""
    if why.startswith(NO_REPLY_PREFIX):
        return reasons.NO_REPLY
    return reasons.TOO_LARGE if last.too_large else reasons.UNDELIVERABLE


def give_up(sent: Sent, failed: Sequence[int], given: Sequence[str | None],
            last: Sequence[Outcome], outcomes: list[Outcome]) -> None:
    """Record the retries' verdict on `sent`'s `failed` records: each one's last outcome
    goes into `outcomes`, and the member of each record given up (`given`: why, None
    once delivered) gets its dead-letter reason and the failure."""
    endpoint = sent.output.endpoint_id
    for index, why, outcome in zip(failed, given, last, strict=True):
        outcomes[index] = outcome
        if why is None or why is ABANDONED:
            continue  # delivered, or its sender was answered (504) and sends it again
        member = sent.owners[index]
        member.reason = failure_reason(why, outcome)
        member.fail(f"{endpoint}: {why}")


def why_unanswered(member: Member | None) -> str:
    """What a sender is told when its request got no answer."""
    if member is None:
        return "no answer"
    if member.failures:
        # The failure of the request itself ("no reply within 5 s") without endpoint names
        # or broker answers: those stay in the dead letter and the logs.
        last = member.failures[-1].partition(": ")[2]
        return last if last.startswith(NO_REPLY_PREFIX) else member.reason or "failed"
    return member.reason or reasons.UNMATCHED


# -- retries ---------------------------------------------------------------------------------

def after_attempt(todo: Sequence[int], again: Sequence[Outcome], failed: set[int],
                  outcomes: list[Outcome], why: list[str | None]) -> list[int]:
    """Book one more attempt at the records `todo` (indexes into `outcomes` and `why`),
    whose outcomes were `again` (`failed`: positions in `again`); the indexes still worth
    another attempt (failed retryably)."""
    still = []
    for position, index in enumerate(todo):
        outcome = again[position]
        outcomes[index] = outcome
        if position not in failed:
            why[index] = None
            continue
        why[index] = outcome.reason or "failed"
        if outcome.retryable:
            still.append(index)
    return still


def still_awaited(todo: Sequence[int], owners: Sequence[Member],
                  why: list[str | None]) -> list[int]:
    """`todo` without the records whose sender stopped waiting; those get `ABANDONED`
    in `why`."""
    keep = []
    for index in todo:
        delivery = owners[index].delivery
        if delivery is not None and delivery.abandoned:
            why[index] = ABANDONED
        else:
            keep.append(index)
    return keep


class LetterRound(NamedTuple):
    """What one attempt at writing dead letters left: the letters written, those still
    to write, those of them refused for their size (to write again without the body)
    and the first permanent refusal, if any."""

    written: list[Letter]
    remaining: list[Letter]
    too_large: list[tuple[Letter, str]]
    permanent: str | None


def sort_letters(letters: Sequence[Letter], why: Sequence[str | None],
                 last: Sequence[Outcome | None]) -> LetterRound:
    """Sort `letters` by how their write went (`why`: None once written; `last`: the
    refusal). A letter already without its body that is refused for its size again is
    a permanent refusal like any other."""
    written: list[Letter] = []
    remaining: list[Letter] = []
    too_large: list[tuple[Letter, str]] = []
    permanent: str | None = None
    for letter, failure, refusal in zip(letters, why, last, strict=True):
        if failure is None:
            written.append(letter)
            continue
        remaining.append(letter)
        if refusal is not None and refusal.too_large and not letter.withheld:
            too_large.append((letter, failure))
        elif refusal is not None and not refusal.retryable:
            permanent = permanent or failure
    return LetterRound(written, remaining, too_large, permanent)


# -- settlement ------------------------------------------------------------------------------

class Verdict(NamedTuple):
    """How a source message is settled: acked, or nacked with a reason, for redelivery
    (`retry`) or for good."""

    ack: bool
    reason: str = ""
    retry: bool = False


ACK = Verdict(True)
REDELIVER = Verdict(False, "dead letter failed", True)


def verdicts(messages: Sequence[Message], unwritten: set[Message],
             dropped: dict[Message, str]) -> list[Verdict]:
    """How each of `messages` is settled, in their order: nacked for redelivery when its
    dead letter could not be written (`unwritten`: only a stopping route gives up on
    one), nacked for good when what failed of it was dropped (`deadletter: log` -- the
    source is told so, an HTTP sender gets 400 with the reason, not 202), else acked."""
    out = []
    for message in messages:
        if message in unwritten:
            out.append(REDELIVER)
        elif message in dropped:
            out.append(Verdict(False, dropped[message], False))
        else:
            out.append(ACK)
    return out


def answers(batch: Batch) -> list[tuple[Message, Outcome | None, str]]:
    """A reply route's answers for the senders of `batch` that wait for one: per such
    message, the first answer any output got for one of its events, else None and why
    none came."""
    got: dict[Member, Outcome] = {}
    for sent in batch.sent:
        for index, answered in sent.replies.items():
            got.setdefault(sent.owners[index], answered)
    out = []
    for message in batch.messages:
        if message.delivery.answer is None:
            continue
        outcome = next((got[m] for m in message.members if m in got), None)
        why = ""
        if outcome is None:
            failed = message.whole or next(
                (m for m in message.members if m.reason is not None), None)
            why = why_unanswered(failed)
        out.append((message, outcome, why))
    return out


class MemberAnswer(NamedTuple):
    """What one event of a waiting sender's message got: the output's outcome carrying
    the answer and the output's endpoint id, or None and why no answer came."""

    outcome: Outcome | None
    why: str
    endpoint: str


def member_answers(batch: Batch) -> list[tuple[Message, list[MemberAnswer]]]:
    """A reply route's answers, per member, for the senders of `batch` that wait for one,
    in the order of the members (an HTTP CloudEvents batch is answered member by
    member). A message that failed to convert as a whole has one entry, unanswered."""
    got: dict[Member, tuple[Outcome, str]] = {}
    for sent in batch.sent:
        endpoint = sent.output.endpoint_id
        for index, answered in sent.replies.items():
            got.setdefault(sent.owners[index], (answered, endpoint))
    out = []
    for message in batch.messages:
        if message.delivery.answer is None:
            continue
        whole = message.whole
        if whole is not None:
            out.append((message, [MemberAnswer(None, why_unanswered(whole), "")]))
            continue
        parts = []
        for member in message.members:
            found = got.get(member)
            if found is not None:
                parts.append(MemberAnswer(found[0], "", found[1]))
            else:
                why = why_unanswered(member) if member.reason is not None else "no answer"
                parts.append(MemberAnswer(None, why, ""))
        out.append((message, parts))
    return out


__all__ = ["ABANDONED", "ACK", "REDELIVER", "Batch", "FailedPart", "Letter", "LetterRound",
           "Member", "MemberAnswer", "Message", "Sent", "Verdict", "WrittenMember",
           "after_attempt", "answers", "failed_parts", "failure_reason", "give_up",
           "member_answers", "sort_letters", "still_awaited", "verdicts", "why_unanswered"]
