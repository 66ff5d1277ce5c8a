"""Request-reply across protocols (issue 17 section 2), against a real nats-server,
mosquitto (MQTT 5) and HTTP servers on loopback: a `reply` route sends each request to
its output as a request, waits for the answer and carries it back to the sender (HTTP
response, NATS reply subject, MQTT 5 response topic with the correlation data). Bad
cases: no answer (504 + dead letter `no-reply`), a late answer (dropped, counted in
`xrgw_replies_late`), an answer without correlation (dead letter `uncorrelated-reply`).

The services that answer are plain clients of the brokers (nats-py, the gateway's own MQTT
adapters used as an ordinary MQTT 5 client, an aiohttp server)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import nats
from aiohttp import web
from support import asyncio_test

from adapters.http import HttpConsumer, HttpProducer
from adapters.memory import MemoryProducer
from adapters.mqtt import MqttConsumer, MqttProducer
from adapters.nats import NatsConsumer, NatsProducer
from gateway.convert import Converter
from gateway.deadletter.format import deadletter_metadata
from gateway.definitions import read_document
from gateway.observability.metrics import Metrics
from gateway.ports import Consumer, EndpointSettings, Producer, read_one, write
from gateway.record import NativeMessage
from gateway.runtime.route import Output, Route
from harness.brokers import Mosquitto, NatsServer, free_port

TIMEOUT = 10.0
REPLY_TIMEOUT = 3.0


def _uid() -> str:
    return uuid.uuid4().hex[:10]


def _ce(name: str) -> dict[str, Any]:
    return {"envelope": "CloudEvents/1.0", "envelopemetadata": {
        "type": {"value": f"com.example.quote.{name}"},
        "source": {"value": "/quotes/{id}", "type": "uritemplate"}}}


#: One request definition per source protocol; the route answers whichever matched.
DOC = {"messagegroups": {"quotes": {"envelope": "CloudEvents/1.0", "messages": {
    "http": {"protocol": "HTTP", "protocoloptions": {"path": {"value": "/quote/{id}"}},
             **_ce("http")},
    "nats": {"protocol": "NATS", "protocoloptions": {"subject": {"value": "quote.{id}.ask"}},
             **_ce("nats")},
    "mqtt": {"protocol": "MQTT/5.0", "protocoloptions": {"topic_name": "quote/{id}/ask"},
             **_ce("mqtt")},
}}}}
CATALOG = read_document(DOC, "quotes.json")


# ---------------------------------------------------------------------- the route under test

class Gateway:
    def __init__(self, route: Route, dlq: MemoryProducer, metrics: Metrics) -> None:
        self.route = route
        self.dlq = dlq
        self.metrics = metrics

    def count(self, name: str, **labels: str) -> float:
        return self.metrics.registry.get_sample_value(name, labels) or 0.0

    def reasons(self) -> list[str]:
        return [deadletter_metadata(r)["xrgw-reason"] for r in self.dlq.written]


@asynccontextmanager
async def _gateway(consumer: Consumer, output: Output,
                   reply_timeout: float = REPLY_TIMEOUT) -> AsyncIterator[Gateway]:
    dlq, metrics = MemoryProducer(), Metrics()
    route = Route("reply", "in", consumer, Converter(CATALOG.messages()), [output],
                  deadletter=Output("dlq", "KAFKA", dlq, defaults={"topic": "dead"}),
                  metrics=metrics, reply_timeout=reply_timeout)
    await route.start()
    try:
        async with asyncio.timeout(TIMEOUT):
            while not route.ready:
                await asyncio.sleep(0.02)
        yield Gateway(route, dlq, metrics)
    finally:
        await route.stop(grace=2.0)
        await output.producer.aclose()


# ---------------------------------------------------------------------- services that answer

Answerer = Callable[[bytes], Awaitable[bytes | None]]


async def _quote(body: bytes) -> bytes | None:
    """The service: a quote for the requested item (None: no answer)."""
    asked = json.loads(body) if body else {}
    return json.dumps({"price": 42, "item": asked.get("item")}).encode()


@asynccontextmanager
async def _nats_service(url: str, subject: str, answer: Answerer = _quote,
                        delay: float = 0.0) -> AsyncIterator[list[Any]]:
    """Answers requests on `subject` (after `delay`); yields the requests seen."""
    nc = await nats.connect(url)
    seen: list[Any] = []

    async def on_request(msg: Any) -> None:
        seen.append(msg)
        reply = await answer(msg.data)
        if delay:
            await asyncio.sleep(delay)
        if reply is not None and msg.reply:
            await nc.publish(msg.reply, reply, headers={"Content-Type": "application/json"})

    await nc.subscribe(subject, cb=on_request)
    await nc.flush()
    try:
        yield seen
    finally:
        await nc.close()


@asynccontextmanager
async def _mqtt_service(url: str, topic: str, answer: Answerer = _quote,
                        correlate: bool = True) -> AsyncIterator[list[NativeMessage]]:
    """Answers MQTT 5 requests on `topic` to their response topic (with their correlation
    data unless `correlate` is false)."""
    requests = MqttConsumer(EndpointSettings(url, client_id=f"svc-{_uid()}",
                                             options={"filters": [topic]}))
    answers = MqttProducer(EndpointSettings(url))
    await requests.connect()
    await answers.connect()
    seen: list[NativeMessage] = []

    async def serve() -> None:
        while True:
            delivery = await read_one(requests)
            request = delivery.message
            seen.append(request)
            await delivery.ack()
            reply = await answer(request.body_bytes())
            response_topic = request.get("response_topic")
            if reply is None or not isinstance(response_topic, str):
                continue
            fields: dict[str, Any] = {"topic_name": response_topic, "qos": 1,
                                      "content_type": "application/json"}
            if correlate and request.get("correlation_data") is not None:
                fields["correlation_data"] = request.get("correlation_data")
            await write(answers, [NativeMessage("MQTT/5.0", fields, payload=reply)])

    task = asyncio.create_task(serve())
    try:
        yield seen
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await requests.aclose()
        await answers.aclose()


@asynccontextmanager
async def _http_service(answer: Answerer = _quote) -> AsyncIterator[str]:
    """An HTTP service answering each request 200 with the quote; yields its URL."""
    async def handle(request: web.BaseRequest) -> web.StreamResponse:
        reply = await answer(await request.read())
        if reply is None:
            await asyncio.sleep(3600)
        return web.Response(body=reply, content_type="application/json",
                            headers={"X-Service": "quotes"})

    runner = web.ServerRunner(web.Server(handle))
    await runner.setup()
    port = free_port()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


# ---------------------------------------------------------------------- sources and outputs

def _http_source() -> HttpConsumer:
    return HttpConsumer(EndpointSettings("http://127.0.0.1:0",
                                         options={"settle_timeout": 30}))


def _nats_source(url: str, uid: str) -> NatsConsumer:
    return NatsConsumer(EndpointSettings(url, options={"subjects": [f"quote.{uid}.ask"]}))


def _mqtt_source(url: str, uid: str) -> MqttConsumer:
    return MqttConsumer(EndpointSettings(url, client_id=f"gw-{uid}",
                                         options={"filters": [f"quote/{uid}/ask"]}))


def _to_nats(url: str, subject: str) -> Output:
    return Output("svc", "NATS", NatsProducer(EndpointSettings(url)),
                  defaults={"subject": subject})


def _to_mqtt(url: str, topic: str) -> Output:
    producer: Producer = MqttProducer(EndpointSettings(url))
    return Output("svc", "MQTT/5.0", producer, defaults={"topic_name": topic})


def _to_http(url: str) -> Output:
    return Output("svc", "HTTP", HttpProducer(EndpointSettings(url)),
                  defaults={"path": "/svc"})


async def _ask_http(consumer: HttpConsumer, uid: str,
                    item: str = "tea") -> tuple[int, dict[str, str], Any]:
    async with aiohttp.ClientSession() as session, session.post(
            f"{consumer.url}/quote/{uid}", json={"item": item},
            timeout=aiohttp.ClientTimeout(total=TIMEOUT)) as response:
        return response.status, dict(response.headers), json.loads(await response.read())


async def _ask_nats(url: str, uid: str, item: str = "tea") -> Any:
    nc = await nats.connect(url)
    try:
        msg = await nc.request(f"quote.{uid}.ask", json.dumps({"item": item}).encode(),
                               timeout=TIMEOUT,
                               headers={"Content-Type": "application/json"})
        return msg
    finally:
        await nc.close()


@asynccontextmanager
async def _mqtt_requester(url: str, uid: str) -> AsyncIterator[
        Callable[[str, str], Awaitable[NativeMessage]]]:
    """An MQTT 5 client that asks on quote/<uid>/ask with its own response topic and
    correlation data, and returns the answer it got."""
    response_topic = f"client/{uid}/answers"
    answers = MqttConsumer(EndpointSettings(url, client_id=f"req-{uid}",
                                            options={"filters": [response_topic]}))
    asker = MqttProducer(EndpointSettings(url))
    await answers.connect()
    await asker.connect()

    async def ask(item: str, correlation: str) -> NativeMessage:
        request = NativeMessage("MQTT/5.0", {
            "topic_name": f"quote/{uid}/ask", "qos": 1, "response_topic": response_topic,
            "correlation_data": correlation, "content_type": "application/json"},
            data={"item": item})
        [outcome] = await write(asker, [request])
        assert outcome.delivered, outcome
        async with asyncio.timeout(TIMEOUT):
            delivery = await read_one(answers)
        await delivery.ack()
        return delivery.message

    try:
        yield ask
    finally:
        await answers.aclose()
        await asker.aclose()


def _body(record: NativeMessage) -> Any:
    return json.loads(record.body_bytes())


# ====================================================================== the pairs

@asyncio_test
async def test_http_to_nats_returns_the_service_answer(nats_server: NatsServer) -> None:
    uid = _uid()
    consumer = _http_source()
    async with _nats_service(nats_server.url, f"svc.{uid}") as seen, \
            _gateway(consumer, _to_nats(nats_server.url, f"svc.{uid}")) as gw:
        status, headers, body = await _ask_http(consumer, uid)
        assert status == 200, body
        assert body == {"price": 42, "item": "tea"}
        assert headers["Content-Type"].startswith("application/json")
        # The request went as a binary CloudEvent carrying the correlation token.
        [request] = seen
        assert request.headers["ce-type"] == "com.example.quote.http"
        assert request.reply.endswith(request.headers["ce-correlationid"])
        assert gw.count("xrgw_replies_total", route="reply", result="answered") == 1
        assert not gw.dlq.written


@asyncio_test
async def test_http_to_mqtt5_returns_the_service_answer(mosquitto: Mosquitto) -> None:
    uid = _uid()
    consumer = _http_source()
    async with _mqtt_service(mosquitto.url, f"svc/{uid}") as seen, \
            _gateway(consumer, _to_mqtt(mosquitto.url, f"svc/{uid}")) as gw:
        status, _, body = await _ask_http(consumer, uid, "cake")
        assert status == 200, body
        assert body == {"price": 42, "item": "cake"}
        [request] = seen
        # The service saw an MQTT 5 request: response topic, correlation data, and the
        # same token as the CloudEvent's correlationid extension.
        assert str(request.get("response_topic")).startswith("xrgw/reply/")
        token = request.get("correlation_data")
        assert token and ("correlationid", token) in request.pairs("user_properties")
        assert not gw.dlq.written


@asyncio_test
async def test_http_to_http_returns_the_egress_response() -> None:
    uid = _uid()
    consumer = _http_source()
    async with _http_service() as url, _gateway(consumer, _to_http(url)) as gw:
        status, headers, body = await _ask_http(consumer, uid, "jam")
        assert status == 200 and body == {"price": 42, "item": "jam"}
        assert headers.get("X-Service") == "quotes"  # the response's headers come along
        assert gw.count("xrgw_replies_total", route="reply", result="answered") == 1


@asyncio_test
async def test_nats_to_nats_answers_the_reply_subject(nats_server: NatsServer) -> None:
    uid = _uid()
    async with _nats_service(nats_server.url, f"svc.{uid}"), \
            _gateway(_nats_source(nats_server.url, uid),
                     _to_nats(nats_server.url, f"svc.{uid}")):
        answer = await _ask_nats(nats_server.url, uid, "milk")
        assert json.loads(answer.data) == {"price": 42, "item": "milk"}


@asyncio_test
async def test_nats_to_http_answers_the_reply_subject(nats_server: NatsServer) -> None:
    uid = _uid()
    async with _http_service() as url, \
            _gateway(_nats_source(nats_server.url, uid), _to_http(url)):
        answer = await _ask_nats(nats_server.url, uid, "rye")
        assert json.loads(answer.data) == {"price": 42, "item": "rye"}
        headers = {name.lower(): value for name, value in (answer.headers or {}).items()}
        assert headers["content-type"].startswith("application/json")


@asyncio_test
async def test_mqtt5_to_nats_answers_the_response_topic_with_the_correlation(
        mosquitto: Mosquitto, nats_server: NatsServer) -> None:
    uid = _uid()
    async with _nats_service(nats_server.url, f"svc.{uid}"), \
            _gateway(_mqtt_source(mosquitto.url, uid),
                     _to_nats(nats_server.url, f"svc.{uid}")), \
            _mqtt_requester(mosquitto.url, uid) as ask:
        answer = await ask("oats", "corr-1")
        assert answer.get("correlation_data") == "corr-1"
        assert _body(answer) == {"price": 42, "item": "oats"}


@asyncio_test
async def test_mqtt5_to_http_answers_the_response_topic_with_the_correlation(
        mosquitto: Mosquitto) -> None:
    uid = _uid()
    async with _http_service() as url, \
            _gateway(_mqtt_source(mosquitto.url, uid), _to_http(url)), \
            _mqtt_requester(mosquitto.url, uid) as ask:
        first = await ask("figs", "c-1")
        second = await ask("nuts", "c-2")
        assert (first.get("correlation_data"), _body(first)["item"]) == ("c-1", "figs")
        assert (second.get("correlation_data"), _body(second)["item"]) == ("c-2", "nuts")


# ====================================================================== the bad cases

async def _never(body: bytes) -> bytes | None:
    return None


@asyncio_test
async def test_no_answer_is_a_504_problem_and_a_no_reply_dead_letter(
        nats_server: NatsServer) -> None:
    uid = _uid()
    consumer = _http_source()
    async with _nats_service(nats_server.url, f"svc.{uid}", _never) as seen, \
            _gateway(consumer, _to_nats(nats_server.url, f"svc.{uid}"), 0.5) as gw:
        status, headers, body = await _ask_http(consumer, uid)
        assert status == 504
        assert headers["Content-Type"].startswith("application/problem+json")
        assert body["status"] == 504 and body["detail"] == "no reply within 0.5 s"
        await gw.route.wait_idle()
        assert len(seen) == 1  # sent once: a request without an answer is not repeated
        assert gw.reasons() == ["no-reply"]
        assert gw.count("xrgw_replies_total", route="reply", result="no-reply") == 1


@asyncio_test
async def test_a_late_answer_is_dropped_and_counted(nats_server: NatsServer) -> None:
    uid = _uid()
    consumer = _http_source()
    async with _nats_service(nats_server.url, f"svc.{uid}", delay=1.0), \
            _gateway(consumer, _to_nats(nats_server.url, f"svc.{uid}"), 0.3) as gw:
        status, _, _ = await _ask_http(consumer, uid)
        assert status == 504
        async with asyncio.timeout(TIMEOUT):
            while gw.count("xrgw_replies_late_total", endpoint="svc") < 1:
                await asyncio.sleep(0.05)
        await gw.route.wait_idle()
        assert gw.reasons() == ["no-reply"]  # the request; the late answer is not a letter


@asyncio_test
async def test_an_answer_without_correlation_is_dead_lettered(mosquitto: Mosquitto) -> None:
    uid = _uid()
    consumer = _http_source()
    async with _mqtt_service(mosquitto.url, f"svc/{uid}", correlate=False), \
            _gateway(consumer, _to_mqtt(mosquitto.url, f"svc/{uid}"), 1.0) as gw:
        status, _, body = await _ask_http(consumer, uid)
        assert status == 504, body
        async with asyncio.timeout(TIMEOUT):
            while "uncorrelated-reply" not in gw.reasons():
                await asyncio.sleep(0.05)
        await gw.route.wait_idle()
        assert sorted(gw.reasons()) == ["no-reply", "uncorrelated-reply"]
        letter = next(r for r in gw.dlq.written
                      if deadletter_metadata(r)["xrgw-reason"] == "uncorrelated-reply")
        assert "carries no correlation" in deadletter_metadata(letter)["xrgw-detail"]
