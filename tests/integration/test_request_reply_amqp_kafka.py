"""Request-reply with Kafka and AMQP 1.0 ends (issue 32), against real brokers on
loopback (Tansu, RabbitMQ 3.x with AMQP 1.0, nats-server) and HTTP.

Kafka carries a request with Spring Kafka's `ReplyingKafkaTemplate` headers
(`kafka_replyTopic`, `kafka_correlationId`), AMQP with the message format's `reply-to`
and `correlation-id`. The requesters and services on the far side are the protocols' own
clients, not xrgw code (`harness/reply_clients.py`): librdkafka through confluent-kafka,
and python-qpid-proton's blocking client -- what a user's Spring / Qpid application does
on the wire.

Pairs: HTTP->Kafka, HTTP->AMQP, MQTT 5->Kafka, MQTT 5->AMQP (Debian's `mosquitto_rr`
asks), Kafka->NATS, Kafka->HTTP, Kafka->MQTT 5 (a paho service), AMQP->HTTP, AMQP->NATS,
AMQP->MQTT 5, Kafka->Kafka, AMQP->AMQP, Kafka->AMQP, AMQP->Kafka; bad cases: no answer (504 + dead
letter `no-reply`, the requester gets nothing), a late answer (dropped, counted), an
answer without correlation (dead letter `uncorrelated-reply`), and at-least-once on the
request side (the source's request is settled only after its answer).
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import nats
import paho.mqtt.client as paho
import pytest
from aiohttp import web
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from support import ReplyGateway as Gateway
from support import asyncio_test

from adapters.amqp import AmqpConsumer, AmqpProducer
from adapters.http import HttpConsumer, HttpProducer
from adapters.kafka import KafkaConsumer, KafkaProducer
from adapters.memory import MemoryProducer
from adapters.mqtt import MqttConsumer, MqttProducer
from adapters.nats import NatsConsumer, NatsProducer
from gateway.convert import Converter
from gateway.definitions import read_document
from gateway.observability.metrics import Metrics
from gateway.ports import Consumer, EndpointSettings
from gateway.runtime.route import Output, Route
from harness.brokers import Mosquitto, NatsServer, RabbitMQ, Tansu, free_port
from harness.reply_clients import (
    CORRELATION_ID,
    REPLY_TOPIC,
    AmqpRequester,
    AmqpService,
    KafkaRequester,
    KafkaService,
    NoAnswer,
    create_topics,
)

TIMEOUT = 20.0
REPLY_TIMEOUT = 5.0


def _uid() -> str:
    return uuid.uuid4().hex[:10]


def _ask_topic(uid: str) -> str:
    return f"ask-{uid}"


def _catalog(uid: str) -> Any:
    """One request definition per source protocol (Kafka by this test's topic)."""
    def ce(name: str) -> dict[str, Any]:
        return {"envelope": "CloudEvents/1.0", "envelopemetadata": {
            "type": {"value": f"com.example.quote.{name}"},
            "source": {"value": "/quotes", "type": "uritemplate"}}}
    doc = {"messagegroups": {"quotes": {"envelope": "CloudEvents/1.0", "messages": {
        "http": {"protocol": "HTTP", "protocoloptions": {"path": {"value": "/quote/{id}"}},
                 **ce("http")},
        "nats": {"protocol": "NATS",
                 "protocoloptions": {"subject": {"value": "quote.{id}.ask"}}, **ce("nats")},
        "kafka": {"protocol": "KAFKA", "protocoloptions": {"topic": _ask_topic(uid)},
                  **ce("kafka")},
        "mqtt": {"protocol": "MQTT/5.0", "protocoloptions": {"topic_name": "quote/{id}/ask"},
                 **ce("mqtt")},
        "amqp": {"protocol": "AMQP/1.0",
                 "protocoloptions": {"properties": {"subject": {"value": "quote"}}},
                 **ce("amqp")},
    }}}}
    return read_document(doc, "quotes.json")


# ---------------------------------------------------------------------- the route under test

@asynccontextmanager
async def _gateway(uid: str, consumer: Consumer, output: Output,
                   reply_timeout: float = REPLY_TIMEOUT) -> AsyncIterator[Gateway]:
    dlq, metrics = MemoryProducer(), Metrics()
    route = Route("reply", "in", consumer, Converter(_catalog(uid).messages()), [output],
                  deadletter=Output("dlq", "KAFKA", dlq, defaults={"topic": "dead"}),
                  metrics=metrics, reply_timeout=reply_timeout)
    await route.start()
    try:
        async with asyncio.timeout(60):
            while not route.ready:
                await asyncio.sleep(0.05)
        yield Gateway(route, dlq, metrics)
    finally:
        await route.stop(grace=2.0)
        await output.producer.aclose()


async def _until(check: Any, what: str, timeout: float = TIMEOUT) -> None:
    try:
        async with asyncio.timeout(timeout):
            while not check():
                await asyncio.sleep(0.05)
    except TimeoutError:
        raise AssertionError(f"never: {what}") from None


# ---------------------------------------------------------------------- sources and outputs

def _http_source() -> HttpConsumer:
    return HttpConsumer(EndpointSettings("http://127.0.0.1:0", options={"settle_timeout": 60}))


def _kafka_source(tansu: Tansu, uid: str) -> KafkaConsumer:
    # A short session: a second member of the group is let in soon after the first left.
    return KafkaConsumer(EndpointSettings(tansu.url, options={
        "topics": [_ask_topic(uid)], "consumergroup": f"gw-{uid}",
        "autooffsetreset": "earliest", "session_timeout_ms": 3000,
        "heartbeat_interval_ms": 500}))


def _amqp_source(rabbitmq: RabbitMQ, uid: str) -> AmqpConsumer:
    return AmqpConsumer(EndpointSettings(rabbitmq.login_url, options={
        "node": f"/queue/ask-{uid}", "terminus-durability": "none"}))


def _nats_source(url: str, uid: str) -> NatsConsumer:
    return NatsConsumer(EndpointSettings(url, options={"subjects": [f"quote.{uid}.ask"]}))


def _to_kafka(tansu: Tansu, uid: str, **options: Any) -> Output:
    topic = f"svc-{uid}"
    producer = KafkaProducer(EndpointSettings(tansu.url, options={
        "topic": topic, "reply_topic": f"gw-replies-{uid}", **options}))
    return Output("svc", "KAFKA", producer, defaults={"topic": topic})


def _to_amqp(rabbitmq: RabbitMQ, uid: str) -> Output:
    producer = AmqpProducer(EndpointSettings(rabbitmq.login_url, options={
        "node": f"/queue/svc-{uid}", "reply_address": f"/queue/gw-replies-{uid}",
        "terminus-durability": "none"}))
    return Output("svc", "AMQP/1.0", producer)


def _to_nats(url: str, uid: str) -> Output:
    return Output("svc", "NATS", NatsProducer(EndpointSettings(url)),
                  defaults={"subject": f"svc.{uid}"})


def _mqtt_source(mosquitto: Mosquitto, uid: str) -> MqttConsumer:
    return MqttConsumer(EndpointSettings(mosquitto.url, client_id=f"gw-{uid}",
                                         options={"filters": [f"quote/{uid}/ask"]}))


def _to_mqtt(mosquitto: Mosquitto, uid: str) -> Output:
    return Output("svc", "MQTT/5.0", MqttProducer(EndpointSettings(mosquitto.url)),
                  defaults={"topic_name": f"svc/{uid}"})


def _to_http(url: str) -> Output:
    return Output("svc", "HTTP", HttpProducer(EndpointSettings(url)), defaults={"path": "/svc"})


def _kafka_topics(tansu: Tansu, uid: str, reply_partitions: int = 1) -> None:
    create_topics(tansu.bootstrap_servers, _ask_topic(uid), f"svc-{uid}",
                  f"gw-replies-{uid}")
    create_topics(tansu.bootstrap_servers, f"client-replies-{uid}",
                  partitions=reply_partitions)


# ---------------------------------------------------------------------- services and callers

@asynccontextmanager
async def _kafka_service(tansu: Tansu, uid: str, **kwargs: Any) -> AsyncIterator[KafkaService]:
    service = KafkaService(tansu.bootstrap_servers, f"svc-{uid}", **kwargs)
    await asyncio.to_thread(service.__enter__)
    try:
        yield service
    finally:
        await asyncio.to_thread(service.__exit__, None, None, None)


@asynccontextmanager
async def _amqp_service(rabbitmq: RabbitMQ, uid: str, **kwargs: Any
                        ) -> AsyncIterator[AmqpService]:
    service = AmqpService(rabbitmq.host, rabbitmq.port, f"/queue/svc-{uid}", **kwargs)
    await asyncio.to_thread(service.__enter__)
    try:
        yield service
    finally:
        await asyncio.to_thread(service.__exit__, None, None, None)


@asynccontextmanager
async def _nats_service(url: str, uid: str) -> AsyncIterator[None]:
    nc = await nats.connect(url)

    async def on_request(msg: Any) -> None:
        asked = json.loads(msg.data)
        await nc.publish(msg.reply, json.dumps({"price": 7, "item": asked["item"]}).encode(),
                         headers={"Content-Type": "application/json"})

    await nc.subscribe(f"svc.{uid}", cb=on_request)
    await nc.flush()
    try:
        yield
    finally:
        await nc.close()


@asynccontextmanager
async def _mqtt_service(mosquitto: Mosquitto, uid: str) -> AsyncIterator[None]:
    """An MQTT 5 service written with paho, as a user would: answers each request on
    svc/<uid> to its response topic with its correlation data."""
    client = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=f"svc-{uid}",
                         protocol=paho.MQTTv5)
    subscribed = threading.Event()

    def on_connect(c: paho.Client, userdata: Any, flags: Any, reason: Any,
                   props: Any) -> None:
        c.subscribe(f"svc/{uid}", qos=1)

    def on_message(c: paho.Client, userdata: Any, msg: paho.MQTTMessage) -> None:
        response_topic = getattr(msg.properties, "ResponseTopic", None)
        if not response_topic:
            return
        out = Properties(PacketTypes.PUBLISH)
        correlation = getattr(msg.properties, "CorrelationData", None)
        if correlation is not None:
            out.CorrelationData = correlation
        out.ContentType = "application/json"
        asked = json.loads(msg.payload)
        c.publish(response_topic, json.dumps({"price": 5, "item": asked["item"]}), qos=1,
                  properties=out)

    client.on_connect = on_connect
    client.on_message = on_message
    client.on_subscribe = lambda *args: subscribed.set()
    client.connect(mosquitto.host, mosquitto.port)
    client.loop_start()
    try:
        assert await asyncio.to_thread(subscribed.wait, TIMEOUT)
        yield
    finally:
        client.disconnect()
        client.loop_stop()


async def _mosquitto_rr(mosquitto: Mosquitto, uid: str, item: str) -> Any:
    """Ask with Debian's `mosquitto_rr` (MQTT 5 request with a response topic and its own
    correlation data); the answer's payload."""
    process = await asyncio.create_subprocess_exec(
        "mosquitto_rr", "-V", "mqttv5", "-h", mosquitto.host, "-p", str(mosquitto.port),
        "-t", f"quote/{uid}/ask", "-e", f"client/{uid}/answers", "-q", "1",
        "-m", json.dumps({"item": item}), "-W", str(int(TIMEOUT)), "-N",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await process.communicate()
    assert process.returncode == 0, err
    return json.loads(out)


@asynccontextmanager
async def _http_service() -> AsyncIterator[str]:
    async def handle(request: web.BaseRequest) -> web.StreamResponse:
        asked = json.loads(await request.read())
        return web.json_response({"price": 9, "item": asked["item"]})

    runner = web.ServerRunner(web.Server(handle))
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def _ask_http(consumer: HttpConsumer, uid: str,
                    item: str = "tea") -> tuple[int, dict[str, str], Any]:
    async with aiohttp.ClientSession() as session, session.post(
            f"{consumer.url}/quote/{uid}", json={"item": item},
            timeout=aiohttp.ClientTimeout(total=TIMEOUT)) as response:
        return response.status, dict(response.headers), json.loads(await response.read())


@asynccontextmanager
async def _kafka_requester(tansu: Tansu, uid: str, reply_partition: int | None = None
                           ) -> AsyncIterator[KafkaRequester]:
    requester = await asyncio.to_thread(KafkaRequester, tansu.bootstrap_servers,
                                        _ask_topic(uid), f"client-replies-{uid}",
                                        reply_partition)
    try:
        yield requester
    finally:
        await asyncio.to_thread(requester.close)


@asynccontextmanager
async def _amqp_requester(rabbitmq: RabbitMQ, uid: str) -> AsyncIterator[AmqpRequester]:
    requester = await asyncio.to_thread(AmqpRequester, rabbitmq.host, rabbitmq.port,
                                        f"/queue/ask-{uid}", f"/queue/client-replies-{uid}")
    try:
        yield requester
    finally:
        await asyncio.to_thread(requester.close)


def _item(item: str) -> bytes:
    return json.dumps({"item": item}).encode()


def _json(body: Any) -> Any:
    return json.loads(bytes(body) if not isinstance(body, str) else body)


# ====================================================================== Kafka as the output

@asyncio_test
async def test_http_to_kafka_answers_with_the_services_reply(tansu: Tansu) -> None:
    uid = _uid()
    await asyncio.to_thread(_kafka_topics, tansu, uid)
    consumer = _http_source()
    async with _kafka_service(tansu, uid) as service, \
            _gateway(uid, consumer, _to_kafka(tansu, uid)) as gw:
        status, headers, body = await _ask_http(consumer, uid, "tea")
        assert status == 200, body
        assert body == {"price": 42, "item": "tea"}
        assert headers["Content-Type"].startswith("application/json")
        # The service saw Spring's headers: the gateway's reply topic and a correlation
        # token, the same as the binary CloudEvent's correlationid extension.
        [request] = service.requests
        assert request.headers[REPLY_TOPIC] == f"gw-replies-{uid}".encode()
        token = request.headers[CORRELATION_ID]
        assert request.headers["ce_correlationid"] == token
        assert request.headers["ce_type"] == b"com.example.quote.http"
        assert gw.count("xrgw_replies_total", route="reply", result="answered") == 1
        assert not gw.dlq.written


@asyncio_test
async def test_concurrent_http_callers_each_get_their_own_kafka_answer(tansu: Tansu) -> None:
    uid = _uid()
    await asyncio.to_thread(_kafka_topics, tansu, uid)
    consumer = _http_source()
    async with _kafka_service(tansu, uid), \
            _gateway(uid, consumer, _to_kafka(tansu, uid)) as gw:
        items = [f"item-{n}" for n in range(12)]
        answers = await asyncio.gather(*(_ask_http(consumer, uid, i) for i in items))
        assert [(status, body["item"]) for status, _, body in answers] == [
            (200, i) for i in items]
        assert gw.count("xrgw_replies_total", route="reply", result="answered") == 12


@asyncio_test
async def test_no_kafka_answer_is_a_504_and_a_no_reply_dead_letter_sent_once(
        tansu: Tansu) -> None:
    uid = _uid()
    await asyncio.to_thread(_kafka_topics, tansu, uid)
    consumer = _http_source()
    async with _kafka_service(tansu, uid, answer=lambda body: None) as service, \
            _gateway(uid, consumer, _to_kafka(tansu, uid), 1.0) as gw:
        status, _, body = await _ask_http(consumer, uid)
        assert status == 504 and body["detail"] == "no reply within 1 s"
        await gw.route.wait_idle()
        await _until(lambda: len(service.requests) == 1, "the service saw the request")
        assert gw.reasons() == ["no-reply"]
        assert len(service.requests) == 1  # not sent again


@asyncio_test
async def test_a_late_kafka_answer_is_dropped_and_counted(tansu: Tansu) -> None:
    uid = _uid()
    await asyncio.to_thread(_kafka_topics, tansu, uid)
    consumer = _http_source()
    async with _kafka_service(tansu, uid, delay=2.0), \
            _gateway(uid, consumer, _to_kafka(tansu, uid), 0.5) as gw:
        status, _, _ = await _ask_http(consumer, uid)
        assert status == 504
        await _until(lambda: gw.count("xrgw_replies_late_total", endpoint="svc") >= 1,
                     "the late answer is counted")
        await gw.route.wait_idle()
        assert gw.reasons() == ["no-reply"]


@asyncio_test
async def test_a_kafka_answer_without_correlation_is_dead_lettered(tansu: Tansu) -> None:
    uid = _uid()
    await asyncio.to_thread(_kafka_topics, tansu, uid)
    consumer = _http_source()
    async with _kafka_service(tansu, uid, correlate=False), \
            _gateway(uid, consumer, _to_kafka(tansu, uid), 1.0) as gw:
        status, _, _ = await _ask_http(consumer, uid)
        assert status == 504
        await _until(lambda: "uncorrelated-reply" in gw.reasons(),
                     "the uncorrelated answer is dead-lettered")
        await gw.route.wait_idle()
        assert sorted(gw.reasons()) == ["no-reply", "uncorrelated-reply"]


# ====================================================================== Kafka as the source

@asyncio_test
async def test_kafka_to_nats_answers_the_reply_topic_with_the_correlation(
        tansu: Tansu, nats_server: NatsServer) -> None:
    uid = _uid()
    await asyncio.to_thread(_kafka_topics, tansu, uid)
    async with _nats_service(nats_server.url, uid), \
            _gateway(uid, _kafka_source(tansu, uid), _to_nats(nats_server.url, uid)) as gw, \
            _kafka_requester(tansu, uid) as requester:
        answers = await asyncio.to_thread(requester.ask_many,
                                          [_item("oats"), _item("rye")], TIMEOUT)
        assert [_json(a.value) for a in answers] == [{"price": 7, "item": "oats"},
                                                     {"price": 7, "item": "rye"}]
        assert answers[0].headers["content-type"].startswith(b"application/json")
        assert not requester.strays
        # At least once on the request side: each request's offset is committed once
        # its answer was produced.
        await gw.route.wait_idle()
        assert gw.count("xrgw_replies_total", route="reply", result="answered") == 2


@asyncio_test
async def test_kafka_to_http_answers_a_spring_style_requester(tansu: Tansu) -> None:
    uid = _uid()
    await asyncio.to_thread(_kafka_topics, tansu, uid)
    async with _http_service() as url, \
            _gateway(uid, _kafka_source(tansu, uid), _to_http(url)), \
            _kafka_requester(tansu, uid) as requester:
        answer = await asyncio.to_thread(requester.ask, _item("figs"), TIMEOUT)
        assert _json(answer.value) == {"price": 9, "item": "figs"}


@asyncio_test
async def test_kafka_to_kafka_keeps_each_sides_correlation(tansu: Tansu) -> None:
    uid = _uid()
    await asyncio.to_thread(_kafka_topics, tansu, uid)
    async with _kafka_service(tansu, uid) as service, \
            _gateway(uid, _kafka_source(tansu, uid), _to_kafka(tansu, uid)), \
            _kafka_requester(tansu, uid) as requester:
        answer = await asyncio.to_thread(requester.ask, _item("jam"), TIMEOUT)
        assert _json(answer.value) == {"price": 42, "item": "jam"}
        # The requester got its own correlation back (the helper matched it), not the
        # gateway's token, and the gateway's request named the gateway's reply topic.
        [request] = service.requests
        assert request.headers[REPLY_TOPIC] == f"gw-replies-{uid}".encode()
        assert answer.headers[CORRELATION_ID] != request.headers[CORRELATION_ID]
        assert REPLY_TOPIC not in answer.headers


@asyncio_test
async def test_kafka_answers_go_to_the_requested_reply_partition(tansu: Tansu) -> None:
    uid = _uid()
    await asyncio.to_thread(_kafka_topics, tansu, uid, 3)
    async with _http_service() as url, \
            _gateway(uid, _kafka_source(tansu, uid), _to_http(url)), \
            _kafka_requester(tansu, uid, reply_partition=2) as requester:
        answer = await asyncio.to_thread(requester.ask, _item("plums"), TIMEOUT)
        assert _json(answer.value) == {"price": 9, "item": "plums"}
        assert answer.partition == 2


@asyncio_test
async def test_a_kafka_request_is_committed_only_after_its_answer(tansu: Tansu) -> None:
    """At least once on the request side: while the service has not answered, the
    request's offset is not committed; a gateway that stops then leaves it to the next
    member of the group, which answers it."""
    uid = _uid()
    await asyncio.to_thread(_kafka_topics, tansu, uid)
    async with _kafka_requester(tansu, uid) as requester:
        asking = asyncio.create_task(asyncio.to_thread(requester.ask, _item("tea"), 90.0))
        async with _kafka_service(tansu, uid, delay=60.0) as slow, \
                _gateway(uid, _kafka_source(tansu, uid), _to_kafka(tansu, uid), 60.0):
            await _until(lambda: len(slow.requests) == 1, "the slow service got it")
        async with _kafka_service(tansu, uid) as service, \
                _gateway(uid, _kafka_source(tansu, uid), _to_kafka(tansu, uid)):
            answer = await asyncio.wait_for(asking, 90.0)
        assert _json(answer.value) == {"price": 42, "item": "tea"}
        assert len(service.requests) == 1


@asyncio_test
async def test_a_kafka_requester_gets_nothing_when_the_service_is_silent(
        tansu: Tansu) -> None:
    uid = _uid()
    await asyncio.to_thread(_kafka_topics, tansu, uid)
    async with _kafka_service(tansu, uid, answer=lambda body: None) as service, \
            _gateway(uid, _kafka_source(tansu, uid), _to_kafka(tansu, uid), 0.5) as gw, \
            _kafka_requester(tansu, uid) as requester:
        # No answer is produced for it (Kafka has no "no reply" status to send): the
        # requester's own deadline tells it; the request is a `no-reply` dead letter,
        # its offset committed, and it is not sent to the service again.
        with pytest.raises(NoAnswer):
            await asyncio.to_thread(requester.ask, _item("air"), 3.0)
        await _until(lambda: gw.reasons() == ["no-reply"], "the request is dead-lettered")
        await gw.route.wait_idle()
        assert len(service.requests) == 1
        assert not requester.strays


# ====================================================================== AMQP as the output

@asyncio_test
async def test_http_to_amqp_answers_with_the_services_reply(rabbitmq: RabbitMQ) -> None:
    uid = _uid()
    consumer = _http_source()
    async with _amqp_service(rabbitmq, uid) as service, \
            _gateway(uid, consumer, _to_amqp(rabbitmq, uid)) as gw:
        answers = await asyncio.gather(*(_ask_http(consumer, uid, f"i{n}") for n in range(8)))
        assert [(status, body) for status, _, body in answers] == [
            (200, {"price": 42, "item": f"i{n}"}) for n in range(8)]
        # The service saw AMQP requests: reply-to the gateway's reply address, a
        # correlation-id equal to the CloudEvent's correlationid extension.
        request = service.requests[0]
        assert request.reply_to == f"/queue/gw-replies-{uid}"
        assert request.correlation_id == request.properties["cloudEvents_correlationid"]
        assert request.properties["cloudEvents_type"] == "com.example.quote.http"
        assert gw.count("xrgw_replies_total", route="reply", result="answered") == 8
        assert not gw.dlq.written


@asyncio_test
async def test_no_amqp_answer_is_a_504_and_a_late_one_is_counted(rabbitmq: RabbitMQ) -> None:
    uid = _uid()
    consumer = _http_source()
    async with _amqp_service(rabbitmq, uid, delay=2.0) as service, \
            _gateway(uid, consumer, _to_amqp(rabbitmq, uid), 0.5) as gw:
        status, _, body = await _ask_http(consumer, uid)
        assert status == 504 and body["detail"] == "no reply within 0.5 s"
        await _until(lambda: gw.count("xrgw_replies_late_total", endpoint="svc") >= 1,
                     "the late answer is counted")
        await gw.route.wait_idle()
        assert gw.reasons() == ["no-reply"]
        assert len(service.requests) == 1  # not sent again


@asyncio_test
async def test_an_amqp_answer_without_correlation_is_dead_lettered(rabbitmq: RabbitMQ) -> None:
    uid = _uid()
    consumer = _http_source()
    async with _amqp_service(rabbitmq, uid, correlate=False), \
            _gateway(uid, consumer, _to_amqp(rabbitmq, uid), 1.0) as gw:
        status, _, _ = await _ask_http(consumer, uid)
        assert status == 504
        await _until(lambda: "uncorrelated-reply" in gw.reasons(),
                     "the uncorrelated answer is dead-lettered")
        await gw.route.wait_idle()
        assert sorted(gw.reasons()) == ["no-reply", "uncorrelated-reply"]


# ====================================================================== AMQP as the source

@asyncio_test
async def test_amqp_to_http_answers_the_reply_to_with_the_correlation_id(
        rabbitmq: RabbitMQ) -> None:
    uid = _uid()
    async with _http_service() as url, \
            _gateway(uid, _amqp_source(rabbitmq, uid), _to_http(url)) as gw, \
            _amqp_requester(rabbitmq, uid) as requester:
        answers = await asyncio.to_thread(requester.ask_many,
                                          [_item("figs"), _item("nuts")], TIMEOUT)
        assert [_json(a.body) for a in answers] == [{"price": 9, "item": "figs"},
                                                    {"price": 9, "item": "nuts"}]
        assert not requester.strays
        await gw.route.wait_idle()
        assert gw.count("xrgw_replies_total", route="reply", result="answered") == 2


@asyncio_test
async def test_amqp_to_nats_answers_by_message_id_without_a_correlation_id(
        rabbitmq: RabbitMQ, nats_server: NatsServer) -> None:
    uid = _uid()
    async with _nats_service(nats_server.url, uid), \
            _gateway(uid, _amqp_source(rabbitmq, uid), _to_nats(nats_server.url, uid)), \
            _amqp_requester(rabbitmq, uid) as requester:
        answer = await asyncio.to_thread(requester.ask, _item("oats"), TIMEOUT,
                                         message_id=f"m-{uid}", correlation=False)
        assert answer.correlation_id == f"m-{uid}"
        assert _json(answer.body) == {"price": 7, "item": "oats"}


@asyncio_test
async def test_amqp_to_amqp_keeps_each_sides_correlation(rabbitmq: RabbitMQ) -> None:
    uid = _uid()
    async with _amqp_service(rabbitmq, uid) as service, \
            _gateway(uid, _amqp_source(rabbitmq, uid), _to_amqp(rabbitmq, uid)), \
            _amqp_requester(rabbitmq, uid) as requester:
        answer = await asyncio.to_thread(requester.ask, _item("rye"), TIMEOUT)
        assert _json(answer.body) == {"price": 42, "item": "rye"}
        [request] = service.requests
        assert request.reply_to == f"/queue/gw-replies-{uid}"  # the gateway's, not the client's
        assert answer.correlation_id != request.correlation_id
        assert answer.reply_to is None


@asyncio_test
async def test_an_amqp_requester_gets_nothing_when_the_service_is_silent(
        rabbitmq: RabbitMQ) -> None:
    uid = _uid()
    async with _amqp_service(rabbitmq, uid, answer=lambda body: None) as service, \
            _gateway(uid, _amqp_source(rabbitmq, uid), _to_amqp(rabbitmq, uid), 0.5) as gw, \
            _amqp_requester(rabbitmq, uid) as requester:
        with pytest.raises(NoAnswer):
            await asyncio.to_thread(requester.ask, _item("air"), 3.0)
        await _until(lambda: gw.reasons() == ["no-reply"], "the request is dead-lettered")
        await gw.route.wait_idle()
        assert len(service.requests) == 1
        assert not requester.strays


@asyncio_test
async def test_an_amqp_request_is_settled_only_after_its_answer(rabbitmq: RabbitMQ) -> None:
    """At least once on the request side: while the service has not answered, the
    request is unsettled at the source; a gateway that stops then leaves it in the queue,
    and the next one answers it."""
    uid = _uid()
    async with _amqp_requester(rabbitmq, uid) as requester:
        asking = asyncio.create_task(asyncio.to_thread(requester.ask, _item("tea"), 40.0))
        async with _amqp_service(rabbitmq, uid, delay=60.0) as slow, \
                _gateway(uid, _amqp_source(rabbitmq, uid), _to_amqp(rabbitmq, uid), 60.0):
            await _until(lambda: len(slow.requests) == 1, "the slow service got it")
        # The gateway stopped before the answer: the request went back to its queue.
        async with _amqp_service(rabbitmq, uid) as service, \
                _gateway(uid, _amqp_source(rabbitmq, uid), _to_amqp(rabbitmq, uid)):
            answer = await asyncio.wait_for(asking, 40.0)
        assert _json(answer.body) == {"price": 42, "item": "tea"}
        assert len(service.requests) == 1


# ====================================================================== Kafka <-> AMQP

@asyncio_test
async def test_kafka_to_amqp_and_amqp_to_kafka(tansu: Tansu, rabbitmq: RabbitMQ) -> None:
    uid = _uid()
    await asyncio.to_thread(_kafka_topics, tansu, uid)
    async with _amqp_service(rabbitmq, uid), \
            _gateway(uid, _kafka_source(tansu, uid), _to_amqp(rabbitmq, uid)), \
            _kafka_requester(tansu, uid) as requester:
        answer = await asyncio.to_thread(requester.ask, _item("kafka-amqp"), TIMEOUT)
        assert _json(answer.value) == {"price": 42, "item": "kafka-amqp"}
    async with _kafka_service(tansu, uid), \
            _gateway(uid, _amqp_source(rabbitmq, uid), _to_kafka(tansu, uid)), \
            _amqp_requester(rabbitmq, uid) as requester:
        got = await asyncio.to_thread(requester.ask, _item("amqp-kafka"), TIMEOUT)
        assert _json(got.body) == {"price": 42, "item": "amqp-kafka"}


# ====================================================================== with MQTT 5

@asyncio_test
async def test_mqtt5_to_kafka_answers_mosquitto_rr(tansu: Tansu, mosquitto: Mosquitto) -> None:
    uid = _uid()
    await asyncio.to_thread(_kafka_topics, tansu, uid)
    async with _kafka_service(tansu, uid), \
            _gateway(uid, _mqtt_source(mosquitto, uid), _to_kafka(tansu, uid)):
        assert await _mosquitto_rr(mosquitto, uid, "kiwi") == {"price": 42, "item": "kiwi"}


@asyncio_test
async def test_mqtt5_to_amqp_answers_mosquitto_rr(rabbitmq: RabbitMQ,
                                                  mosquitto: Mosquitto) -> None:
    uid = _uid()
    async with _amqp_service(rabbitmq, uid), \
            _gateway(uid, _mqtt_source(mosquitto, uid), _to_amqp(rabbitmq, uid)):
        assert await _mosquitto_rr(mosquitto, uid, "lime") == {"price": 42, "item": "lime"}


@asyncio_test
async def test_kafka_and_amqp_to_an_mqtt5_service(tansu: Tansu, rabbitmq: RabbitMQ,
                                                  mosquitto: Mosquitto) -> None:
    uid = _uid()
    await asyncio.to_thread(_kafka_topics, tansu, uid)
    async with _mqtt_service(mosquitto, uid), \
            _gateway(uid, _kafka_source(tansu, uid), _to_mqtt(mosquitto, uid)), \
            _kafka_requester(tansu, uid) as kafka_requester:
        answer = await asyncio.to_thread(kafka_requester.ask, _item("pear"), TIMEOUT)
        assert _json(answer.value) == {"price": 5, "item": "pear"}
    async with _mqtt_service(mosquitto, uid), \
            _gateway(uid, _amqp_source(rabbitmq, uid), _to_mqtt(mosquitto, uid)), \
            _amqp_requester(rabbitmq, uid) as amqp_requester:
        got = await asyncio.to_thread(amqp_requester.ask, _item("quince"), TIMEOUT)
        assert _json(got.body) == {"price": 5, "item": "quince"}
