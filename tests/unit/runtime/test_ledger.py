"""The route's ledger on its own (gateway/runtime/ledger.py): what is dead-lettered of a
message, how retries and dead-letter writes are booked, what a waiting sender is told,
and how each source message is settled -- all without an event loop."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from gateway.convert import Conversion
from gateway.deadletter import reasons
from gateway.matching.matcher import Explanation, MatchResult
from gateway.ports import Delivery, Outcome
from gateway.record import NativeMessage
from gateway.runtime import ledger
from gateway.runtime.ledger import (
    ABANDONED,
    ACK,
    REDELIVER,
    Batch,
    Letter,
    Member,
    Message,
    Sent,
    Verdict,
    WrittenMember,
    after_attempt,
    answers,
    failed_parts,
    give_up,
    sort_letters,
    still_awaited,
    verdicts,
    why_unanswered,
)
from gateway.runtime.output import Output

EXPLAIN = (Explanation("/messagegroups/g/messages/m", "topic differs", 1),)


async def _settle(ack: bool, reason: str, retry: bool) -> None:  # never awaited here
    raise AssertionError("the ledger settles nothing itself")


async def _answer(record: NativeMessage | None, why: str) -> None:
    raise AssertionError("the ledger answers nobody itself")


def _record(n: int) -> NativeMessage:
    return NativeMessage("MQTT/5.0", {"topic_name": f"/t/{n}"}, data={"n": n})


def _delivery(n: int, *, waiting: bool | None = None, answer: bool = False) -> Delivery:
    return Delivery(_record(n), _settle, answer=_answer if answer else None,
                    waiting=None if waiting is None else (lambda: waiting))


def _converted(record: NativeMessage) -> Conversion:
    return Conversion(record, MatchResult("matched"))


def _unconverted(record: NativeMessage, reason: str = reasons.UNMATCHED) -> Conversion:
    return Conversion(record, MatchResult("unmatched"), None, reason,
                      "no definition accepts it", EXPLAIN)


def _message(n: int, members: int = 1, **delivery: bool) -> Message:
    message = Message(_delivery(n, **delivery))
    record = message.delivery.message
    message.members = [Member(record, _converted(record), message.delivery)
                       for _ in range(members)]
    return message


def _whole(n: int, reason: str = reasons.UNMATCHED) -> Message:
    message = Message(_delivery(n))
    record = message.delivery.message
    message.whole = Member(record, _unconverted(record, reason), message.delivery)
    message.whole.reason = reason
    return message


OUT = Output("events", "KAFKA", None)  # type: ignore[arg-type]  # the ledger sends nothing


def _sent(*owners: Member) -> Sent:
    sent = Sent(OUT)
    for member in owners:
        sent.records.append(member.source)
        sent.owners.append(member)
    return sent


# -- the ledger needs no event loop ------------------------------------------------------------

def test_the_ledger_imports_nothing_of_asyncio() -> None:
    tree = ast.parse(Path(ledger.__file__).read_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module or "" for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom)}
    assert not {name for name in imported if name.split(".")[0] == "asyncio"}


# -- what is dead-lettered of a message --------------------------------------------------------

def test_a_message_that_did_not_convert_is_dead_lettered_whole_with_its_explanation() -> None:
    message = _whole(1)
    [(original, member, detail, explain)] = failed_parts(message)
    assert original is message.delivery.message and member is message.whole
    assert (detail, tuple(explain)) == ("no definition accepts it", EXPLAIN)


def test_a_delivered_message_has_nothing_to_dead_letter() -> None:
    assert failed_parts(_message(1)) == ()
    assert failed_parts(_message(1, members=3)) == []


def test_only_the_failed_members_of_a_batch_are_dead_lettered() -> None:
    message = _message(1, members=3)
    second, third = message.members[1], message.members[2]
    second.reason = reasons.UNDELIVERABLE
    second.fail("events: refused")
    second.fail("events: refused again")
    third.reason = reasons.UNMATCHED  # failed to convert: its conversion says why
    third.conversion = _unconverted(third.source)
    parts = failed_parts(message)
    assert [(m, d, tuple(e)) for _, m, d, e in parts] == [
        (second, "events: refused; events: refused again", ()),
        (third, "no definition accepts it", EXPLAIN)]


# -- retries and what is given up --------------------------------------------------------------

def test_an_attempt_books_each_outcome_and_keeps_only_retryable_failures() -> None:
    results = [Outcome.failed("down")] * 4
    why: list[str | None] = ["down"] * 4
    again = [Outcome.ok(), Outcome.failed("still down"), Outcome.failed("rejected", False)]
    still = after_attempt([0, 2, 3], again, {1, 2}, results, why)
    assert still == [2]
    assert why == [None, "down", "still down", "rejected"]
    assert results[0].delivered and results[1].reason == "down"


def test_records_whose_sender_stopped_waiting_are_not_sent_again() -> None:
    owners = [Member(_record(n), _converted(_record(n)), _delivery(n, waiting=n != 1))
              for n in range(3)]
    why: list[str | None] = ["down"] * 3
    assert still_awaited([0, 1, 2], owners, why) == [0, 2]
    assert why == ["down", ABANDONED, "down"]


@pytest.mark.parametrize(("why", "last", "reason"), [
    ("no reply within 1 s", Outcome.failed("no reply within 1 s", False), reasons.NO_REPLY),
    ("too big", Outcome.oversize(10, 5), reasons.TOO_LARGE),
    ("refused", Outcome.failed("refused", False), reasons.UNDELIVERABLE),
])
def test_a_record_given_up_marks_its_member_with_the_reason(
        why: str, last: Outcome, reason: str) -> None:
    members = [_message(n).members[0] for n in range(3)]
    sent = _sent(*members)
    results = [Outcome.failed("first")] * 3
    give_up(sent, [0, 1, 2], [None, why, ABANDONED],
            [Outcome.ok(), last, Outcome.failed("gone")], results)
    assert [m.reason for m in members] == [None, reason, None]
    assert list(members[1].failures) == [f"events: {why}"]
    assert results[0].delivered and results[1] is last


# -- dead-letter writes ------------------------------------------------------------------------

def _letter(n: int, withheld: bool = False) -> Letter:
    letter = Letter(_whole(n), _record(n), reasons.UNMATCHED, "no definition", None)
    letter.withheld = withheld
    return letter


def test_a_round_of_dead_letters_sorts_written_too_large_and_permanent() -> None:
    letters = [_letter(0), _letter(1), _letter(2), _letter(3, withheld=True), _letter(4)]
    round_ = sort_letters(
        letters, [None, "too big", "forbidden", "too big", "down"],
        [None, Outcome.oversize(9, 5), Outcome.failed("forbidden", False),
         Outcome.oversize(9, 5), Outcome.failed("down")])
    assert round_.written == letters[:1]
    assert round_.remaining == letters[1:]
    assert round_.too_large == [(letters[1], "too big")]
    # Refused for its size without its body already: nothing left to leave out.
    assert round_.permanent == "forbidden"
    again = sort_letters(letters[3:4], ["too big"], [Outcome.oversize(9, 5)])
    assert (again.too_large, again.permanent) == ([], "too big")


# -- settlement, in order ----------------------------------------------------------------------

def test_messages_are_settled_in_their_order_each_by_what_became_of_it() -> None:
    messages = [_message(n) for n in range(4)]
    result = verdicts(messages, unwritten={messages[1]}, dropped={messages[2]: "unmatched",
                                                                  messages[1]: "unmatched"})
    assert result == [ACK, REDELIVER, Verdict(False, "unmatched", False), ACK]
    assert REDELIVER.retry and not REDELIVER.ack


# -- request-reply -----------------------------------------------------------------------------

def test_each_waiting_sender_gets_the_first_answer_for_one_of_its_events() -> None:
    asks = _message(1, members=2, answer=True)
    silent = _message(2)  # its sender waits for nothing
    failed = _whole(3)
    failed.delivery.answer = _answer
    first, second = asks.members
    one, other = _sent(first, second), _sent(silent.members[0], second)
    one.replies = {1: Outcome(True, reply=_record(10))}
    other.replies = {0: Outcome(True, reply=_record(11)), 1: Outcome(True, reply=_record(12))}
    told = answers(Batch([asks, silent, failed], [one, other], 0.0))
    assert [(m, o.reply if o else None, why) for m, o, why in told] == [
        (asks, _record(10), ""), (failed, None, reasons.UNMATCHED)]


def _member(reason: str | None, *failures: str) -> Member:
    member = Member(NativeMessage("HTTP", {}), None)  # type: ignore[arg-type]
    member.reason = reason
    for failure in failures:
        member.fail(failure)
    return member


@pytest.mark.parametrize(("member", "why"), [
    (None, "no answer"),
    (_member("no-reply", "svc: no reply within 1 s"), "no reply within 1 s"),
    (_member("no-reply", "svc: no reply within 2 s: the service is busy"),
     "no reply within 2 s: the service is busy"),
    (_member("no-reply", "svc: refused", "svc: no reply within 1 s"), "no reply within 1 s"),
    (_member("undeliverable", "svc: no reply within 1 s", "svc: refused"), "undeliverable"),
    (_member("undeliverable", "svc: ConnectionError: reset by peer"), "undeliverable"),
    (_member("undeliverable", "svc: RenderFailed: no subject"), "undeliverable"),
    (_member("unmatched"), "unmatched"),
    (_member("invalid-data"), "invalid-data"),
    (_member(None), "unmatched"),
    (_member(None, "svc: refused"), "failed"),  # failures, but no reason recorded
])
def test_why_a_sender_got_no_answer(member: Member | None, why: str) -> None:
    assert why_unanswered(member) == why


# -- slices of one read ------------------------------------------------------------------------

def test_a_later_slice_extends_the_batch_per_output_in_order() -> None:
    a, b = _message(1), _message(2)
    batch = Batch([a], [_sent(a.members[0])], 1.0)
    batch.extend(Batch([b], [_sent(b.members[0])], 2.0))
    assert batch.messages == [a, b] and batch.started == 1.0
    assert batch.sent[0].owners == [a.members[0], b.members[0]]
    assert batch.deliveries() == [a.delivery, b.delivery]


def test_a_written_member_has_every_slot_of_a_member_set_as_a_new_member_has_it() -> None:
    """`WrittenMember.__init__` writes `Member`'s state itself (the fused path's hot
    loop): a slot added to `Member` must be set there too."""
    record = NativeMessage("KAFKA", {"topic": "t"})
    written = WrittenMember(record, MatchResult("matched"), None,  # type: ignore[arg-type]
                            None, None, "xid")  # type: ignore[arg-type]
    plain = Member(record, None, None)  # type: ignore[arg-type]
    for name in Member.__slots__:
        if name == "conversion":  # a property of the written member: made when read
            continue
        assert hasattr(written, name), name
        if name != "definition":
            assert getattr(written, name) == getattr(plain, name), name
    assert written.definition == "xid"
