"""Reply definitions without brokers (gateway/runtime/reply.py `ReplyDefinitions`,
`Replies`): an answer judged by the route's reply definitions with the core's matcher,
rendered for the sender by the definition of the sender's protocol paired with the one
that matched (HTTP status and headers, MQTT 5 user properties, NATS headers); a
non-conforming answer dead-lettered as `nonconforming-reply` while the sender is told of
a failure; problem CloudEvents for senders without a status (`reply_errors: problem`);
an HTTP CloudEvents batch answered member by member; the config options that name them.
tests/integration/test_request_reply.py runs the same on real brokers."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from adapters.memory import MemoryConsumer, MemoryProducer
from gateway.cloudevents.bindings import decode, decode_batch, encode
from gateway.cloudevents.event import CloudEvent
from gateway.config import load_config_text
from gateway.convert import Converter
from gateway.deadletter.format import deadletter_metadata, original_record
from gateway.definitions import read_document
from gateway.observability.metrics import Metrics
from gateway.policies.reply import ReplyErrors
from gateway.ports import Delivery
from gateway.record import NativeMessage
from gateway.runtime.reply import (
    ANSWER_TYPE,
    PROBLEM_TYPE,
    ReplyDefinitions,
    answer_event,
    problem_event,
)
from gateway.runtime.route import Output, Route
from tests.unit.runtime.test_reply import Service

BASE = "/messagegroups/replies/messages/quote"

#: The requests (HTTP, NATS, MQTT 5) and the replies: `quote` says what a quote is (a
#: CloudEvent of type t.quote), its overlays per protocol how a sender of that protocol
#: gets one; `quote.nats` is what a NATS service that labels its answers sends.
DOC: dict[str, Any] = {"messagegroups": {
    "asks": {"envelope": "CloudEvents/1.0", "messages": {
        "ask": {"protocol": "HTTP", "protocoloptions": {"path": {"value": "/ask"}},
                "envelope": "CloudEvents/1.0", "envelopemetadata": {
                    "type": {"value": "t.ask"}, "source": {"value": "/s"}}},
        "ask.nats": {"protocol": "NATS", "protocoloptions": {"subject": {"value": "ask"}},
                     "envelope": "CloudEvents/1.0", "envelopemetadata": {
                         "type": {"value": "t.ask"}, "source": {"value": "/s"}}},
    }},
    "replies": {"envelope": "CloudEvents/1.0", "messages": {
        "quote": {"envelope": "CloudEvents/1.0", "envelopemetadata": {
            "type": {"value": "t.quote"}, "source": {"value": "/svc/{item}"},
            "correlationid": {"type": "string"}}},
        "quote.http": {"basemessage": BASE, "protocol": "HTTP", "protocoloptions": {
            "status": "201", "headers": [{"name": "x-quote", "value": "{item}"}]}},
        "quote.mqtt": {"basemessage": BASE, "protocol": "MQTT/5.0", "protocoloptions": {
            "user_properties": [{"name": "kind", "value": "quote"}]}},
        "quote.nats": {"basemessage": BASE, "protocol": "NATS", "protocoloptions": {
            "headers": [{"name": "x-kind", "value": "quote"}]}},
    }},
    "natives": {"messages": {
        "ok": {"protocol": "NATS", "protocoloptions": {
            "headers": [{"name": "x-result", "value": "ok"}]}},
    }},
}}
CATALOG = read_document(DOC, "d.json")
REPLIES = [m for m in CATALOG.messages() if m.group_id == "replies"]


def _quote(item: str = "tea", **headers: str) -> NativeMessage:
    """A service's answer: a binary CloudEvent on NATS (plus `headers`)."""
    event = CloudEvent.create({"specversion": "1.0", "id": "a1", "type": "t.quote",
                               "source": f"/svc/{item}", "correlationid": "tok",
                               "datacontenttype": "application/json"}, {"price": 42})
    record = encode(event, "NATS", "binary")
    extra = [{"name": k.replace("_", "-"), "value": v} for k, v in headers.items()]
    pairs = record.fields.get("headers")
    assert isinstance(pairs, list)
    return record.replace_fields({**record.fields, "headers": [*pairs, *extra]})


NONCONFORMING = NativeMessage("NATS", {"subject": "_INBOX.x", "headers": [
    {"name": "content-type", "value": "application/json"}]}, data={"error": "boom"})


# -- judging and rendering -------------------------------------------------------------------

def test_an_answer_is_judged_by_the_core_matcher_and_the_most_specific_definition_wins():
    rules = ReplyDefinitions(REPLIES)
    judged = rules.judge(_quote())
    assert judged.conversion is not None
    assert judged.conversion.match.definition is not None
    assert judged.conversion.match.definition.message_id == "quote"
    labelled = rules.judge(_quote(x_kind="quote")).conversion
    assert labelled is not None and labelled.match.definition is not None
    assert labelled.match.definition.message_id == "quote.nats"


def test_a_nonconforming_answer_is_refused_with_the_matchers_explanation():
    judged = ReplyDefinitions(REPLIES).judge(NONCONFORMING)
    assert judged.conversion is None
    assert judged.detail.startswith("the service's answer conforms to no reply definition")
    assert "unmatched" in judged.detail
    assert any("x-kind" in e.failure for e in judged.explain)


def test_the_sender_definition_is_paired_by_basemessage_or_by_type():
    rules = ReplyDefinitions(REPLIES)
    quote = next(m for m in REPLIES if m.message_id == "quote")
    nats = next(m for m in REPLIES if m.message_id == "quote.nats")
    assert rules.paired(quote, "HTTP") is not None
    assert [rules.paired(d, "HTTP").message_id for d in (quote, nats)] == [  # type: ignore[union-attr]
        "quote.http", "quote.http"]
    assert rules.paired(nats, "NATS") is nats  # the matched one, when of the sender's family
    assert rules.paired(quote, "KAFKA") is None
    # Without a shared base: the same literal CloudEvents type pairs them.
    typed = read_document({"messagegroups": {"r": {"envelope": "CloudEvents/1.0",
                                                   "messages": {
        "q": {"envelope": "CloudEvents/1.0", "envelopemetadata": {
            "type": {"value": "t.quote"}, "source": {"value": "/s"}}},
        "q.mqtt": {"envelope": "CloudEvents/1.0", "protocol": "MQTT/5.0",
                   "envelopemetadata": {"type": {"value": "t.quote"},
                                        "source": {"value": "/s"}}}}}}}, "t.json")
    defs = list(typed.messages())
    assert ReplyDefinitions(defs).paired(defs[0], "MQTT/5.0") is defs[1]


def test_a_conforming_answer_gets_the_http_status_and_headers_of_its_http_definition():
    rules = ReplyDefinitions(REPLIES)
    answer = _quote("cake")
    conversion = rules.judge(answer).conversion
    assert conversion is not None
    reply = rules.render(answer, conversion, "HTTP")
    assert isinstance(reply, NativeMessage) and reply.protocol == "HTTP"
    assert reply.get("status") == "201"
    assert reply.header("x-quote") == "cake"  # filled from the answer's own source
    assert reply.header("ce-correlationid") == "tok"  # the CloudEvent survives the hop
    assert json.loads(reply.body_bytes()) == {"price": 42}


def test_mqtt_and_nats_senders_get_their_definitions_properties_and_headers():
    rules = ReplyDefinitions(REPLIES)
    answer = _quote()
    conversion = rules.judge(answer).conversion
    assert conversion is not None
    mqtt = rules.render(answer, conversion, "MQTT/5.0")
    assert isinstance(mqtt, NativeMessage)
    assert ("kind", "quote") in mqtt.pairs("user_properties")
    assert ("type", "t.quote") in mqtt.pairs("user_properties")
    nats = rules.render(answer, conversion, "NATS")
    assert isinstance(nats, NativeMessage) and nats.metadata("x-kind") == "quote"
    assert "subject" not in nats.fields  # the answer hook addresses it


def test_an_http_service_status_does_not_pass_without_a_definition_saying_so():
    """A 2xx of an HTTP egress call is the service's, not the sender's: without a paired
    definition the sender gets the ingress default (200)."""
    answer = NativeMessage("HTTP", {"status": "202", "headers": [
        {"name": "content-type", "value": "application/json"},
        {"name": "x-result", "value": "ok"}]}, data={"ok": True})
    rules = ReplyDefinitions([m for m in CATALOG.messages() if m.group_id == "natives"])
    assert rules.judge(answer).conversion is None  # a NATS definition takes no HTTP answer
    native = NativeMessage("NATS", {"subject": "x", "headers": [
        {"name": "x-result", "value": "ok"}]}, data={"ok": True})
    conversion = rules.judge(native).conversion
    assert conversion is not None  # no envelope: the match is what conforms
    reply = rules.render(native, conversion, "HTTP")
    assert isinstance(reply, NativeMessage) and reply.get("status") is None
    assert reply.protocol == "HTTP"  # a native answer, carried into the sender's protocol
    assert reply.data == {"ok": True}


def test_without_definitions_the_status_of_an_http_service_is_not_the_senders():
    answer = NativeMessage("HTTP", {"status": "202", "headers": [
        {"name": "content-type", "value": "application/json"},
        {"name": "x-result", "value": "ok"}]}, data={"ok": True})
    told, _, _ = _run(Service(answer), _http(), definitions=False)
    [(reply, why)] = told
    assert reply is not None and why == "" and reply.data == {"ok": True}
    assert reply.get("status") is None  # the ingress answers its default (200)
    # only the status is dropped: the headers are the answer's
    assert reply.pairs("headers") == [("content-type", "application/json"),
                                      ("x-result", "ok")]


def test_the_overlay_of_the_matched_definition_renders_not_another_of_its_type():
    """An HTTP definition of the same CloudEvents type declared first (`legacy.http`)
    does not render the answer `quote` accepted: its own overlay does."""
    doc = read_document({"messagegroups": {"r": {"envelope": "CloudEvents/1.0",
                                                 "messages": {
        "legacy.http": {"envelope": "CloudEvents/1.0", "protocol": "HTTP",
                        "envelopemetadata": {"type": {"value": "t.quote"},
                                             "source": {"value": "/old/{item}"}},
                        "protocoloptions": {"status": "200"}},
        "quote": {"envelope": "CloudEvents/1.0", "envelopemetadata": {
            "type": {"value": "t.quote"}, "source": {"value": "/svc/{item}"}}},
        "quote.http": {"basemessage": "/messagegroups/r/messages/quote", "protocol": "HTTP",
                       "protocoloptions": {"status": "201"}},
    }}}}, "o.json")
    defs = {m.message_id: m for m in doc.messages()}
    rules = ReplyDefinitions(list(defs.values()))
    assert rules.paired(defs["quote"], "HTTP") is defs["quote.http"]
    conversion = rules.judge(_quote()).conversion
    assert conversion is not None and conversion.match.definition is defs["quote"]
    reply = rules.render(_quote(), conversion, "HTTP")
    assert isinstance(reply, NativeMessage) and reply.get("status") == "201"


def test_a_sender_definitions_header_replaces_the_answers_and_its_address_is_not_taken():
    """The HTTP overlay declares a content type (named in another case than the
    answer's) and a path: the sender gets one content-type header, the definition's;
    the path is the request's, not the definition's (the answer hook addresses it)."""
    reply = _sender_answer("HTTP", {"path": "/answers/{item}", "headers": [
        {"name": "Content-Type", "value": "application/vnd.quote+json"}]})
    assert [v for n, v in reply.pairs("headers") if n.lower() == "content-type"] == [
        "application/vnd.quote+json"]
    assert reply.get("path") is None


def test_a_sender_definition_that_cannot_be_filled_is_a_refusal_not_a_crash():
    broken = read_document({"messagegroups": {"r": {"envelope": "CloudEvents/1.0",
                                                    "messages": {
        "q": {"envelope": "CloudEvents/1.0", "envelopemetadata": {
            "type": {"value": "t.quote"}, "source": {"value": "/svc/{item}"}}},
        "q.http": {"basemessage": "/messagegroups/r/messages/q", "protocol": "HTTP",
                   "protocoloptions": {"headers": [{"name": "x", "value": "{nowhere}"}]}},
    }}}}, "b.json")
    rules = ReplyDefinitions(list(broken.messages()))
    conversion = rules.judge(_quote()).conversion
    assert conversion is not None
    why = rules.render(_quote(), conversion, "HTTP")
    assert isinstance(why, str) and "nowhere" in why
    # On a route: the sender is told of a failure, the answer dead-lettered as the
    # service's, on the output it came from.
    told, dlq, metrics = _run(Service(_quote()), _http(), rules=rules)
    assert told == [(None, "the service's answer conforms to no reply definition")]
    [letter] = dlq.written
    meta = deadletter_metadata(letter)
    assert meta["xrgw-reason"] == "nonconforming-reply"
    assert meta["xrgw-source-endpoint"] == "svc"
    assert "nowhere" in meta["xrgw-detail"] and meta["xrgw-detail"].endswith("(on svc)")
    assert _count(metrics, "nonconforming") == 1


def _sender_answer(protocol: str, options: dict[str, Any]) -> NativeMessage:
    """`_quote()` rendered for a sender of `protocol` whose reply definition (a CloudEvents
    definition and its overlay for that protocol) declares the protocol `options`."""
    doc = read_document({"messagegroups": {"r": {"envelope": "CloudEvents/1.0",
                                                 "messages": {
        "quote": {"envelope": "CloudEvents/1.0", "envelopemetadata": {
            "type": {"value": "t.quote"}, "source": {"value": "/svc/{item}"}}},
        "quote.sender": {"basemessage": "/messagegroups/r/messages/quote",
                         "protocol": protocol, "protocoloptions": options},
    }}}}, "s.json")
    assert not doc.problems
    rules = ReplyDefinitions(list(doc.messages()))
    conversion = rules.judge(_quote()).conversion
    assert conversion is not None
    reply = rules.render(_quote(), conversion, protocol)
    assert isinstance(reply, NativeMessage)
    return reply


def test_an_amqp_senders_application_property_is_added_to_the_answers_attributes():
    """A section (AMQP application properties) declared by the sender's definition is
    merged by name: the CloudEvent's attributes stay beside the definition's property
    (the whole section used to be replaced, dropping the answer's id and correlation)."""
    reply = _sender_answer("AMQP/1.0",
                           {"application-properties": {"shop": {"value": "{item}-shop"}}})
    props = reply.get("application-properties")
    assert isinstance(props, dict) and props["shop"] == "tea-shop"
    assert (props["cloudEvents_id"], props["cloudEvents_correlationid"]) == ("a1", "tok")
    event = decode(reply)
    assert event is not None and event.get("correlationid") == "tok"


def test_an_amqp_senders_properties_apply_but_its_address_member_does_not():
    """AMQP's address is one member of the properties section (`subject`): a sender's
    definition that declares properties gets its other members (here `group-id`) on the
    answer, and the answer's subject stays the answer's own (the whole section used to be
    skipped as "the address")."""
    reply = _sender_answer("AMQP/1.0", {
        "properties": {"subject": {"value": "quotes/{item}", "type": "uritemplate"},
                       "group-id": {"value": "{item}-group"}},
        "application-properties": {"shop": {"value": "{item}-shop"},
                                   "subject": {"value": "{item}"}}})
    properties = reply.get("properties")
    assert isinstance(properties, dict) and properties.get("group-id") == "tea-group"
    assert properties.get("subject") != "quotes/tea"
    application = reply.get("application-properties")
    assert isinstance(application, dict) and application["shop"] == "tea-shop"
    assert application["subject"] == "tea"  # a member of another section, not the address


def test_an_answer_without_the_entries_the_sender_definition_declares_gets_them():
    """A native answer without a content type becomes an MQTT 5 / AMQP record with no
    user properties / application properties at all: the sender's definition's entries
    are the whole list / section."""
    doc = read_document({"messagegroups": {"r": {"messages": {
        "done": {"protocol": "NATS"},
        "done.mqtt": {"basemessage": "/messagegroups/r/messages/done",
                      "protocol": "MQTT/5.0", "protocoloptions": {
                          "user_properties": [{"name": "result", "value": "done"}]}},
        "done.amqp": {"basemessage": "/messagegroups/r/messages/done",
                      "protocol": "AMQP/1.0", "protocoloptions": {
                          "application-properties": {"result": {"value": "done"}}}},
    }}}}, "e.json")
    rules = ReplyDefinitions(list(doc.messages()))
    answer = NativeMessage("NATS", {"subject": "_INBOX.x"}, payload=b"ok")
    conversion = rules.judge(answer).conversion
    assert conversion is not None
    mqtt = rules.render(answer, conversion, "MQTT/5.0")
    assert isinstance(mqtt, NativeMessage) and mqtt.body_bytes() == b"ok"
    assert mqtt.pairs("user_properties") == [("result", "done")]
    amqp = rules.render(answer, conversion, "AMQP/1.0")
    assert isinstance(amqp, NativeMessage) and amqp.body_bytes() == b"ok"
    assert amqp.get("application-properties") == {"result": "done"}


def _beside_type_only_options() -> list[tuple[str, str]]:
    """The MQTT 5 user properties a sender gets from a definition that declares three
    options by type only (nothing to render) beside its user property."""
    reply = _sender_answer("MQTT/5.0", {
        "content_type": {"type": "string"},
        "message_expiry_interval": {"type": "integer"},
        "response_topic": {"type": "string"},
        "user_properties": [{"name": "kind", "value": "quote"}]})
    return [p for p in reply.pairs("user_properties") if p[0] == "kind"]


def test_an_option_declared_by_type_only_does_not_hide_the_others():
    """Options with nothing to render are passed over, whatever order the definition's
    options are taken in: that order follows the string hash seed, so the render runs
    under a few fixed seeds too."""
    assert _beside_type_only_options() == [("kind", "quote")]
    root = Path(__file__).parents[3]
    code = ("from tests.unit.runtime.test_reply_definitions import "
            "_beside_type_only_options as f; print(f())")
    for seed in ("0", "1", "2", "3"):
        ran = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True,
                             text=True, env={**os.environ, "PYTHONHASHSEED": seed},
                             check=False)
        assert (ran.returncode, ran.stdout.strip()) == (0, "[('kind', 'quote')]"), ran.stderr


def test_problem_and_wrapped_answer_events():
    problem = problem_event("no reply within 2 s", "/xrgw/endpoints/svc")
    assert (problem.get("type"), problem.get("datacontenttype")) == (
        PROBLEM_TYPE, "application/problem+json")
    assert problem.data == {"type": "about:blank", "title": "Gateway Timeout",
                            "status": 504, "detail": "no reply within 2 s"}
    assert problem_event("unmatched", "/s").data["status"] == 502  # type: ignore[index]
    wrapped = answer_event(NativeMessage("NATS", {"headers": [
        {"name": "content-type", "value": "text/plain"}]}, payload=b"42"), "/s")
    assert (wrapped.get("type"), wrapped.get("datacontenttype"), wrapped.data) == (
        ANSWER_TYPE, "text/plain", b"42")
    assert answer_event(_quote(), "/s").get("id") == "a1"  # a CloudEvent stays itself


# -- the route ---------------------------------------------------------------------------------

def _run(service: Service, *asks: NativeMessage, errors: ReplyErrors = "none",
         definitions: bool = True, rules: ReplyDefinitions | None = None,
         unreachable: bool = False
         ) -> tuple[list[tuple[NativeMessage | None, str]], MemoryProducer, Metrics]:
    """Run a reply route over `asks` (`rules`: other reply definitions than REPLIES;
    `unreachable`: every sender is gone when its answer is handed to it)."""
    told: list[tuple[NativeMessage | None, str]] = []

    class Asking(MemoryConsumer):
        async def read_batch(self, limit: int) -> list[Delivery]:
            batch = await super().read_batch(limit)
            for delivery in batch:
                async def answer(reply: NativeMessage | None, why: str) -> None:
                    told.append((reply, why))
                    if unreachable:
                        raise ConnectionResetError("the sender hung up")
                delivery.answer = answer
            return batch

    dlq, metrics = MemoryProducer(), Metrics()
    route = Route("r", "in", Asking(list(asks), close_when_empty=True),
                  Converter([m for m in CATALOG.messages() if m.group_id == "asks"]),
                  [Output("svc", "NATS", service, defaults={"subject": "svc"})],
                  deadletter=Output("dlq", "KAFKA", dlq, defaults={"topic": "d"}),
                  metrics=metrics, reply_timeout=1.0,
                  reply_definitions=(rules if rules is not None else
                                     ReplyDefinitions(REPLIES) if definitions else None),
                  reply_errors=errors)

    async def scenario() -> None:
        await route.start()
        await route.wait_finished()
        await route.stop(grace=1.0)

    asyncio.run(scenario())
    return told, dlq, metrics


def _http(n: int = 1) -> NativeMessage:
    return NativeMessage("HTTP", {"method": "POST", "path": "/ask"}, data={"n": n})


def _nats(n: int = 1) -> NativeMessage:
    return NativeMessage("NATS", {"subject": "ask"}, data={"n": n})


def _count(metrics: Metrics, result: str) -> float:
    return metrics.registry.get_sample_value(
        "xrgw_replies_total", {"route": "r", "result": result}) or 0.0


def test_the_route_renders_a_conforming_answer_and_dead_letters_a_nonconforming_one():
    told, dlq, metrics = _run(Service(_quote("jam"), NONCONFORMING), _http(1), _http(2))
    (good, why), (bad, bad_why) = told
    assert good is not None and why == "" and good.get("status") == "201"
    assert good.header("x-quote") == "jam"
    assert bad is None and bad_why == "the service's answer conforms to no reply definition"
    [letter] = dlq.written
    meta = deadletter_metadata(letter)
    assert meta["xrgw-reason"] == "nonconforming-reply"
    assert meta["xrgw-source-endpoint"] == "svc"
    assert "x-kind" in meta["xrgw-explain"]
    assert original_record(letter) == NONCONFORMING  # the answer, as it came
    assert (_count(metrics, "answered"), _count(metrics, "nonconforming")) == (1, 1)
    assert metrics.registry.get_sample_value(
        "xrgw_messages_deadlettered_total", {"reason": "nonconforming-reply"}) == 1


def test_without_reply_definitions_any_answer_passes_as_before():
    told, dlq, _ = _run(Service(NONCONFORMING), _http(), definitions=False)
    [(reply, why)] = told
    assert reply is not None and reply.data == {"error": "boom"} and why == ""
    assert reply.get("status") is None and not dlq.written


@pytest.mark.parametrize("errors", ["none", "problem"])
def test_a_sender_without_a_status_gets_a_problem_cloudevent_only_when_asked(
        errors: ReplyErrors):
    told, dlq, _ = _run(Service(None, NONCONFORMING), _nats(1), _nats(2), errors=errors)
    if errors == "none":
        assert told == [(None, "no reply within 1 s"),
                        (None, "the service's answer conforms to no reply definition")]
        return
    events = []
    for reply, why in told:
        assert reply is not None and reply.protocol == "NATS" and why == ""
        event = decode(reply)
        assert event is not None and event.get("type") == PROBLEM_TYPE
        events.append(event.data)
    assert [(e["status"], e["detail"]) for e in events] == [  # type: ignore[index]
        (504, "no reply within 1 s"),
        (502, "the service's answer conforms to no reply definition")]
    assert sorted(deadletter_metadata(d)["xrgw-reason"] for d in dlq.written) == [
        "no-reply", "nonconforming-reply"]


def test_an_http_sender_is_told_by_its_status_whatever_reply_errors_says():
    told, _, _ = _run(Service(None), _http(), errors="problem")
    assert told == [(None, "no reply within 1 s")]  # the adapter answers 504


def _batch(*items: str) -> NativeMessage:
    members = [{"specversion": "1.0", "id": f"m{n}", "type": "t.ask", "source": "/s",
                "data": {"item": item}} for n, item in enumerate(items)]
    return NativeMessage("HTTP", {"method": "POST", "path": "/ask", "headers": [
        {"name": "content-type", "value": "application/cloudevents-batch+json"}]},
        data=members)  # type: ignore[arg-type]


def test_an_http_batch_is_answered_with_a_batch_one_event_per_member_in_order():
    told, dlq, metrics = _run(Service(_quote("a"), None, NONCONFORMING),
                              _batch("a", "b", "c"))
    [(reply, why)] = told
    assert reply is not None and why == ""
    assert str(reply.header("content-type")).startswith("application/cloudevents-batch+json")
    events = decode_batch(reply)
    assert [e.get("type") for e in events] == ["t.quote", PROBLEM_TYPE, PROBLEM_TYPE]
    assert events[0].get("correlationid") == "tok"
    assert [e.data["status"] for e in events[1:]] == [504, 502]  # type: ignore[index]
    assert sorted(deadletter_metadata(d)["xrgw-reason"] for d in dlq.written) == [
        "no-reply", "nonconforming-reply"]
    [bad] = [meta for meta in map(deadletter_metadata, dlq.written)
             if meta["xrgw-reason"] == "nonconforming-reply"]
    assert bad["xrgw-source-endpoint"] == "svc" and bad["xrgw-detail"].endswith("(on svc)")
    assert "x-kind" in bad["xrgw-explain"]  # the matcher's nearest definitions, as alone
    assert [_count(metrics, r) for r in ("answered", "no-reply", "nonconforming")] == [1, 1, 1]


def test_a_batch_members_answer_a_definition_without_an_envelope_accepts_is_wrapped():
    """`natives/ok` (no envelope) makes no CloudEvent of the answers it accepts: each is
    wrapped as an answer event; the member whose answer it refuses gets a problem, and
    the metric counts each member by what it got."""
    ok = NativeMessage("NATS", {"subject": "x", "headers": [
        {"name": "x-result", "value": "ok"}]}, data={"price": 1})
    rules = ReplyDefinitions([m for m in CATALOG.messages() if m.group_id == "natives"])
    told, dlq, metrics = _run(Service(ok, ok, NONCONFORMING), _batch("a", "b", "c"),
                              rules=rules)
    [(reply, why)] = told
    assert reply is not None and why == ""
    events = decode_batch(reply)
    assert [(e.get("type"), e.get("source")) for e in events[:2]] == [
        (ANSWER_TYPE, "/xrgw/endpoints/svc")] * 2
    assert [e.data for e in events[:2]] == [{"price": 1}] * 2
    assert (events[2].get("type"), events[2].data["status"]) == (  # type: ignore[index]
        PROBLEM_TYPE, 502)
    assert [deadletter_metadata(d)["xrgw-reason"] for d in dlq.written] == [
        "nonconforming-reply"]
    assert [_count(metrics, r) for r in ("answered", "nonconforming")] == [2, 1]


def test_a_batch_answer_the_sender_cannot_take_counts_every_member_as_failed():
    told, _, metrics = _run(Service(_quote("a"), None), _batch("a", "b"), unreachable=True)
    assert len(told) == 1
    assert [_count(metrics, r) for r in ("failed", "answered", "no-reply")] == [2, 0, 0]


def test_a_batch_of_native_answers_without_definitions_wraps_each_answer():
    plain = NativeMessage("NATS", {"subject": "x"}, data={"price": 1})
    told, _, _ = _run(Service(plain, plain), _batch("a", "b"), definitions=False)
    [(reply, _)] = told
    assert reply is not None
    events = decode_batch(reply)
    assert [(e.get("type"), e.data) for e in events] == [(ANSWER_TYPE, {"price": 1})] * 2


def test_an_empty_batch_gets_an_empty_batch():
    told, _, _ = _run(Service(), _batch())
    [(reply, _)] = told
    assert reply is not None and decode_batch(reply) == []


# -- the route options ------------------------------------------------------------------------

DEFS = {"endpoints": {
    "http-in": {"usage": ["consumer"], "protocol": "HTTP",
                "protocoloptions": {"endpoints": [{"uri": "http://127.0.0.1:8080"}]},
                "messagegroups": ["#/messagegroups/asks"]},
    "nats-out": {"usage": ["producer"], "protocol": "NATS",
                 "protocoloptions": {"endpoints": [{"uri": "nats://127.0.0.1:4222"}],
                                     "subject": "svc"}},
}, **DOC}


def _load(tmp_path: Path, route: str) -> tuple[Any, list[tuple[str, str]]]:
    (tmp_path / "d.json").write_text(json.dumps(DEFS))
    text = f"definitions: [d.json]\ndeadletter: log\nroutes:\n  - {route}\n"
    config, problems = load_config_text(text, "gw.yaml", tmp_path)
    return config, [(p.path, p.message) for p in problems if p.severity == "error"]


def test_reply_definitions_name_groups_and_definitions(tmp_path: Path):
    config, errors = _load(tmp_path, "{from: http-in, to: [nats-out], reply: true, "
                                     "reply_definitions: [replies, natives/ok, "
                                     "/messagegroups/replies/messages/quote], "
                                     "reply_errors: problem}")
    assert not errors
    route = config.routes[0]
    assert [m.message_id for m in route.reply_messages] == [
        "quote", "quote.http", "quote.mqtt", "quote.nats", "ok"]  # each once, in order
    assert route.reply_errors == "problem"
    config, _ = _load(tmp_path, "{from: http-in, to: [nats-out], reply: true}")
    assert config.routes[0].reply_messages == () and config.routes[0].reply_errors == "none"


def test_reply_definitions_that_name_nothing_or_without_reply_are_errors(tmp_path: Path):
    _, errors = _load(tmp_path, "{from: http-in, to: [nats-out], reply: true, "
                                "reply_definitions: [replys]}")
    [(path, message)] = errors
    assert path == "$.routes[0].reply_definitions[0]"
    assert "no message group or definition 'replys'" in message
    _, errors = _load(tmp_path, "{from: http-in, to: [nats-out], "
                                "reply_definitions: [replies]}")
    [(path, message)] = errors
    assert path == "$.routes[0].reply_definitions" and "reply: true" in message
    _, errors = _load(tmp_path, "{from: http-in, to: [nats-out], reply: true, "
                                "reply_errors: loud}")
    assert any(p == "$.routes[0].reply_errors" for p, _ in errors)


def test_the_daemon_gives_a_reply_route_its_definitions_and_errors(tmp_path: Path):
    from gateway.daemon import Gateway

    class Factory:
        def consumer(self, endpoint: Any) -> MemoryConsumer:
            return MemoryConsumer()

        def producer(self, endpoint: Any) -> Service:
            return Service()

        def output_defaults(self, endpoint: Any) -> dict[str, Any]:
            return {}

    for route_text, count, errors in (
            ("{from: http-in, to: [nats-out], reply: true, reply_definitions: [replies], "
             "reply_errors: problem}", 4, "problem"),
            ("{from: http-in, to: [nats-out], reply: true}", None, "none")):
        config, problems = _load(tmp_path, route_text)
        assert not problems
        [route] = Gateway(config, Factory())._build_routes(config)
        replies = route.replies
        assert replies is not None and replies.errors == errors
        got = replies.definitions
        assert (None if got is None else len(got.definitions)) == count


def test_the_catalog_in_the_request_reply_doc_works_as_it_says():
    """docs/request-reply.md's reply-definition example: loads without problems, a
    CloudEvents answer from a NATS service conforms, and an HTTP sender gets 201 with
    the X-Quote header filled from the answer's source."""
    text = (Path(__file__).parents[3] / "docs" / "request-reply.md").read_text()
    block = text.split("```json\n", 1)[1].split("```", 1)[0]
    catalog = read_document(json.loads(block), "request-reply.md")
    assert not catalog.problems
    rules = ReplyDefinitions(catalog.groups["quotes.replies"].messages)
    answer = encode(CloudEvent.create({
        "specversion": "1.0", "id": "1", "type": "com.example.quote.reply",
        "source": "/pricing/tea", "correlationid": "tok"}, {"price": 3}), "NATS", "binary")
    conversion = rules.judge(answer).conversion
    assert conversion is not None
    reply = rules.render(answer, conversion, "HTTP")
    assert isinstance(reply, NativeMessage)
    assert (reply.get("status"), reply.header("X-Quote", True)) == ("201", "tea")
    mqtt = rules.render(answer, conversion, "MQTT/5.0")
    assert isinstance(mqtt, NativeMessage) and ("kind", "quote") in mqtt.pairs(
        "user_properties")


def test_reply_errors_on_an_http_source_is_a_warning(tmp_path: Path):
    (tmp_path / "d.json").write_text(json.dumps(DEFS))
    text = ("definitions: [d.json]\ndeadletter: log\nroutes:\n  - {from: http-in, to: "
            "[nats-out], reply: true, reply_errors: problem}\n")
    config, problems = load_config_text(text, "gw.yaml", tmp_path)
    assert config is not None
    [warning] = [p for p in problems if p.path == "$.routes[0].reply_errors"]
    assert warning.severity == "warning" and "HTTP senders" in warning.message


def test_a_body_that_is_no_batch_is_told_why_not_answered_with_a_batch():
    broken = NativeMessage("HTTP", {"method": "POST", "path": "/ask", "headers": [
        {"name": "content-type", "value": "application/cloudevents-batch+json"}]},
        data={"not": "an array"})
    told, dlq, _ = _run(Service(), broken)
    assert told == [(None, "invalid-cloudevent")]  # the adapter answers 502
    assert deadletter_metadata(dlq.written[0])["xrgw-reason"] == "invalid-cloudevent"


def test_lint_finds_no_overlap_between_a_request_and_a_response_definition():
    """An HTTP request definition (method) and a reply definition (status) on the same
    path never accept the same message: the spec makes the two fields exclusive, so a
    witness holding both is no message (it used to be reported)."""
    from gateway.matching.lint import find_overlaps

    doc = read_document({"messagegroups": {
        "asks": {"messages": {"ask": {"protocol": "HTTP", "protocoloptions": {
            "path": "/quote/{id}", "method": "POST"}}}},
        "replies": {"messages": {"ok": {"protocol": "HTTP", "protocoloptions": {
            "status": "201"}}, "any": {"protocol": "HTTP", "protocoloptions": {
                "path": "/quote/{id}"}}}}}}, "l.json")
    pairs = {(o.first.rsplit("/", 1)[1], o.second.rsplit("/", 1)[1])
             for o in find_overlaps(list(doc.messages()))}
    assert ("ask", "ok") not in pairs
    assert ("ask", "any") in pairs  # a real overlap is still found


def test_problems_name_an_output_whose_id_is_no_uri_as_a_valid_source():
    from gateway.runtime.reply import Replies
    from gateway.runtime.stats import RouteStats

    async def dead_letter(*args: Any) -> None:
        return None

    output = Output("quotes/eu #1", "NATS", Service(), defaults={"subject": "svc"})
    replies = Replies([output], dead_letter, RouteStats("r", "in", Metrics(), None, 8,
                                                        [output]))
    told: list[NativeMessage | None] = []

    async def answer(reply: NativeMessage | None, why: str) -> None:
        told.append(reply)

    replies.errors = "problem"
    assert asyncio.run(replies._fail(answer, "NATS", "no reply within 1 s",
                                     "no-reply")) == "no-reply"
    [reply] = told
    event = decode(reply) if reply is not None else None
    # one path segment, whatever the id holds (a `/` too)
    assert event is not None and event.get("source") == "/xrgw/endpoints/quotes%2Feu%20%231"


def test_a_native_answer_with_a_broken_content_type_is_still_a_batch_member():
    odd = NativeMessage("NATS", {"headers": [
        {"name": "content-type", "value": "not a media type"}]}, payload=b"42")
    event = answer_event(odd, "/s")
    assert event.get("datacontenttype") is None and event.data == b"42"


def test_a_failure_while_shaping_an_answer_tells_the_sender_and_settles(monkeypatch):
    from gateway.runtime import reply

    def broken(*args: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr(reply, "encode_batch", broken)
    told, _, metrics = _run(Service(_quote()), _batch("a"))
    assert told == [(None, "the answer could not be handed back")]
    assert _count(metrics, "failed") == 1


def test_a_catalog_wide_base_does_not_pair_an_unrelated_reply_first():
    """Every definition derives from one `common` base: the error's HTTP overlay must
    not render a quote because it was declared first."""
    common = "/messagegroups/r/messages/common"
    doc = read_document({"messagegroups": {"r": {"envelope": "CloudEvents/1.0",
                                                 "messages": {
        "common": {"envelope": "CloudEvents/1.0", "envelopemetadata": {
            "source": {"value": "/svc"}}},
        "error": {"basemessage": common, "envelopemetadata": {"type": {"value": "t.err"}}},
        "error.http": {"basemessage": "/messagegroups/r/messages/error", "protocol": "HTTP",
                       "protocoloptions": {"status": "409"}},
        "quote": {"basemessage": common, "envelopemetadata": {"type": {"value": "t.q"}}},
        "quote.http": {"basemessage": "/messagegroups/r/messages/quote", "protocol": "HTTP",
                       "protocoloptions": {"status": "201"}},
    }}}}, "c.json")
    assert not doc.problems
    defs = {m.message_id: m for m in doc.messages()}
    rules = ReplyDefinitions(list(defs.values()))
    assert rules.paired(defs["quote"], "HTTP") is defs["quote.http"]
    assert rules.paired(defs["error"], "HTTP") is defs["error.http"]


def test_a_sender_definitions_placeholders_are_filled_from_the_answers_attributes():
    """The HTTP overlay's headers name the answer's CloudEvents attributes (`{id}`,
    `{correlationid}`), which the matcher captured nothing for: the sender gets their
    values."""
    reply = _sender_answer("HTTP", {"headers": [
        {"name": "x-answer", "value": "{id}"},
        {"name": "x-correlation-id", "value": "{correlationid}"}]})
    assert (reply.header("x-answer"), reply.header("x-correlation-id")) == ("a1", "tok")


def test_a_sender_definition_with_templates_of_its_own_fills_them_from_the_event():
    """Paired by type, the MQTT definition's source template names another placeholder
    ({shop}) than the matched one's: it is filled from the answer's attributes."""
    doc = read_document({"messagegroups": {"r": {"envelope": "CloudEvents/1.0",
                                                 "messages": {
        "q": {"envelope": "CloudEvents/1.0", "envelopemetadata": {
            "type": {"value": "t.quote"}, "source": {"value": "/svc/{item}"}}},
        "q.mqtt": {"envelope": "CloudEvents/1.0", "protocol": "MQTT/5.0",
                   "envelopemetadata": {"type": {"value": "t.quote"},
                                        "source": {"value": "/svc/{shop}"}},
                   "protocoloptions": {"user_properties": [
                       {"name": "shop", "value": "{shop}"}]}}}}}}, "s.json")
    rules = ReplyDefinitions(list(doc.messages()))
    answer = _quote("tea")
    conversion = rules.judge(answer).conversion
    assert conversion is not None
    reply = rules.render(answer, conversion, "MQTT/5.0")
    assert isinstance(reply, NativeMessage) and ("shop", "tea") in reply.pairs(
        "user_properties")


def test_a_nats_request_that_matched_nothing_gets_a_problem_too():
    told, dlq, metrics = _run(Service(), NativeMessage("NATS", {"subject": "other"},
                                                       data={"n": 1}), errors="problem")
    [(reply, why)] = told
    event = decode(reply) if reply is not None else None
    assert event is not None and why == ""
    assert event.data == {"type": "about:blank", "title": "Bad Gateway", "status": 502,
                          "detail": "unmatched"}
    assert deadletter_metadata(dlq.written[0])["xrgw-reason"] == "unmatched"
    assert _count(metrics, "failed") == 1
