"""Request-reply across protocols (issue 17 section 2), against a real nats-server,
mosquitto (MQTT 5) and HTTP servers on loopback: a `reply` route sends each request to
its output as a request, waits for the answer and carries it back to the sender (HTTP
response, NATS reply subject, MQTT 5 response topic with the correlation data). Bad
cases: no answer (504 + dead letter `no-reply`), a late answer (dropped, counted in
`xrgw_replies_late`), an answer without correlation (dead letter `uncorrelated-reply`).

Reply definitions (issue 32): answers that conform to the route's `reply_definitions` are
rendered for the sender by its protocol's definition (HTTP status and headers, MQTT 5
user properties, NATS headers); answers that do not are dead-lettered as
`nonconforming-reply` and the sender gets a 502 problem (HTTP) or, with `reply_errors:
problem`, a problem CloudEvent (NATS, MQTT 5) -- also on a timeout. An HTTP CloudEvents
batch is answered with a batch, one event per member. Third-party clients: curl (HTTP)
and mosquitto_rr (MQTT 5).

The services that answer are plain clients of the brokers (nats-py, the gateway's own MQTT
adapters used as an ordinary MQTT 5 client, an aiohttp server)."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import nats
from aiohttp import web
from support import ReplyGateway as Gateway
from support import asyncio_test

from adapters.http import HttpConsumer, HttpProducer
from adapters.memory import MemoryProducer
from adapters.mqtt import MqttConsumer, MqttProducer
from adapters.nats import NatsConsumer, NatsProducer
from gateway.convert import Converter
from gateway.deadletter.format import deadletter_metadata
from gateway.definitions import read_document
from gateway.observability.metrics import Metrics
from gateway.policies.reply import ReplyErrors
from gateway.ports import Consumer, EndpointSettings, Producer, read_one, write
from gateway.record import NativeMessage
from gateway.runtime.reply import ReplyDefinitions
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


REPLY_BASE = "/messagegroups/replies/messages/quote.reply"
REPLY_TYPE = "com.example.quote.reply"

#: One request definition per source protocol; the route answers whichever matched. The
#: replies: a quote is a CloudEvent of type REPLY_TYPE (`quote.reply`); its overlays say
#: how a sender of each protocol gets one (the pattern of docs/request-reply.md).
DOC = {"messagegroups": {"quotes": {"envelope": "CloudEvents/1.0", "messages": {
    "http": {"protocol": "HTTP", "protocoloptions": {"path": {"value": "/quote/{id}"}},
             **_ce("http")},
    "nats": {"protocol": "NATS", "protocoloptions": {"subject": {"value": "quote.{id}.ask"}},
             **_ce("nats")},
    "mqtt": {"protocol": "MQTT/5.0", "protocoloptions": {"topic_name": "quote/{id}/ask"},
             **_ce("mqtt")},
}}, "replies": {"envelope": "CloudEvents/1.0", "messages": {
    "quote.reply": {"envelope": "CloudEvents/1.0", "envelopemetadata": {
        "type": {"value": REPLY_TYPE}, "source": {"value": "/pricing/{item}"},
        "correlationid": {"type": "string"}}},
    "quote.reply.http": {"basemessage": REPLY_BASE, "protocol": "HTTP", "protocoloptions": {
        "status": "201", "headers": [{"name": "X-Quote", "value": "{item}"}]}},
    "quote.reply.mqtt": {"basemessage": REPLY_BASE, "protocol": "MQTT/5.0",
                         "protocoloptions": {"user_properties": [
                             {"name": "kind", "value": "quote"}]}},
    "quote.reply.nats": {"basemessage": REPLY_BASE, "protocol": "NATS", "protocoloptions": {
        "headers": [{"name": "X-Kind", "value": "quote"}]}},
}}}}
CATALOG = read_document(DOC, "quotes.json")
REQUESTS = [m for m in CATALOG.messages() if m.group_id == "quotes"]
REPLIES = [m for m in CATALOG.messages() if m.group_id == "replies"]
PROBLEM_TYPE = "io.xrgw.reply.problem"


# ---------------------------------------------------------------------- the route under test

@asynccontextmanager
async def _gateway(consumer: Consumer, output: Output,
                   reply_timeout: float = REPLY_TIMEOUT, *, replies: bool = False,
                   errors: ReplyErrors = "none") -> AsyncIterator[Gateway]:
    """A reply route from `consumer` to `output`; `replies`: with the reply definitions
    (`reply_definitions: [replies]`), `errors`: its `reply_errors`."""
    dlq, metrics = MemoryProducer(), Metrics()
    route = Route("reply", "in", consumer, Converter(REQUESTS), [output],
                  deadletter=Output("dlq", "KAFKA", dlq, defaults={"topic": "dead"}),
                  metrics=metrics, reply_timeout=reply_timeout,
                  reply_definitions=ReplyDefinitions(REPLIES) if replies else None,
                  reply_errors=errors)
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


def _reply_attributes(body: bytes, correlation: str | None) -> dict[str, str]:
    """The CloudEvents attributes of a conforming answer (`quote.reply`) to a request with
    body `body` carrying `correlation`: what a CloudEvents service sends back."""
    asked = json.loads(body) if body else {}
    attributes = {"specversion": "1.0", "id": _uid(), "type": REPLY_TYPE,
                  "source": f"/pricing/{asked.get('item')}"}
    if correlation:
        attributes["correlationid"] = correlation
    return attributes


@asynccontextmanager
async def _nats_service(url: str, subject: str, answer: Answerer = _quote,
                        delay: float = 0.0, cloudevent: bool = False
                        ) -> AsyncIterator[list[Any]]:
    """Answers requests on `subject` (after `delay`; `cloudevent`: as a binary
    CloudEvent of type REPLY_TYPE that copies the request's correlationid); yields the
    requests seen."""
    nc = await nats.connect(url)
    seen: list[Any] = []

    async def on_request(msg: Any) -> None:
        seen.append(msg)
        reply = await answer(msg.data)
        if delay:
            await asyncio.sleep(delay)
        headers = {"Content-Type": "application/json"}
        if cloudevent:
            asked = (msg.headers or {}).get("ce-correlationid")
            headers.update({f"ce-{k}": v for k, v in
                            _reply_attributes(msg.data, asked).items()})
        if reply is not None and msg.reply:
            await nc.publish(msg.reply, reply, headers=headers)

    await nc.subscribe(subject, cb=on_request)
    await nc.flush()
    try:
        yield seen
    finally:
        await nc.close()


@asynccontextmanager
async def _mqtt_service(url: str, topic: str, answer: Answerer = _quote,
                        correlate: bool = True, cloudevent: bool = False
                        ) -> AsyncIterator[list[NativeMessage]]:
    """Answers MQTT 5 requests on `topic` to their response topic (with their correlation
    data unless `correlate` is false; `cloudevent`: as a binary CloudEvent of type
    REPLY_TYPE)."""
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
            if cloudevent:
                asked = dict(request.pairs("user_properties")).get("correlationid")
                fields["user_properties"] = [
                    {"name": k, "value": v} for k, v in
                    _reply_attributes(request.body_bytes(), asked).items()]
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
async def _http_service(answer: Answerer = _quote, cloudevent: bool = False
                        ) -> AsyncIterator[str]:
    """An HTTP service answering each request 200 with the quote (`cloudevent`: as a
    binary CloudEvent of type REPLY_TYPE); yields its URL."""
    async def handle(request: web.BaseRequest) -> web.StreamResponse:
        body = await request.read()
        reply = await answer(body)
        if reply is None:
            await asyncio.sleep(3600)
        headers = {"X-Service": "quotes"}
        if cloudevent:
            headers.update({f"ce-{k}": v for k, v in _reply_attributes(
                body, request.headers.get("ce-correlationid")).items()})
        return web.Response(body=reply, content_type="application/json", headers=headers)

    # A handler that never answers is cancelled at once when the test ends.
    runner = web.ServerRunner(web.Server(handle), shutdown_timeout=0.1)
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


# ====================================================================== reply definitions

def _headers(msg: Any) -> dict[str, str]:
    return {name.lower(): value for name, value in (msg.headers or {}).items()}


async def _plain(body: bytes) -> bytes | None:
    """A service that answers, but not as the reply definitions say (no CloudEvent)."""
    return b'{"error": "out of stock"}'


@asyncio_test
async def test_http_to_nats_a_conforming_answer_gets_its_definitions_status_and_headers(
        nats_server: NatsServer) -> None:
    uid = _uid()
    consumer = _http_source()
    async with _nats_service(nats_server.url, f"svc.{uid}", cloudevent=True), \
            _gateway(consumer, _to_nats(nats_server.url, f"svc.{uid}"), replies=True) as gw:
        status, headers, body = await _ask_http(consumer, uid, "tea")
        assert status == 201, body  # quote.reply.http's status, not 200
        assert headers["X-Quote"] == "tea"  # filled from the answer's source
        assert headers["ce-type"] == REPLY_TYPE and body == {"price": 42, "item": "tea"}
        assert gw.count("xrgw_replies_total", route="reply", result="answered") == 1
        assert not gw.dlq.written


@asyncio_test
async def test_http_to_nats_a_nonconforming_answer_is_a_502_and_a_dead_letter(
        nats_server: NatsServer) -> None:
    uid = _uid()
    consumer = _http_source()
    async with _nats_service(nats_server.url, f"svc.{uid}", _plain) as seen, \
            _gateway(consumer, _to_nats(nats_server.url, f"svc.{uid}"), replies=True) as gw:
        status, headers, body = await _ask_http(consumer, uid)
        assert status == 502, body
        assert headers["Content-Type"].startswith("application/problem+json")
        assert body["detail"].endswith("the service's answer conforms to no reply definition")
        await gw.route.wait_idle()
        assert len(seen) == 1  # asked once: the request itself went through
        [letter] = gw.dlq.written
        meta = deadletter_metadata(letter)
        assert meta["xrgw-reason"] == "nonconforming-reply"
        assert meta["xrgw-source-endpoint"] == "svc"
        assert json.loads(letter.body_bytes()) == {"error": "out of stock"}  # the answer
        assert gw.count("xrgw_replies_total", route="reply", result="nonconforming") == 1


@asyncio_test
async def test_without_reply_definitions_the_same_answer_passes_as_before(
        nats_server: NatsServer) -> None:
    uid = _uid()
    consumer = _http_source()
    async with _nats_service(nats_server.url, f"svc.{uid}", _plain), \
            _gateway(consumer, _to_nats(nats_server.url, f"svc.{uid}")) as gw:
        status, _, body = await _ask_http(consumer, uid)
        assert (status, body) == (200, {"error": "out of stock"})
        assert not gw.dlq.written


@asyncio_test
async def test_http_to_mqtt5_a_conforming_answer_is_rendered_by_the_http_definition(
        mosquitto: Mosquitto) -> None:
    uid = _uid()
    consumer = _http_source()
    async with _mqtt_service(mosquitto.url, f"svc/{uid}", cloudevent=True), \
            _gateway(consumer, _to_mqtt(mosquitto.url, f"svc/{uid}"), replies=True) as gw:
        status, headers, body = await _ask_http(consumer, uid, "cake")
        assert (status, headers["X-Quote"], body["item"]) == (201, "cake", "cake")
        # The token the gateway put on the request came back on the answer.
        assert headers["ce-correlationid"]
        assert not gw.dlq.written


@asyncio_test
async def test_http_to_http_the_egress_status_gives_way_to_the_definitions() -> None:
    uid = _uid()
    consumer = _http_source()
    async with _http_service(cloudevent=True) as url, \
            _gateway(consumer, _to_http(url), replies=True) as gw:
        status, headers, body = await _ask_http(consumer, uid, "jam")
        assert (status, headers["X-Quote"], body["item"]) == (201, "jam", "jam")
        assert gw.count("xrgw_replies_total", route="reply", result="answered") == 1
    consumer = _http_source()
    async with _http_service(_plain) as url, \
            _gateway(consumer, _to_http(url), replies=True) as gw:
        status, _, body = await _ask_http(consumer, uid)
        assert status == 502, body
        await gw.route.wait_idle()
        assert gw.reasons() == ["nonconforming-reply"]


@asyncio_test
async def test_nats_to_nats_conforming_answers_carry_the_nats_definitions_headers(
        nats_server: NatsServer) -> None:
    uid = _uid()
    async with _nats_service(nats_server.url, f"svc.{uid}", cloudevent=True), \
            _gateway(_nats_source(nats_server.url, uid),
                     _to_nats(nats_server.url, f"svc.{uid}"), replies=True):
        answer = await _ask_nats(nats_server.url, uid, "milk")
        headers = _headers(answer)
        assert headers["x-kind"] == "quote" and headers["ce-type"] == REPLY_TYPE
        assert json.loads(answer.data) == {"price": 42, "item": "milk"}


async def _problem_of(data: bytes, headers: dict[str, str]) -> dict[str, Any]:
    assert headers["ce-type"] == PROBLEM_TYPE, headers
    # The NATS binding carries it as an attribute (`ce-datacontenttype`).
    assert headers["ce-datacontenttype"] == "application/problem+json"
    problem: dict[str, Any] = json.loads(data)
    return problem


@asyncio_test
async def test_nats_sender_gets_a_problem_for_a_nonconforming_answer_when_asked(
        nats_server: NatsServer) -> None:
    uid = _uid()
    async with _nats_service(nats_server.url, f"svc.{uid}", _plain), \
            _gateway(_nats_source(nats_server.url, uid),
                     _to_nats(nats_server.url, f"svc.{uid}"), replies=True,
                     errors="problem") as gw:
        answer = await _ask_nats(nats_server.url, uid)
        problem = await _problem_of(answer.data, _headers(answer))
        assert (problem["status"], problem["title"]) == (502, "Bad Gateway")
        assert problem["detail"] == "the service's answer conforms to no reply definition"
        await gw.route.wait_idle()
        assert gw.reasons() == ["nonconforming-reply"]


@asyncio_test
async def test_nats_to_http_a_timeout_is_a_problem_on_the_reply_subject(
        nats_server: NatsServer) -> None:
    uid = _uid()
    async with _http_service(_never) as url, \
            _gateway(_nats_source(nats_server.url, uid), _to_http(url), 0.5,
                     errors="problem") as gw:
        answer = await _ask_nats(nats_server.url, uid)
        problem = await _problem_of(answer.data, _headers(answer))
        assert (problem["status"], problem["detail"]) == (504, "no reply within 0.5 s")
        await gw.route.wait_idle()
        assert gw.reasons() == ["no-reply"]
        assert gw.count("xrgw_replies_total", route="reply", result="no-reply") == 1


@asyncio_test
async def test_nats_sender_without_reply_errors_gets_nothing_on_a_timeout(
        nats_server: NatsServer) -> None:
    """Today's behaviour, kept: the requester's own timeout tells it."""
    uid = _uid()
    async with _nats_service(nats_server.url, f"svc.{uid}", _never), \
            _gateway(_nats_source(nats_server.url, uid),
                     _to_nats(nats_server.url, f"svc.{uid}"), 0.3) as gw:
        nc = await nats.connect(nats_server.url)
        try:
            try:
                await nc.request(f"quote.{uid}.ask", b'{"item": "x"}', timeout=2.0,
                                 headers={"Content-Type": "application/json"})
                raise AssertionError("an answer came")
            except nats.errors.TimeoutError:
                pass
        finally:
            await nc.close()
        assert gw.reasons() == ["no-reply"]


@asyncio_test
async def test_mqtt5_to_nats_a_conforming_answer_gets_the_mqtt_definitions_properties(
        mosquitto: Mosquitto, nats_server: NatsServer) -> None:
    uid = _uid()
    async with _nats_service(nats_server.url, f"svc.{uid}", cloudevent=True), \
            _gateway(_mqtt_source(mosquitto.url, uid),
                     _to_nats(nats_server.url, f"svc.{uid}"), replies=True), \
            _mqtt_requester(mosquitto.url, uid) as ask:
        answer = await ask("oats", "corr-7")
        assert answer.get("correlation_data") == "corr-7"
        properties = dict(answer.pairs("user_properties"))
        assert (properties["kind"], properties["type"]) == ("quote", REPLY_TYPE)
        assert _body(answer) == {"price": 42, "item": "oats"}


@asyncio_test
async def test_mqtt5_sender_gets_problems_with_its_correlation_and_no_late_answer(
        mosquitto: Mosquitto, nats_server: NatsServer) -> None:
    """A timeout answers a problem CloudEvent to the response topic with the request's
    correlation data; the service's late answer is counted and not passed on (the next
    message on the response topic is the next request's answer)."""
    uid = _uid()
    slow = asyncio.Event()

    async def late_first(body: bytes) -> bytes | None:
        if not slow.is_set():
            slow.set()
            await asyncio.sleep(1.0)
        return await _quote(body)

    async with _nats_service(nats_server.url, f"svc.{uid}", late_first, cloudevent=True), \
            _gateway(_mqtt_source(mosquitto.url, uid),
                     _to_nats(nats_server.url, f"svc.{uid}"), 0.3, replies=True,
                     errors="problem") as gw, \
            _mqtt_requester(mosquitto.url, uid) as ask:
        first = await ask("figs", "c-late")
        assert first.get("correlation_data") == "c-late"
        assert dict(first.pairs("user_properties"))["type"] == PROBLEM_TYPE
        assert first.get("content_type") == "application/problem+json"
        assert _body(first)["status"] == 504
        async with asyncio.timeout(TIMEOUT):
            while gw.count("xrgw_replies_late_total", endpoint="svc") < 1:
                await asyncio.sleep(0.05)
        second = await ask("nuts", "c-next")
        assert second.get("correlation_data") == "c-next"
        assert _body(second) == {"price": 42, "item": "nuts"}


@asyncio_test
async def test_mqtt5_to_http_a_nonconforming_answer_is_a_problem_on_the_response_topic(
        mosquitto: Mosquitto) -> None:
    uid = _uid()
    async with _http_service(_plain) as url, \
            _gateway(_mqtt_source(mosquitto.url, uid), _to_http(url), replies=True,
                     errors="problem") as gw, \
            _mqtt_requester(mosquitto.url, uid) as ask:
        answer = await ask("figs", "c-9")
        assert answer.get("correlation_data") == "c-9"
        assert _body(answer)["status"] == 502
        await gw.route.wait_idle()
        assert gw.reasons() == ["nonconforming-reply"]


# ====================================================================== batches

def _batch_body(uid: str, *items: str) -> bytes:
    return json.dumps([{"specversion": "1.0", "id": f"{uid}-{n}",
                        "type": "com.example.quote.http", "source": f"/quotes/{uid}",
                        "datacontenttype": "application/json", "data": {"item": item}}
                       for n, item in enumerate(items)]).encode()


async def _skip_the_middle(body: bytes) -> bytes | None:
    """Answers every request but the one for `never`."""
    return None if json.loads(body).get("item") == "never" else await _quote(body)


@asyncio_test
async def test_an_http_batch_gets_a_batch_answer_one_event_per_member_in_order(
        nats_server: NatsServer) -> None:
    uid = _uid()
    consumer = _http_source()
    async with _nats_service(nats_server.url, f"svc.{uid}", _skip_the_middle,
                             cloudevent=True), \
            _gateway(consumer, _to_nats(nats_server.url, f"svc.{uid}"), 1.0,
                     replies=True) as gw:
        async with aiohttp.ClientSession() as session, session.post(
                f"{consumer.url}/quote/{uid}", data=_batch_body(uid, "a", "never", "c"),
                headers={"Content-Type": "application/cloudevents-batch+json"},
                timeout=aiohttp.ClientTimeout(total=TIMEOUT)) as response:
            assert response.status == 200
            assert response.headers["Content-Type"].startswith(
                "application/cloudevents-batch+json")
            events = json.loads(await response.read())
        assert [e["type"] for e in events] == [REPLY_TYPE, PROBLEM_TYPE, REPLY_TYPE]
        assert [e["data"].get("item") for e in (events[0], events[2])] == ["a", "c"]
        assert events[1]["data"]["status"] == 504
        await gw.route.wait_idle()
        assert gw.reasons() == ["no-reply"]
        assert gw.count("xrgw_replies_total", route="reply", result="answered") == 2


# ====================================================================== third-party clients

def _tool(name: str) -> str:
    exe = shutil.which(name)
    if exe is None:
        raise AssertionError(f"{name} is not installed: run scripts/install-system-deps.sh")
    return exe


async def _run(*argv: str) -> tuple[int, str, str]:
    """Run a client in a thread (the gateway runs on this loop meanwhile)."""
    done = await asyncio.to_thread(subprocess.run, list(argv), capture_output=True,
                                   timeout=60)
    return done.returncode, done.stdout.decode(errors="replace"), \
        done.stderr.decode(errors="replace")


@asyncio_test
async def test_curl_gets_the_definitions_status_and_a_batch_answer(
        nats_server: NatsServer) -> None:
    uid = _uid()
    consumer = _http_source()
    curl = _tool("curl")
    async with _nats_service(nats_server.url, f"svc.{uid}", cloudevent=True), \
            _gateway(consumer, _to_nats(nats_server.url, f"svc.{uid}"), replies=True):
        code, out, err = await _run(
            curl, "-sS", "-i", "--max-time", "30", "-H", "Content-Type: application/json",
            "--data-binary", '{"item": "tea"}', f"{consumer.url}/quote/{uid}")
        assert code == 0, err
        head, _, body = out.replace("\r\n", "\n").partition("\n\n")
        assert head.startswith("HTTP/1.1 201"), head
        assert "x-quote: tea" in head.lower()
        assert json.loads(body) == {"price": 42, "item": "tea"}
        code, out, err = await _run(
            curl, "-sS", "--max-time", "30",
            "-H", "Content-Type: application/cloudevents-batch+json",
            "--data-binary", _batch_body(uid, "x", "y").decode(),
            f"{consumer.url}/quote/{uid}")
        assert code == 0, err
        assert [e["data"]["item"] for e in json.loads(out)] == ["x", "y"]


@asyncio_test
async def test_mosquitto_rr_gets_a_rendered_answer_and_a_timeout_problem(
        mosquitto: Mosquitto, nats_server: NatsServer) -> None:
    uid = _uid()
    rr = _tool("mosquitto_rr")
    port = str(mosquitto.port)

    async def ask(item: str) -> tuple[int, str, str]:
        return await _run(rr, "-h", "127.0.0.1", "-p", port, "-q", "1",
                          "-t", f"quote/{uid}/ask", "-e", f"client/{uid}/{_uid()}",
                          "-D", "publish", "content-type", "application/json",
                          "-D", "publish", "correlation-data", f"rr-{item}",
                          "-m", json.dumps({"item": item}), "-W", "20",
                          "-F", "%P|%C|%p")

    async with _nats_service(nats_server.url, f"svc.{uid}", _skip_the_middle,
                             cloudevent=True), \
            _gateway(_mqtt_source(mosquitto.url, uid),
                     _to_nats(nats_server.url, f"svc.{uid}"), 1.0, replies=True,
                     errors="problem"):
        code, out, err = await ask("tea")
        assert code == 0, err
        properties, content_type, payload = out.strip().split("|", 2)
        assert "kind:quote" in properties and f"type:{REPLY_TYPE}" in properties
        assert content_type == "application/json"
        assert json.loads(payload) == {"price": 42, "item": "tea"}
        code, out, err = await ask("never")
        assert code == 0, err
        properties, content_type, payload = out.strip().split("|", 2)
        assert f"type:{PROBLEM_TYPE}" in properties
        assert content_type == "application/problem+json"
        assert json.loads(payload)["status"] == 504


@asyncio_test
async def test_concurrent_http_callers_each_get_their_own_rendered_answer(
        nats_server: NatsServer) -> None:
    """20 callers at once, as in the issue's curl run: each answer is judged and rendered
    for its own caller (its item in X-Quote and in the body), none crosses over."""
    uid = _uid()
    consumer = _http_source()
    async with _nats_service(nats_server.url, f"svc.{uid}", cloudevent=True), \
            _gateway(consumer, _to_nats(nats_server.url, f"svc.{uid}"), replies=True) as gw:
        items = [f"item{n}" for n in range(20)]
        results = await asyncio.gather(*(_ask_http(consumer, uid, item) for item in items))
        for item, (status, headers, body) in zip(items, results, strict=True):
            assert (status, headers["X-Quote"], body["item"]) == (201, item, item)
        assert gw.count("xrgw_replies_total", route="reply", result="answered") == 20
        assert not gw.dlq.written


@asyncio_test
async def test_nats_and_mqtt5_senders_get_an_http_services_answer_rendered_for_them(
        mosquitto: Mosquitto, nats_server: NatsServer) -> None:
    """The HTTP egress answer (a binary CloudEvent in a 200 response) conforms and reaches
    a NATS sender with the NATS definition's headers, an MQTT 5 sender with the MQTT
    definition's user properties and its correlation data."""
    uid = _uid()
    async with _http_service(cloudevent=True) as url:
        async with _gateway(_nats_source(nats_server.url, uid), _to_http(url), replies=True):
            answer = await _ask_nats(nats_server.url, uid, "rye")
            assert _headers(answer)["x-kind"] == "quote"
            assert json.loads(answer.data) == {"price": 42, "item": "rye"}
        async with _gateway(_mqtt_source(mosquitto.url, uid), _to_http(url), replies=True), \
                _mqtt_requester(mosquitto.url, uid) as ask:
            reply = await ask("figs", "c-http")
            assert reply.get("correlation_data") == "c-http"
            assert dict(reply.pairs("user_properties"))["kind"] == "quote"
            assert _body(reply) == {"price": 42, "item": "figs"}


# ====================================================================== configured, in the daemon

@asyncio_test
async def test_the_daemon_runs_a_configured_reply_route_with_reply_definitions(
        nats_server: NatsServer, tmp_path: Any) -> None:
    """`reply_definitions` and `reply_errors` as an operator writes them: the YAML and
    the catalog loaded by the config, the route built by the daemon; a conforming answer
    reaches the HTTP caller as 201, a non-conforming one as 502 and a dead letter on
    the dead-letter endpoint (NATS) with reason nonconforming-reply."""
    from adapters.registry import REGISTRY
    from gateway.config import load_config
    from gateway.daemon import Gateway as Daemon

    uid, port = _uid(), free_port()
    catalog = {**DOC, "endpoints": {
        "quotes-http": {"usage": ["consumer"], "protocol": "HTTP",
                        "protocoloptions": {"endpoints": [
                            {"uri": f"http://127.0.0.1:{port}"}]},
                        "messagegroups": ["#/messagegroups/quotes"]},
        "svc-nats": {"usage": ["producer"], "protocol": "NATS", "protocoloptions": {
            "endpoints": [{"uri": nats_server.url}], "subject": f"svc.{uid}"}},
        "dlq-nats": {"usage": ["producer"], "protocol": "NATS", "protocoloptions": {
            "endpoints": [{"uri": nats_server.url}], "subject": f"dead.{uid}"}}}}
    (tmp_path / "quotes.xreg.json").write_text(json.dumps(catalog))
    (tmp_path / "gw.yaml").write_text(
        "definitions: [quotes.xreg.json]\ndeadletter: dlq-nats\n"
        f"admin: {{listen: '127.0.0.1:{free_port()}'}}\n"
        "routes:\n  - from: quotes-http\n    to: [svc-nats]\n    reply: true\n"
        "    reply_timeout: 5s\n    reply_definitions: [replies]\n"
        "    reply_errors: problem\n")
    config, problems = load_config(tmp_path / "gw.yaml")
    assert config is not None, [str(p) for p in problems]

    nc = await nats.connect(nats_server.url)
    dead: list[Any] = []

    async def serve(msg: Any) -> None:
        item = json.loads(msg.data)["item"]
        if item == "bad":  # an answer the reply definitions do not describe
            await nc.publish(msg.reply, b'{"oops": true}')
            return
        attributes = _reply_attributes(msg.data, (msg.headers or {}).get("ce-correlationid"))
        await nc.publish(msg.reply, await _quote(msg.data) or b"", headers={
            "Content-Type": "application/json",
            **{f"ce-{k}": v for k, v in attributes.items()}})

    async def collect(msg: Any) -> None:
        dead.append(msg)

    await nc.subscribe(f"svc.{uid}", cb=serve)
    await nc.subscribe(f"dead.{uid}", cb=collect)
    await nc.flush()
    daemon = Daemon(config, REGISTRY)
    await daemon.start()
    try:
        async with asyncio.timeout(60):
            while not all(daemon.readiness().values()):
                await asyncio.sleep(0.05)
        async with aiohttp.ClientSession() as session:
            async with session.post(f"http://127.0.0.1:{port}/quote/{uid}",
                                    json={"item": "tea"}) as response:
                assert response.status == 201
                assert response.headers["X-Quote"] == "tea"
            async with session.post(f"http://127.0.0.1:{port}/quote/{uid}",
                                    json={"item": "bad"}) as response:
                assert response.status == 502
        async with asyncio.timeout(TIMEOUT):
            while not dead:
                await asyncio.sleep(0.05)
        [letter] = dead
        assert letter.headers["xrgw-reason"] == "nonconforming-reply"
        assert json.loads(letter.data) == {"oops": True}
    finally:
        await daemon.stop()
        await nc.close()
