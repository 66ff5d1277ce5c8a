"""gateway/runtime/reply.py on its own: what a sender is handed (and the result counted for
the reply metric), how strays are told apart, and how an answer that is not a CloudEvent
(or a broken one) is carried into the sender's protocol."""

from __future__ import annotations

import asyncio

import pytest

from gateway.ports import Delivery, Outcome, no_reply
from gateway.record import NativeMessage
from gateway.runtime.reply import hand_back, native_reply, reply_record, stray_listener
from gateway.runtime.replyrecords import status_field, without_status

REQUEST = NativeMessage("HTTP", {"method": "POST", "path": "/ask"}, data={"n": 1})


async def _settle(ack: bool, reason: str, retry: bool) -> None:
    return None


class Sender:
    """The delivery's answer hook: records what the sender was told; may fail."""

    def __init__(self, fail: Exception | None = None) -> None:
        self.told: list[tuple[NativeMessage | None, str]] = []
        self.fail = fail

    async def __call__(self, reply: NativeMessage | None, why: str) -> None:
        self.told.append((reply, why))
        if self.fail is not None:
            raise self.fail


def _hand_back(sender: Sender | None, outcome: Outcome | None, why: str) -> str:
    delivery = Delivery(REQUEST, _settle, answer=sender)
    return asyncio.run(hand_back(delivery, outcome, why))


def test_a_sender_that_awaits_nothing_is_not_answered() -> None:
    answer = NativeMessage("NATS", {"subject": "_INBOX.1"}, data={"ok": True})
    assert _hand_back(None, Outcome.answered(answer), "") == "not-awaited"
    assert _hand_back(None, None, "no reply within 1 s") == "not-awaited"


def test_an_answer_is_handed_back_in_the_senders_protocol_with_no_reason() -> None:
    sender = Sender()
    answer = NativeMessage("NATS", {"subject": "_INBOX.1", "headers": [
        {"name": "content-type", "value": "text/plain"}]}, payload=b"42")
    assert _hand_back(sender, Outcome.answered(answer), "ignored") == "answered"
    [(reply, why)] = sender.told
    assert why == ""
    assert reply is not None and reply.protocol == "HTTP"
    assert reply.header("content-type") == "text/plain" and reply.body_bytes() == b"42"


@pytest.mark.parametrize(("outcome", "why", "result"), [
    (None, "no reply within 1 s", "no-reply"),
    (no_reply(1.0), "no reply within 1 s", "no-reply"),
    (None, "undeliverable", "failed"),
    (None, "unmatched", "failed"),
    (None, "no answer", "failed"),
    (Outcome.ok(), "no answer", "failed"),  # delivered, but the service said nothing
])
def test_a_sender_without_an_answer_is_told_why(outcome: Outcome | None, why: str,
                                                 result: str) -> None:
    sender = Sender()
    assert _hand_back(sender, outcome, why) == result
    assert sender.told == [(None, why)]


def test_an_answer_that_cannot_be_sent_counts_as_failed_and_does_not_raise() -> None:
    answer = NativeMessage("NATS", {"subject": "_INBOX.1"}, data={"ok": True})
    assert _hand_back(Sender(fail=ConnectionError("gone")), Outcome.answered(answer),
                      "") == "failed"
    assert _hand_back(Sender(fail=RuntimeError("closed")), None,
                      "no reply within 1 s") == "failed"


def test_strays_uncorrelated_ones_are_dead_lettered_the_rest_counted() -> None:
    late: list[str] = []
    dead: list[NativeMessage] = []
    listen = stray_listener(lambda: late.append("late"), dead.append)
    answers = [NativeMessage("NATS", {"subject": f"_INBOX.{n}"}, data={"n": n})
               for n in range(3)]
    listen("late", answers[0])
    listen("uncorrelated", answers[1])
    listen("unknown", answers[2])
    assert dead == [answers[1]]
    assert dead[0] is answers[1]
    assert late == ["late", "late"]


# -- answers that are not (valid) CloudEvents ------------------------------------------------

def test_a_broken_cloudevent_answer_is_passed_as_it_came() -> None:
    """A body that claims to be a structured CloudEvent but is no JSON: the sender gets
    the body and its content type, not an error."""
    answer = NativeMessage("HTTP", {"headers": [
        {"name": "Content-Type", "value": "application/cloudevents+json"}]},
        payload=b"{not json")
    reply = reply_record(answer, "NATS")
    assert reply.protocol == "NATS"
    assert reply.fields == {"headers": [
        {"name": "content-type", "value": "application/cloudevents+json"}]}
    assert reply.payload == b"{not json"


def test_an_answer_in_the_senders_protocol_is_passed_unchanged() -> None:
    answer = NativeMessage("HTTP", {"headers": [{"name": "x", "value": "y"}]}, payload=b"1")
    assert reply_record(answer, "HTTP") is answer


@pytest.mark.parametrize(("protocol", "fields"), [
    ("MQTT/5.0", {"content_type": "text/plain"}),
    ("NATS", {"headers": [{"name": "content-type", "value": "text/plain"}]}),
    ("AMQP/1.0", {"properties": [{"name": "content-type", "value": "text/plain"}]}),
    ("MQTT/3.1.1", {}),  # no place for a content type
    ("NOT-A-PROTOCOL", {}),
])
def test_a_native_answer_keeps_its_content_type_where_the_protocol_has_one(
        protocol: str, fields: dict[str, object]) -> None:
    answer = NativeMessage("HTTP", {"headers": [{"name": "Content-Type",
                                                 "value": "text/plain"}]},
                           payload=b"42", received_at="2024-01-01T00:00:00Z", raw=b"42")
    reply = native_reply(answer, protocol)
    assert (reply.protocol, reply.fields, reply.payload) == (protocol, fields, b"42")
    assert reply.received_at is None  # it is sent, not received
    assert reply.raw == b"42"


@pytest.mark.parametrize("protocol", ["MQTT/5.0", "NATS", "MQTT/3.1.1", "NOT-A-PROTOCOL"])
def test_a_native_answer_without_a_content_type_gets_none(protocol: str) -> None:
    answer = NativeMessage("HTTP", {"method": "POST"}, data={"n": 1}, raw=b'{"n":1}')
    reply = native_reply(answer, protocol)
    assert reply.fields == {}
    assert reply.data == {"n": 1} and reply.raw == b'{"n":1}'


def test_only_a_protocol_with_a_status_has_one_to_drop() -> None:
    assert status_field("HTTP") == "status"
    assert status_field("NATS") is None and status_field("NOT-A-PROTOCOL") is None
    odd = NativeMessage("NOT-A-PROTOCOL", {"status": "202"}, payload=b"1")
    assert without_status(odd) is odd
