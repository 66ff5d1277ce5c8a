"""Request-reply, every source x output pair the protocol profiles allow
(`ProtocolProfile.request_reply`, read at collection time: a protocol that gains the
capability joins the matrix by itself), against the real brokers.

Per pair, one reply route (the runtime `Route`, `reply_timeout` REPLY_TIMEOUT) between a
requester and a service of `harness.reply_pairs`, with, at the same time:
- three requests the service echoes: each requester gets its own answer;
- one it never answers: the documented timeout (HTTP sender 504 problem, NATS / MQTT
  sender nothing), the request dead-lettered as `no-reply`, sent once;
- one it answers after the timeout: as above, and the answer counted in
  `xrgw_replies_late_total` where it can still reach the gateway (a reply address; an
  HTTP output's request is closed at the timeout);
- at-least-once on the request side: every source message is acked only after its
  answer went back to its sender, or after its dead letter was written.

A pair whose protocols have no clients in `harness/reply_pairs.py` fails, naming them:
the capability without a test is the gap this matrix exists to show.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

import pytest
from support import asyncio_test

from adapters.memory import MemoryProducer
from gateway.convert import Converter
from gateway.deadletter.format import deadletter_metadata
from gateway.definitions import read_document
from gateway.observability.metrics import Metrics
from gateway.ports import Confirmation, Consumer, Delivery
from gateway.protocols import HTTP, MQTT5, NATS, PROFILES
from gateway.record import NativeMessage
from gateway.runtime.replydefs import ReplyDefinitions
from gateway.runtime.route import Output, Route
from harness.reply_pairs import (
    ECHO,
    LATE,
    ODD,
    SILENT,
    ReplyClients,
    clients_for,
    echo_of,
    request_body,
)

TIMEOUT = 60.0
REPLY_TIMEOUT = 1.5
LATE_BY = 2.0  # after the service got the request: past the reply timeout

REPLYING = [p.name for p in PROFILES if p.request_reply is not None]
PAIRS = [(source, output) for source in REPLYING for output in REPLYING]


def _id(protocol: str) -> str:
    return protocol.lower().replace("/", "").replace(".", "")


def _key(body: bytes) -> str:
    """A request's body as the event log keys it: its JSON, or, for a letter that holds
    it as a structured CloudEvent (an HTTP ingress letter), the event's data."""
    try:
        value = json.loads(body)
    except ValueError:
        return body.decode("utf-8", "replace")
    if isinstance(value, dict) and "specversion" in value and "data" in value:
        value = value["data"]
    return json.dumps(value, sort_keys=True)


class Watched:
    """The route's source consumer, logging in order when each request (by its body) was
    answered, told no answer came, and settled."""

    def __init__(self, inner: Consumer, events: list[tuple[str, str]]) -> None:
        self.inner = inner
        self.events = events

    def __getattr__(self, name: str) -> Any:  # the adapter's own extras (url, counts)
        return getattr(self.inner, name)

    @property
    def connected(self) -> bool:
        return self.inner.connected

    async def connect(self) -> None:
        await self.inner.connect()

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def read_batch(self, limit: int) -> list[Delivery]:
        return [self._watch(d) for d in await self.inner.read_batch(limit)]

    def _watch(self, delivery: Delivery) -> Delivery:
        key, events = _key(delivery.message.body_bytes()), self.events

        async def settle(ack: bool, reason: str, retry: bool) -> None:
            events.append(("ack" if ack else f"nack {reason}", key))
            await (delivery.ack() if ack else delivery.nack(reason, retry))

        inner_answer = delivery.answer
        if inner_answer is None:
            return Delivery(delivery.message, settle, None, lambda: not delivery.abandoned,
                            delivery.undecodable)

        async def answer(reply: NativeMessage | None, why: str) -> None:
            events.append(("answered" if reply is not None else "told no answer", key))
            await inner_answer(reply, why)

        return Delivery(delivery.message, settle, answer, lambda: not delivery.abandoned,
                        delivery.undecodable)


class DeadLetters(MemoryProducer):
    """The dead-letter sink, logging each letter (by its body) in the same event log."""

    def __init__(self, events: list[tuple[str, str]]) -> None:
        super().__init__()
        self.events = events

    async def submit(self, messages: Sequence[NativeMessage]) -> Confirmation:
        for message in messages:
            self.events.append(("dead-lettered", _key(message.body_bytes())))
        return await super().submit(messages)

    def reasons(self) -> list[str]:
        return sorted(deadletter_metadata(r)["xrgw-reason"] for r in self.written)


def _catalog(source: ReplyClients, uid: str) -> Any:
    doc = {"messagegroups": {"rr": {"envelope": "CloudEvents/1.0", "messages": {
        "ask": {"protocol": source.protocol, "protocoloptions": source.request_options(uid),
                "envelope": "CloudEvents/1.0", "envelopemetadata": {
                    "type": {"value": "com.example.rr.ask"},
                    "source": {"value": "/rr"}}}}}}}
    return read_document(doc, "rr.json")


class Running:
    def __init__(self, route: Route, dead: DeadLetters, metrics: Metrics,
                 events: list[tuple[str, str]], consumer: Consumer) -> None:
        self.route, self.dead, self.metrics = route, dead, metrics
        self.events, self.consumer = events, consumer

    def count(self, name: str, **labels: str) -> float:
        return self.metrics.registry.get_sample_value(name, labels) or 0.0


@asynccontextmanager
async def _route(source: ReplyClients, output: ReplyClients, source_url: str,
                 service_url: str, uid: str, replies: ReplyDefinitions | None = None,
                 ) -> AsyncIterator[Running]:
    events: list[tuple[str, str]] = []
    consumer = Watched(source.source(source_url, uid), events)
    producer, defaults = output.output(service_url, output.service_address(uid))
    dead, metrics = DeadLetters(events), Metrics()
    route = Route("rr", "in", consumer, Converter(_catalog(source, uid).messages()),
                  [Output("svc", output.protocol, producer, defaults=defaults)],
                  deadletter=Output("dlq", "KAFKA", dead, defaults={"topic": "dead"}),
                  metrics=metrics, reply_timeout=REPLY_TIMEOUT, reply_definitions=replies)
    await route.start()
    try:
        async with asyncio.timeout(TIMEOUT):
            while not route.ready:
                await asyncio.sleep(0.02)
        yield Running(route, dead, metrics, events, consumer)
    finally:
        await route.stop(grace=2.0)
        await producer.aclose()


def _clients(protocol: str) -> ReplyClients:
    clients = clients_for(protocol)
    if clients is None:
        pytest.fail(f"{protocol} can carry request-reply (its profile says so) but "
                    "harness/reply_pairs.py has no requester and service for it")
    return clients


async def _broker_url(clients: ReplyClients, request: pytest.FixtureRequest,
                      uid: str) -> str:
    """The URL of the protocol's broker (started on first use), prepared for `uid`."""
    if clients.broker is None:
        return ""
    broker = request.getfixturevalue(clients.broker)
    url = str(getattr(broker, clients.url_attribute))
    if clients.prepare is not None:
        await clients.prepare(url, uid)
    return url


@pytest.mark.parametrize(("source_protocol", "output_protocol"), PAIRS,
                         ids=[f"{_id(s)}-to-{_id(o)}" for s, o in PAIRS])
@asyncio_test
async def test_reply_route(source_protocol: str, output_protocol: str,
                           request: pytest.FixtureRequest) -> None:
    source, output = _clients(source_protocol), _clients(output_protocol)
    uid = uuid.uuid4().hex[:10]
    source_broker = await _broker_url(source, request, uid)
    output_broker = await _broker_url(output, request, uid)
    async with output.serve(output_broker, output.service_address(uid), LATE_BY) as service, \
            _route(source, output, source_broker, service.url, uid) as gw:
        # An ingress that listens (HTTP) is asked at its own URL, others at their broker.
        target = str(getattr(gw.consumer, "url", None) or source_broker)
        address = source.address(uid)
        echoes = [request_body(ECHO, n) for n in range(3)]
        silent, late = request_body(SILENT, 10), request_body(LATE, 11)
        async with source.requester(target) as ask:
            # A sender without a status to get (NATS, MQTT) waits past the reply timeout
            # and hears nothing; an HTTP sender gets its 504 from the gateway.
            no_answer_wait = TIMEOUT if source.timeout_status else REPLY_TIMEOUT * 2 + 1
            answers = await asyncio.gather(
                *(ask(address, body, TIMEOUT) for body in echoes),
                ask(address, silent, no_answer_wait), ask(address, late, no_answer_wait))

        # -- each echo came back to its own sender
        for body, answer in zip(echoes, answers[:3], strict=True):
            assert answer is not None, f"no answer to {body!r}"
            assert json.loads(answer.body) == json.loads(echo_of(body))
            assert answer.status in (None, 200)
        # -- the documented timeout behaviour, for the silent and the late service
        for answer in answers[3:]:
            if source.timeout_status is None:
                assert answer is None, f"{source.protocol} sender got {answer}"
            else:
                assert answer is not None and answer.status == source.timeout_status
                assert json.loads(answer.body)["detail"] == f"no reply within {REPLY_TIMEOUT:g} s"
        await gw.route.wait_idle()
        async with asyncio.timeout(TIMEOUT):
            while gw.dead.reasons() != ["no-reply", "no-reply"]:
                await asyncio.sleep(0.05)
        assert sorted(service.seen).count(silent) == 1  # not sent again
        assert gw.count("xrgw_replies_total", route="rr", result="answered") == 3
        assert gw.count("xrgw_replies_total", route="rr", result="no-reply") == 2
        # -- the late answer
        if output.late_reaches_gateway:
            async with asyncio.timeout(TIMEOUT):
                while gw.count("xrgw_replies_late_total", endpoint="svc") < 1:
                    await asyncio.sleep(0.05)
        assert gw.count("xrgw_replies_late_total", endpoint="svc") == (
            1 if output.late_reaches_gateway else 0)
        assert gw.dead.reasons() == ["no-reply", "no-reply"]  # a late answer is no letter
        # -- at-least-once: acked only after the answer or the dead letter
        _assert_acked_after(gw.events, echoes, "answered")
        _assert_acked_after(gw.events, [silent, late], "dead-lettered")


#: The reply definitions of `test_reply_definitions_judge_each_pairs_answers`: an answer
#: of any protocol conforms when its body is `{"echo": <integer>}` (a JSON Schema, one
#: definition per protocol: a native answer is matched by a definition of its protocol).
REPLY_DOC = {
    "messagegroups": {f"rr.replies.{_id(p)}": {"messages": {"echo": {
        "protocol": p, "datacontenttype": "application/json",
        "dataschemauri": "#/schemagroups/rr/schemas/echo"}}} for p in REPLYING},
    "schemagroups": {"rr": {"schemas": {"echo": {"versions": {"1": {
        "format": "JsonSchema/draft-07",
        "schema": {"type": "object", "required": ["echo"], "additionalProperties": False,
                   "properties": {"echo": {"type": "integer"}}}}}}}}}}


@pytest.mark.parametrize(("source_protocol", "output_protocol"), PAIRS,
                         ids=[f"{_id(s)}-to-{_id(o)}" for s, o in PAIRS])
@asyncio_test
async def test_reply_definitions_judge_each_pairs_answers(
        source_protocol: str, output_protocol: str, request: pytest.FixtureRequest) -> None:
    """With reply definitions (`schema: enforce`): the answer that conforms reaches its
    sender; the one that does not is dead-lettered as `nonconforming-reply`, its sender
    told in its protocol (HTTP 502 problem; NATS, MQTT 5, AMQP, Kafka senders: nothing,
    without `reply_errors`), and both requests are acked once, after that."""
    source, output = _clients(source_protocol), _clients(output_protocol)
    uid = uuid.uuid4().hex[:10]
    source_broker = await _broker_url(source, request, uid)
    output_broker = await _broker_url(output, request, uid)
    replies = ReplyDefinitions(list(read_document(REPLY_DOC, "replies.json").messages()),
                               schema="enforce")
    async with output.serve(output_broker, output.service_address(uid), LATE_BY) as service, \
            _route(source, output, source_broker, service.url, uid, replies) as gw:
        target = str(getattr(gw.consumer, "url", None) or source_broker)
        address = source.address(uid)
        good, odd = request_body(ECHO, 0), request_body(ODD, 1)
        async with source.requester(target) as ask:
            no_answer_wait = TIMEOUT if source.timeout_status else REPLY_TIMEOUT * 2 + 1
            conforming, other = await asyncio.gather(
                ask(address, good, TIMEOUT), ask(address, odd, no_answer_wait))
        assert conforming is not None and json.loads(conforming.body) == {"echo": 0}
        if source.timeout_status is None:
            assert other is None, f"{source.protocol} sender got {other}"
        else:
            assert other is not None and other.status == 502
            assert json.loads(other.body)["detail"].endswith(
                "the service's answer conforms to no reply definition")
        await gw.route.wait_idle()
        async with asyncio.timeout(TIMEOUT):
            while gw.dead.reasons() != ["nonconforming-reply"]:
                await asyncio.sleep(0.05)
        assert sorted(service.seen).count(odd) == 1  # answered, so not sent again
        assert gw.count("xrgw_replies_total", route="rr", result="answered") == 1
        assert gw.count("xrgw_replies_total", route="rr", result="nonconforming") == 1
        _assert_acked_after(gw.events, [good], "answered")
        _assert_acked_after(gw.events, [odd], "told no answer")


def _assert_acked_after(events: list[tuple[str, str]], bodies: list[bytes],
                        first: str) -> None:
    for body in bodies:
        mine = [what for what, key in events if key == _key(body)]
        assert "ack" in mine, f"{body!r} never acked: {mine}"
        assert first in mine and mine.index(first) < mine.index("ack"), (
            f"{body!r} acked before it was {first}: {mine}")
        assert mine.count("ack") == 1, mine


# ---------------------------------------------------------------------- other real clients

async def _run(*command: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    out, _ = await asyncio.wait_for(process.communicate(), TIMEOUT)
    return process.returncode or 0, out.decode()


@asyncio_test
async def test_mosquitto_rr_and_curl_get_their_answers(request: pytest.FixtureRequest) -> None:
    """Debian's `mosquitto_rr` (MQTT 5 response topic) and `curl` through reply routes to
    a NATS service: each gets the service's answer; curl gets 504 from a silent one."""
    nats_clients, uid = _clients(NATS), uuid.uuid4().hex[:10]
    nats_url = await _broker_url(nats_clients, request, uid)
    for source in (_clients(MQTT5), _clients(HTTP)):
        source_url = await _broker_url(source, request, uid)
        async with nats_clients.serve(nats_url, nats_clients.service_address(uid),
                                      LATE_BY) as service, \
                _route(source, nats_clients, source_url, service.url, uid) as gw:
            target = str(getattr(gw.consumer, "url", None) or source_url)
            asked = request_body(ECHO, 7)
            if source.broker is not None:
                where = urlsplit(target)
                code, out = await _run(
                    "mosquitto_rr", "-V", "5", "-h", str(where.hostname), "-p", str(where.port),
                    "-q", "1", "-t", source.address(uid), "-e", f"rr-client/{uid}/rr",
                    "-m", asked.decode(), "-W", str(int(TIMEOUT)), "-N")
                assert code == 0, out
                assert json.loads(out) == json.loads(echo_of(asked))
                continue
            url = f"{target}{source.address(uid)}"
            curl = ("curl", "-s", "-X", "POST", "-H", "Content-Type: application/json",
                    "-w", "\n%{http_code}", "--max-time", str(int(TIMEOUT)), url, "--data")
            code, out = await _run(*curl, asked.decode())
            body, status = out.rsplit("\n", 1)
            assert (code, status) == (0, "200"), out
            assert json.loads(body) == json.loads(echo_of(asked))
            code, out = await _run(*curl, request_body(SILENT, 8).decode())
            body, status = out.rsplit("\n", 1)
            assert status == "504" and json.loads(body)["status"] == 504, out
