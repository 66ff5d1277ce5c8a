"""Request-reply correlation of the Kafka and AMQP adapters without brokers (issue 32):
how a request is marked (reply address, correlation token, `correlationid` extension),
how an answer's token is read and addressed back to its sender, and the config check that
a reply route's Kafka/AMQP output names where its answers come
(tests/integration/test_request_reply_amqp_kafka.py runs them on real brokers)."""

from __future__ import annotations

import asyncio
import json
import struct
from dataclasses import dataclass, field
from typing import Any

from adapters.amqp.reply import answer_target, answered, requesting, token_of
from adapters.kafka.options import KafkaOptions
from adapters.kafka.reply import AnswerSender, ReplyReader
from adapters.kafka.reply import requesting as kafka_requesting
from gateway.cloudevents.bindings import decode, encode
from gateway.cloudevents.event import CloudEvent
from gateway.config import load_config_text
from gateway.ports import EndpointSettings, Outcome, ReplyTable, Stray, confirmed
from gateway.protocols import AMQP, KAFKA, profile
from gateway.record import NativeMessage


def _event() -> CloudEvent:
    return CloudEvent({"specversion": "1.0", "id": "1", "source": "/s", "type": "t",
                       "datacontenttype": "application/json"}, data={"item": "tea"})


# -- the profiles ----------------------------------------------------------------------------


def test_kafka_and_amqp_profiles_carry_request_reply_and_name_their_places():
    kafka, amqp = profile(KAFKA).request_reply, profile(AMQP).request_reply
    assert kafka is not None and amqp is not None
    assert (kafka.reply_to and kafka.reply_to.name, kafka.correlation
            and kafka.correlation.name) == ("kafka_replyTopic", "kafka_correlationId")
    assert kafka.output_needs == ("reply_topic",)
    assert (amqp.reply_to and amqp.reply_to.name, amqp.correlation
            and amqp.correlation.name) == ("reply-to", "correlation-id")
    assert amqp.output_needs == ("reply_address",)


# -- Kafka -------------------------------------------------------------------------------------

_OPTS = KafkaOptions.parse(EndpointSettings("kafka://127.0.0.1:9092", options={
    "reply_topic": "replies"}))


def test_a_kafka_request_carries_the_reply_topic_and_token_headers_replacing_its_own():
    record = encode(_event(), KAFKA, "binary")
    record = record.replace_fields({**record.fields, "headers": [
        *record.fields["headers"], {"name": "kafka_replyTopic", "value": "theirs"},
        {"name": "kafka_correlationId", "value": "old"}]})
    request = kafka_requesting(record, _OPTS, "replies", "tok-1")
    pairs = request.pairs("headers")
    assert [v for n, v in pairs if n == "kafka_replyTopic"] == ["replies"]
    assert [v for n, v in pairs if n == "kafka_correlationId"] == ["tok-1"]
    event = decode(request)
    assert event is not None and event.attributes["correlationid"] == "tok-1"


def test_kafka_header_names_are_the_endpoints_choice():
    opts = KafkaOptions.parse(EndpointSettings("kafka://h:9092", options={
        "reply_topic_header": "reply-to", "correlation_header": "x-corr"}))
    request = kafka_requesting(NativeMessage(KAFKA, {}, payload=b"x"), opts, "r", "t")
    assert request.pairs("headers") == [("reply-to", "r"), ("x-corr", "t")]


@dataclass
class _Record:
    """The attributes of an aiokafka ConsumerRecord the adapter reads."""

    headers: list[tuple[str, bytes | None]]
    value: bytes | None = b'{"price": 1}'
    topic: str = "replies"
    partition: int = 0
    offset: int = 0
    timestamp: int = 0
    key: bytes | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def test_the_reply_reader_resolves_ours_skips_foreign_tokens_and_reports_uncorrelated():
    async def scenario() -> tuple[list[Outcome], list[Stray], ReplyReader]:
        table, strays = ReplyTable(), []
        table.listener = lambda kind, answer: strays.append(kind)
        reader = ReplyReader(_OPTS, table, "c")
        token, future = table.open()
        reader._answer(_Record([("kafka_correlationId", token.encode())]), "now")
        reader._answer(_Record([("kafka_correlationId", b"another-gateways-7")]), "now")
        reader._answer(_Record([("kafka_correlationId", b"\xff\xfe")]), "now")
        reader._answer(_Record([]), "now")  # no correlation at all
        outcomes = await table.collect([(token, future)], 0.1)
        return outcomes, strays, reader

    outcomes, strays, reader = asyncio.run(scenario())
    [outcome] = outcomes
    assert outcome.reply is not None and json.loads(outcome.reply.body_bytes()) == {"price": 1}
    assert reader.foreign == 2
    assert strays == ["uncorrelated"]


def test_a_kafka_request_without_a_reply_topic_header_is_not_awaited():
    sender = AnswerSender(_OPTS, "c")
    assert sender.answerer(_Record([])) is None
    assert sender.answerer(_Record([("kafka_correlationId", b"x")])) is None
    assert sender.answerer(_Record([("kafka_replyTopic", b"theirs")])) is not None
    partition = struct.pack(">i", 3)
    assert sender.answerer(_Record([("kafka_replyTopic", b"theirs"),
                                    ("kafka_replyPartition", partition)])) is not None


def test_reply_table_tells_its_own_tokens_from_others():
    async def scenario() -> tuple[bool, bool]:
        table = ReplyTable()
        token, _ = table.open()
        table.give_up(token)
        return table.issued(token), ReplyTable().issued(token)

    assert asyncio.run(scenario()) == (True, False)


# -- AMQP --------------------------------------------------------------------------------------


def test_an_amqp_request_carries_reply_to_and_correlation_id():
    record = encode(_event(), AMQP, "binary")
    request = requesting(record, "/queue/replies", "tok-2")
    props = request.fields["properties"]
    assert isinstance(props, dict)
    assert (props["reply-to"], props["correlation-id"]) == ("/queue/replies", "tok-2")
    event = decode(request)
    assert event is not None and event.attributes["correlationid"] == "tok-2"


def test_an_amqp_answer_is_matched_by_correlation_id_else_its_extension():
    plain = NativeMessage(AMQP, {"properties": {"correlation-id": "tok-3"}}, payload=b"x")
    assert token_of(plain) == "tok-3"
    event = CloudEvent({**_event().attributes, "correlationid": "tok-4"}, data={})
    assert token_of(encode(event, AMQP, "binary")) == "tok-4"
    assert token_of(NativeMessage(AMQP, {}, payload=b"x")) is None


def test_an_amqp_answer_goes_to_the_reply_to_with_the_requests_correlation():
    service_answer = NativeMessage(AMQP, {
        "properties": {"to": "/queue/gw-replies", "correlation-id": "gateway-token",
                       "message-id": "m-9", "content-type": "application/json"},
        "header": {"delivery-count": 0}, "message-annotations": {"x-exchange": ""}},
        data={"price": 1})
    answer = answered(service_answer, answer_target("/queue/client"), "their-corr")
    assert answer.fields["properties"] == {
        "to": "/amq/queue/client", "correlation-id": "their-corr", "message-id": "m-9",
        "content-type": "application/json"}
    assert set(answer.fields) == {"properties"}
    # other address forms are used as they are
    assert answer_target("/exchange/x/key") == "/exchange/x/key"


# -- the route option ------------------------------------------------------------------------

_DEFS = {"endpoints": {
    "http-in": {"usage": ["consumer"], "protocol": "HTTP",
                "protocoloptions": {"endpoints": [{"uri": "http://127.0.0.1:8080"}]},
                "messagegroups": ["#/messagegroups/g"]},
    "kafka-in": {"usage": ["consumer"], "protocol": "KAFKA",
                 "protocoloptions": {"endpoints": [{"uri": "kafka://127.0.0.1:9092"}],
                                     "topic": "t"},
                 "messagegroups": ["#/messagegroups/g"]},
    "amqp-in": {"usage": ["consumer"], "protocol": "AMQP/1.0",
                "protocoloptions": {"endpoints": [{"uri": "amqp://127.0.0.1:5672"}],
                                    "node": "/queue/ask"},
                "messagegroups": ["#/messagegroups/g"]},
    "kafka-out": {"usage": ["producer"], "protocol": "KAFKA",
                  "protocoloptions": {"endpoints": [{"uri": "kafka://127.0.0.1:9092"}],
                                      "topic": "svc", "reply_topic": "svc.replies"}},
    "kafka-out-bare": {"usage": ["producer"], "protocol": "KAFKA",
                       "protocoloptions": {"endpoints": [{"uri": "kafka://127.0.0.1:9092"}],
                                           "topic": "svc"}},
    "amqp-out": {"usage": ["producer"], "protocol": "AMQP/1.0",
                 "protocoloptions": {"endpoints": [{"uri": "amqp://127.0.0.1:5672"}],
                                     "node": "/queue/svc",
                                     "reply_address": "/queue/svc-replies"}},
    "amqp-out-bare": {"usage": ["producer"], "protocol": "AMQP/1.0",
                      "protocoloptions": {"endpoints": [{"uri": "amqp://127.0.0.1:5672"}],
                                          "node": "/queue/svc"}},
}, "messagegroups": {"g": {"envelope": "CloudEvents/1.0", "messages": {
    "m": {"protocol": "HTTP", "protocoloptions": {"path": {"value": "/q"}},
          "envelope": "CloudEvents/1.0",
          "envelopemetadata": {"type": {"value": "t"}, "source": {"value": "/s"}}}}}}}


def _errors(tmp_path: Any, route: str) -> list[tuple[str, str]]:
    (tmp_path / "d.json").write_text(json.dumps(_DEFS))
    text = f"definitions: [d.json]\ndeadletter: log\nroutes:\n  - {route}\n"
    _, problems = load_config_text(text, "gw.yaml", tmp_path)
    return [(p.path, p.message) for p in problems if p.severity == "error"]


def test_reply_routes_with_kafka_and_amqp_ends_are_accepted(tmp_path: Any) -> None:
    for source, output in (("http-in", "kafka-out"), ("http-in", "amqp-out"),
                           ("kafka-in", "amqp-out"), ("amqp-in", "kafka-out"),
                           ("kafka-in", "kafka-out"), ("amqp-in", "amqp-out")):
        assert _errors(tmp_path, f"{{from: {source}, to: [{output}], reply: true}}") == []


def test_a_kafka_or_amqp_output_without_its_reply_address_is_refused(tmp_path: Any) -> None:
    [(path, message)] = _errors(tmp_path, "{from: http-in, to: [kafka-out-bare], reply: true}")
    assert path == "$.routes[0].reply"
    assert "needs reply_topic on output 'kafka-out-bare'" in message
    [(path, message)] = _errors(tmp_path, "{from: http-in, to: [amqp-out-bare], reply: true}")
    assert "needs reply_address on output 'amqp-out-bare'" in message
    # as a source neither needs it: the request names its own reply address
    assert _errors(tmp_path, "{from: kafka-in, to: [amqp-out], reply: true}") == []


def test_the_reply_address_may_come_from_the_configs_endpoint_options(tmp_path: Any) -> None:
    (tmp_path / "d.json").write_text(json.dumps(_DEFS))
    text = ("definitions: [d.json]\ndeadletter: log\n"
            "endpoints:\n  kafka-out-bare:\n    options: {reply_topic: from-config}\n"
            "routes:\n  - {from: http-in, to: [kafka-out-bare], reply: true}\n")
    _, problems = load_config_text(text, "gw.yaml", tmp_path)
    assert [p.message for p in problems if p.severity == "error"] == []


def test_reply_table_send_marks_each_request_and_fails_the_unsent_with_their_outcome():
    async def scenario() -> tuple[list[NativeMessage], list[Outcome]]:
        table, submitted = ReplyTable(), []

        async def submit(records: Any) -> Any:
            submitted.extend(records)
            return confirmed([Outcome.ok(), Outcome.failed("refused", retryable=False)])

        def mark(record: NativeMessage, token: str) -> NativeMessage:
            return record.replace_fields({"token": token})

        confirmation = await table.send(
            [NativeMessage(KAFKA, {}, payload=b"1"), NativeMessage(KAFKA, {}, payload=b"2")],
            mark, submit, 1.0)
        await asyncio.sleep(0)
        table.resolve(str(submitted[0].fields["token"]),
                      NativeMessage(KAFKA, {}, payload=b"answer"))
        return submitted, await confirmation

    submitted, outcomes = asyncio.run(scenario())
    assert submitted[0].fields["token"] != submitted[1].fields["token"]
    assert outcomes[0].reply is not None and outcomes[0].reply.payload == b"answer"
    assert outcomes[1].reason == "refused" and not outcomes[1].retryable


def test_a_kafka_consumer_gives_each_request_naming_a_reply_topic_its_answer_hook():
    from aiokafka import TopicPartition  # type: ignore[import-untyped]

    from adapters.kafka.commits import Commits

    commits = Commits()
    request = _Record([("kafka_replyTopic", b"theirs")], offset=0)
    plain = _Record([("other", b"x")], offset=1)
    tp = TopicPartition("requests", 0)
    assert [d.answer for d in commits.deliver({tp: [request, plain]}, "now")] == [None, None]
    commits.answerer = AnswerSender(_OPTS, "c").answerer
    request2 = _Record([("kafka_replyTopic", b"theirs")], offset=2)
    plain2 = _Record([("other", b"x")], offset=3)
    first, second = commits.deliver({tp: [request2, plain2]}, "now")
    assert first.answer is not None and second.answer is None


def test_an_amqp_request_is_awaited_only_with_a_reply_to():
    from adapters.amqp.answers import AnswerSender as AmqpAnswers

    answers = AmqpAnswers(EndpointSettings("amqp://127.0.0.1:5672", options={"node": "/q"}))
    assert answers.answerer(NativeMessage(AMQP, {}, payload=b"x")) is None
    assert answers.answerer(NativeMessage(AMQP, {"properties": {"message-id": "m"}},
                                          payload=b"x")) is None
    assert answers.answerer(NativeMessage(AMQP, {"properties": {"reply-to": "/queue/r"}},
                                          payload=b"x")) is not None


def test_concurrent_first_kafka_requests_start_one_reply_reader(monkeypatch: Any) -> None:
    started: list[str] = []

    async def scenario() -> list[str | None]:
        reader = ReplyReader(_OPTS, ReplyTable(), "c")

        async def start(topic: str) -> str | None:
            started.append(topic)
            await asyncio.sleep(0.01)
            reader._task = asyncio.get_running_loop().create_task(asyncio.sleep(3600))
            return None

        monkeypatch.setattr(reader, "_start", start)
        results = await asyncio.gather(*(reader.listen("replies") for _ in range(5)))
        await reader.aclose()
        return list(results)

    assert asyncio.run(scenario()) == [None] * 5
    assert started == ["replies"]
