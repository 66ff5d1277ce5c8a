"""Request-reply without brokers: the correlation table, the answer's translation into the
sender's protocol, the route handing answers back before settling, and the `reply` route
option's checks (tests/integration/test_request_reply.py runs the pairs on real brokers)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

from adapters.memory import MemoryConsumer, MemoryProducer
from gateway.cloudevents.bindings import decode, encode
from gateway.cloudevents.event import CloudEvent
from gateway.config import load_config_text
from gateway.convert import Converter
from gateway.deadletter.format import deadletter_metadata
from gateway.definitions import read_document
from gateway.observability.metrics import Metrics
from gateway.ports import (
    Confirmation,
    Delivery,
    Outcome,
    ReplyTable,
    Stray,
    confirmed,
    correlation_of,
    no_reply,
)
from gateway.record import NativeMessage
from gateway.runtime.reply import reply_record
from gateway.runtime.route import Output, Route

# -- the correlation table ------------------------------------------------------------------


def test_an_answer_resolves_its_request_and_strays_are_told_apart():
    async def scenario() -> tuple[list[Outcome], list[tuple[Stray, NativeMessage]], ReplyTable]:
        table, strays = ReplyTable(), []
        table.listener = lambda kind, answer: strays.append((kind, answer))
        answered, silent = table.open(), table.open()
        answer = NativeMessage("NATS", {"subject": "x"}, data={"ok": True})
        table.resolve(answered[0], answer)
        outcomes = await table.collect([answered, silent, Outcome.failed("not sent")], 0.05)
        table.resolve(silent[0], answer)  # after its timeout: late
        table.resolve("someone-elses", answer)
        table.resolve(None, answer)
        return outcomes, strays, table

    outcomes, strays, table = asyncio.run(scenario())
    assert outcomes[0].delivered and outcomes[0].reply is not None
    assert outcomes[1] == no_reply(0.05) and not outcomes[1].retryable
    assert outcomes[2].reason == "not sent"
    assert [kind for kind, _ in strays] == ["late", "unknown", "uncorrelated"]
    assert (table.late, table.uncorrelated, len(table)) == (2, 1, 0)


def test_a_refused_request_reports_its_failure_not_a_timeout():
    async def scenario() -> list[Outcome]:
        table = ReplyTable()
        opened = table.open()
        table.refuse(opened[0], Outcome.failed("no responders"))
        return await table.collect([opened], 5.0)

    [outcome] = asyncio.run(scenario())
    assert outcome.reason == "no responders" and outcome.retryable


# -- the answer in the sender's protocol -----------------------------------------------------

def _event() -> CloudEvent:
    return CloudEvent.create({"specversion": "1.0", "id": "r1", "type": "com.example.quote",
                              "source": "/svc", "correlationid": "tok-1",
                              "datacontenttype": "application/json"}, {"price": 42})


def test_a_cloudevent_answer_becomes_a_binary_cloudevent_of_the_senders_protocol():
    answer = encode(_event(), "NATS", "structured")
    as_http = reply_record(answer, "HTTP")
    assert as_http.protocol == "HTTP"
    assert as_http.header("ce-correlationid") == "tok-1"  # correlation survives the hop
    as_mqtt = reply_record(answer, "MQTT/5.0")
    assert ("correlationid", "tok-1") in as_mqtt.pairs("user_properties")
    event = decode(as_mqtt)
    assert event is not None and event.get("id") == "r1" and event.data == {"price": 42}
    assert correlation_of(as_mqtt) == "tok-1"


def test_a_native_answer_keeps_its_body_and_content_type():
    answer = NativeMessage("HTTP", {"headers": [{"name": "Content-Type",
                                                 "value": "text/plain"}]}, payload=b"42")
    as_mqtt = reply_record(answer, "MQTT/5.0")
    assert (as_mqtt.get("content_type"), as_mqtt.body_bytes()) == ("text/plain", b"42")
    as_nats = reply_record(answer, "NATS")
    assert as_nats.metadata("content-type") == "text/plain"
    assert correlation_of(answer) is None


# -- the route --------------------------------------------------------------------------------

DOC = {"messagegroups": {"g": {"envelope": "CloudEvents/1.0", "messages": {
    "ask": {"protocol": "HTTP", "protocoloptions": {"path": {"value": "/ask"}},
            "envelope": "CloudEvents/1.0",
            "envelopemetadata": {"type": {"value": "t.ask"}, "source": {"value": "/s"}}},
}}}}


class Service(MemoryProducer):
    """A Requester: answers each request with `answers` in turn (None: no answer)."""

    def __init__(self, *answers: NativeMessage | None) -> None:
        super().__init__()
        self.answers = list(answers)
        self.replies = ReplyTable()

    async def request(self, messages: Sequence[NativeMessage], timeout: float
                      ) -> Confirmation:
        self.written.extend(messages)
        outcomes = []
        for _ in messages:
            answer = self.answers.pop(0)
            outcomes.append(no_reply(timeout) if answer is None else Outcome.answered(answer))
        return confirmed(outcomes)


def _run(service: Service, *asks: NativeMessage
         ) -> tuple[list[tuple[NativeMessage | None, str]], MemoryConsumer, MemoryProducer,
                    Metrics]:
    answered: list[tuple[NativeMessage | None, str]] = []
    settled_first: list[bool] = []

    class Asking(MemoryConsumer):
        async def read_batch(self, limit: int) -> list[Delivery]:
            batch = await super().read_batch(limit)
            for delivery in batch:
                async def answer(reply: NativeMessage | None, why: str,
                                 d: Delivery = delivery) -> None:
                    settled_first.append(d.settled)
                    answered.append((reply, why))
                delivery.answer = answer
            return batch

    consumer = Asking(list(asks), close_when_empty=True)
    dlq, metrics = MemoryProducer(), Metrics()
    route = Route("r", "in", consumer, Converter(read_document(DOC, "d.json").messages()),
                  [Output("svc", "NATS", service, defaults={"subject": "svc"})],
                  deadletter=Output("dlq", "KAFKA", dlq, defaults={"topic": "d"}),
                  metrics=metrics, reply_timeout=1.0)

    async def scenario() -> None:
        await route.start()
        await route.wait_finished()
        await route.stop(grace=1.0)

    asyncio.run(scenario())
    assert not any(settled_first)  # answered before the source message is settled
    return answered, consumer, dlq, metrics


def _ask(n: int) -> NativeMessage:
    return NativeMessage("HTTP", {"method": "POST", "path": "/ask"}, data={"n": n})


def test_the_route_answers_each_sender_with_its_own_reply_then_acks():
    replies = [NativeMessage("NATS", {"subject": "_INBOX.x"}, data={"answer": n})
               for n in range(3)]
    answered, consumer, dlq, metrics = _run(Service(*replies), *[_ask(n) for n in range(3)])
    assert [json.loads(r.body_bytes()) for r, _ in answered if r is not None] == [
        {"answer": 0}, {"answer": 1}, {"answer": 2}]
    assert all(r is not None and r.protocol == "HTTP" for r, _ in answered)
    assert len(consumer.acked) == 3 and not dlq.written
    assert metrics.registry.get_sample_value(
        "xrgw_replies_total", {"route": "r", "result": "answered"}) == 3


def test_no_answer_tells_the_sender_and_dead_letters_the_request_once():
    service = Service(None)
    answered, consumer, dlq, _ = _run(service, _ask(1))
    assert answered == [(None, "no reply within 1 s")]
    assert len(service.written) == 1  # not retried: the service may have acted on it
    [letter] = dlq.written
    assert deadletter_metadata(letter)["xrgw-reason"] == "no-reply"
    assert len(consumer.acked) == 1


def test_an_unmatched_request_is_told_why():
    answered, _, dlq, _ = _run(Service(), NativeMessage("HTTP", {"method": "POST",
                                                                 "path": "/other"}))
    assert answered == [(None, "unmatched")]
    assert deadletter_metadata(dlq.written[0])["xrgw-reason"] == "unmatched"


# -- the route option -------------------------------------------------------------------------

DEFS = {"endpoints": {
    "http-in": {"usage": ["consumer"], "protocol": "HTTP",
                "protocoloptions": {"endpoints": [{"uri": "http://127.0.0.1:8080"}]},
                "messagegroups": ["#/messagegroups/g"]},
    "kafka-in": {"usage": ["consumer"], "protocol": "KAFKA",
                 "protocoloptions": {"endpoints": [{"bootstrap.servers": ["127.0.0.1:9092"]}],
                                     "topic": "t"},
                 "messagegroups": ["#/messagegroups/g"]},
    "mqtt3-in": {"usage": ["consumer"], "protocol": "MQTT/3.1.1",
                 "protocoloptions": {"endpoints": [{"uri": "mqtt://127.0.0.1:1883"}],
                                     "topic": "t"},
                 "messagegroups": ["#/messagegroups/g"]},
    "nats-out": {"usage": ["producer"], "protocol": "NATS",
                 "protocoloptions": {"endpoints": [{"uri": "nats://127.0.0.1:4222"}],
                                     "subject": "svc"}},
    "js-out": {"usage": ["producer"], "protocol": "NATS",
               "protocoloptions": {"endpoints": [{"uri": "nats://127.0.0.1:4222"}],
                                   "subject": "svc", "jetstream": True}},
    "mqtt-out": {"usage": ["producer"], "protocol": "MQTT/5.0",
                 "protocoloptions": {"endpoints": [{"uri": "mqtt://127.0.0.1:1883"}]}},
}, **DOC}


def _load(tmp_path, route: str):
    (tmp_path / "d.json").write_text(json.dumps(DEFS))
    text = f"definitions: [d.json]\ndeadletter: log\nroutes:\n  - {route}\n"
    return load_config_text(text, "gw.yaml", tmp_path)


def _errors(problems) -> list[tuple[str, str]]:
    return [(p.path, p.message) for p in problems if p.severity == "error"]


def test_reply_route_config_is_accepted_with_its_timeout(tmp_path):
    config, problems = _load(tmp_path, "{from: http-in, to: [nats-out], reply: true, "
                                       "reply_timeout: 2s}")
    assert not _errors(problems)
    assert config is not None and config.routes[0].reply_timeout == 2.0
    config, _ = _load(tmp_path, "{from: http-in, to: [nats-out]}")
    assert config is not None and config.routes[0].reply_timeout is None


def test_reply_is_refused_where_no_answer_can_be_carried(tmp_path):
    _, problems = _load(tmp_path, "{from: mqtt3-in, to: [nats-out], reply: true}")
    [(path, message)] = _errors(problems)
    assert path == "$.routes[0].reply"
    assert "source 'mqtt3-in'" in message and "MQTT/3.1.1 has no request-reply" in message
    _, problems = _load(tmp_path, "{from: http-in, to: [js-out], reply: true}")
    [(path, message)] = _errors(problems)
    assert "with jetstream set" in message and "'js-out'" in message
    _, problems = _load(tmp_path, "{from: http-in, to: [nats-out, mqtt-out], reply: true}")
    [(path, message)] = _errors(problems)
    assert path == "$.routes[0].to" and "exactly one output" in message
    _, problems = _load(tmp_path, "{from: http-in, to: [nats-out], reply: true, "
                                  "reply_timeout: 0s}")
    assert any(p.path == "$.routes[0].reply_timeout" for p in problems)


def test_the_daemon_builds_reply_routes_with_their_timeout(tmp_path):
    from gateway.daemon import Gateway

    class Factory:
        def consumer(self, endpoint):
            return MemoryConsumer()

        def producer(self, endpoint):
            return Service()

        def output_defaults(self, endpoint):
            return {}

    config, problems = _load(tmp_path, "{from: http-in, to: [nats-out], reply: true, "
                                       "reply_timeout: 750ms}")
    assert config is not None, problems
    [route] = Gateway(config, Factory())._build_routes(config)
    assert route.reply_timeout == 0.75
