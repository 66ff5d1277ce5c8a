"""`xrgw learn` pairs requests with their answers (by each protocol's correlation fields)
and proposes a reply definition `X.reply` next to the request's definition X, linked by
the `correlationid` attribute both declare (docs/request-reply.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gateway.cli import main
from gateway.json.values import JSON
from gateway.learn import LearnOptions, draft_document, learn
from gateway.record import NativeMessage

CT = {"name": "content-type", "value": "application/json"}


def nats_traffic(n: int = 12, answer: bool = True) -> list[NativeMessage]:
    """Requests on quote.<item>.ask with a reply subject, each answered on it (the answer
    right after its request, or all answers at the end)."""
    requests, answers = [], []
    for i in range(n):
        inbox = f"_INBOX.k{i}a9f3.{i}"
        requests.append(NativeMessage("NATS", {
            "subject": f"quote.item{i % 3}.ask", "reply-to": inbox, "headers": [CT]},
            data={"item": f"item{i % 3}"}))
        answers.append(NativeMessage("NATS", {"subject": inbox, "headers": [
            CT, {"name": "outcome", "value": "priced"}]}, data={"price": i, "currency": "EUR"}))
    if not answer:
        return requests
    return requests + answers


def mqtt_pair(i: int, correlation: str | None = None) -> list[NativeMessage]:
    client = f"client/c{i}x/answers"
    corr = correlation or f"corr-{i}"
    request = NativeMessage("MQTT/5.0", {
        "topic_name": f"plant/pump{i}/ask", "qos": 1, "response_topic": client,
        "correlation_data": corr}, data={"pump": f"pump{i}", "want": "state"})
    reply = NativeMessage("MQTT/5.0", {
        "topic_name": client, "qos": 1, "correlation_data": corr,
        "content_type": "application/json"}, data={"state": "on"})
    return [request, reply]


def kafka_pair(i: int) -> list[NativeMessage]:
    def headers(**kv: str) -> JSON:
        return [{"name": k, "value": v} for k, v in kv.items()]
    request = NativeMessage("KAFKA", {"topic": "orders", "key": f"o{i}", "headers": headers(
        kafka_replyTopic="orders-replies", kafka_correlationId=f"c{i}")}, data={"order": i})
    reply = NativeMessage("KAFKA", {"topic": "orders-replies", "key": f"o{i}", "headers": headers(
        kafka_correlationId=f"c{i}", kind="accepted")}, data={"accepted": True})
    return [request, reply]


def amqp_pair(i: int) -> list[NativeMessage]:
    request = NativeMessage("AMQP/1.0", {"properties": {
        "subject": "price.ask", "message-id": f"m-{i}", "reply-to": "/queue/replies"}},
        data={"sku": i})
    reply = NativeMessage("AMQP/1.0", {"properties": {
        "subject": "price.answer", "correlation-id": f"m-{i}"}}, data={"price": 3})
    return [request, reply]


def _messages(document: dict[str, Any]) -> dict[str, Any]:
    """Every definition of the draft, requests and replies."""
    out: dict[str, Any] = {}
    for group in document["messagegroups"].values():
        out.update(group["messages"])
    return out


def test_nats_answers_on_the_reply_subject_become_the_reply_definition() -> None:
    result = learn(nats_traffic())
    # The answers (on _INBOX.*) are not a kind of message of their own.
    assert [p.address for p in result.proposals] == ["quote.{item}.ask"]
    assert result.answers == 12
    [reply] = result.replies
    assert (reply.message_id, reply.request_id, reply.count) == ("quote.ask.reply",
                                                                 "quote.ask", 12)
    document = draft_document(result.proposals, LearnOptions())
    # the replies in a group of their own, for a route's reply_definitions
    groups = document["messagegroups"]
    assert list(groups["learned"]["messages"]) == ["quote.ask"]
    assert list(groups["learned.replies"]["messages"]) == ["quote.ask.reply"]
    messages = _messages(document)
    request, answer = messages["quote.ask"], messages["quote.ask.reply"]
    # linked as docs/request-reply.md documents: both declare correlationid
    assert "correlationid" in request["envelopemetadata"]
    assert "correlationid" in answer["envelopemetadata"]
    assert answer["envelopemetadata"]["type"]["value"] == "quote.ask.reply"
    # every request was answered, so every one carried its reply subject
    assert request["protocoloptions"]["reply-to"] == "{replyto}"
    # the answer's constants; not its address (the requester's inbox)
    assert answer["protocol"] == "NATS"
    assert answer["protocoloptions"] == {"headers": [CT, {"name": "outcome",
                                                          "value": "priced"}]}
    assert answer["dataschemauri"].endswith("/quote.ask.reply")


def test_an_answer_read_before_its_request_is_still_paired() -> None:
    # An observer with two subscriptions (quote.> and _INBOX.>) may read them so.
    traffic = nats_traffic()
    requests, answers = traffic[:12], traffic[12:]
    result = learn([r for pair in zip(answers, requests, strict=True) for r in pair])
    assert result.answers == 12
    assert [p.address for p in result.proposals] == ["quote.{item}.ask"]
    [reply] = result.replies
    assert reply.count == 12 and reply.every_request_answered


def test_records_held_back_as_possible_answers_are_learned_in_the_end() -> None:
    # No request ever names them: plain messages, learned once they leave the window.
    records = [NativeMessage("NATS", {"subject": f"plant.dev{n}.temp"}, data={"t": n})
               for n in range(30)]
    for lookback in (5, 1000):
        result = learn(records, LearnOptions(reply_lookback=lookback))
        [proposal] = result.proposals
        assert proposal.count == 30 and not result.replies


def test_unanswered_requests_propose_no_reply_and_no_reply_to_constraint() -> None:
    result = learn(nats_traffic(answer=False))
    assert not result.replies and result.answers == 0
    [request] = _messages(draft_document(result.proposals, LearnOptions())).values()
    assert "correlationid" not in request["envelopemetadata"]
    assert "reply-to" not in request["protocoloptions"]


def test_a_partly_answered_definition_does_not_require_a_reply_address() -> None:
    traffic = nats_traffic(6) + [NativeMessage("NATS", {"subject": "quote.item0.ask",
                                                        "headers": [CT]},
                                               data={"item": "item0"})] * 3
    result = learn(traffic)
    [reply] = result.replies
    assert reply.count == 6 and not reply.every_request_answered
    request = _messages(draft_document(result.proposals, LearnOptions()))["quote.ask"]
    assert "reply-to" not in request["protocoloptions"]  # fire-and-forget ones match too


def test_mqtt5_pairs_by_response_topic_and_correlation_data() -> None:
    records = [r for i in range(8) for r in mqtt_pair(i)]
    result = learn(records)
    assert [p.address for p in result.proposals] == ["plant/{pump}/ask"]
    [reply] = result.replies
    assert reply.count == 8 and reply.protocol == "MQTT/5.0"
    messages = _messages(draft_document(result.proposals, LearnOptions()))
    assert messages["plant.ask"]["protocoloptions"]["response_topic"] == "{replyto}"
    answer = messages["plant.ask.reply"]
    assert answer["protocoloptions"]["content_type"] == "application/json"
    assert "topic_name" not in answer["protocoloptions"]


def test_mqtt5_an_answer_with_other_correlation_data_is_no_answer() -> None:
    records = []
    for i in range(6):
        request, reply = mqtt_pair(i)
        records += [request, reply.replace_fields({**reply.fields,
                                                   "correlation_data": "someone-else"})]
    result = learn(records)
    assert result.answers == 0 and not result.replies


def test_kafka_pairs_by_reply_topic_and_correlation_headers() -> None:
    result = learn([r for i in range(5) for r in kafka_pair(i)])
    assert [p.address for p in result.proposals] == ["orders"]
    [reply] = result.replies
    assert reply.count == 5
    messages = _messages(draft_document(result.proposals, LearnOptions()))
    answer = messages[reply.message_id]
    headers = answer["protocoloptions"]["headers"]
    assert headers["kind"] == {"value": "accepted"}
    assert headers["kafka_correlationId"] == {"value": "{correlationid}"}
    assert "topic" not in answer["protocoloptions"]


def test_amqp_pairs_the_answer_correlation_id_with_the_request_message_id() -> None:
    result = learn([r for i in range(4) for r in amqp_pair(i)])
    assert [p.address for p in result.proposals] == ["price.ask"]
    [reply] = result.replies
    messages = _messages(draft_document(result.proposals, LearnOptions()))
    answer = messages[reply.message_id]
    assert answer["protocoloptions"]["properties"]["subject"] == {"value": "price.answer"}
    assert answer["protocoloptions"]["properties"]["correlation-id"] == {
        "value": "{correlationid}"}


def test_fewer_answers_than_min_group_size_propose_no_reply() -> None:
    result = learn(nats_traffic(12, answer=False) + nats_traffic(1)[1:])
    assert result.answers == 1 and not result.replies


def test_waiting_requests_are_bounded_and_the_forgotten_counted() -> None:
    options = LearnOptions(reply_waiting_cap=5, reply_pair_cap=3, reply_body_cap=2)
    result = learn(nats_traffic(20), options)
    # answers come after all 20 requests: the 15 oldest were forgotten, and their
    # answers are learned as messages of their own
    assert result.forgotten_requests == 15 and result.answers == 5
    [reply] = result.replies
    assert reply.count == 3 and len(reply.bodies) == 2


def test_the_draft_validates_and_matches_requests_and_answers(tmp_path: Path,
                                                              capsys: Any) -> None:
    records = nats_traffic() + [r for i in range(6) for r in mqtt_pair(i)]
    result = learn(records)
    draft = tmp_path / "draft.json"
    draft.write_text(json.dumps(draft_document(result.proposals, LearnOptions())))
    assert main(["validate", str(draft)]) == 0, capsys.readouterr()
    sent = tmp_path / "sent.jsonl"
    sent.write_text("".join(r.to_line() + "\n" for r in records))
    capsys.readouterr()
    assert main(["match", "-d", str(draft), str(sent), "--no-explain"]) == 0
    matched = [json.loads(line)["match"].rsplit("/", 1)[-1]
               for line in capsys.readouterr().out.splitlines()]
    assert matched[:12] == ["quote.ask"] * 12
    assert matched[12:24] == ["quote.ask.reply"] * 12
    assert matched[24:] == ["plant.ask", "plant.ask.reply"] * 6


def test_the_summary_lists_the_reply_definitions(tmp_path: Path, capsys: Any) -> None:
    records = tmp_path / "r.jsonl"
    records.write_text("".join(r.to_line() + "\n" for r in nats_traffic()))
    assert main(["learn", str(records), "--format", "json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["answers"] == 12
    [reply] = summary["replies"]
    assert (reply["id"], reply["request"], reply["answers"]) == (
        "quote.ask.reply", "quote.ask", 12)
    assert reply["reply_definition"] == "learned.replies/quote.ask.reply"
    assert main(["learn", str(records)]) == 0
    text = capsys.readouterr().out
    assert "quote.ask.reply  NATS  answers paired by a reply subject" in text
    assert "reply_definitions: [learned.replies/quote.ask.reply]" in text
    # the reply subject is required (every request was answered), not left out
    assert "requires a reply address" in text and "left out (varying): reply-to" not in text
    assert main(["learn", str(records), "--format", "json"]) == 0
    [request] = json.loads(capsys.readouterr().out)["definitions"]
    assert "reply-to" not in request["left_out"]
