"""TLS and authentication of every adapter against real brokers configured for them.

The harness makes a throw-away PKI (`harness/tls.py`: a CA, a server certificate for 127.0.0.1 and
localhost, a client certificate, and an unrelated "wrong" CA with its own client
certificate) and starts the brokers with TLS, client-certificate checks and users. Each
protocol proves that good credentials connect (a message goes through) and that bad ones
are refused with an error that names the cause. No secret may appear in a log line, an
error or a repr.

Kafka: the Tansu build bundled for the tests has no working TLS listener (it accepts
--cert/--key and keeps speaking plaintext) and offers SCRAM only, with users that can be
created only while authentication is off -- which its memory-only storage forgets on the
restart that turns it on. So Kafka TLS is tested through a TLS-terminating proxy in front
of Tansu (the client side, which is ours, is real), SASL only as "bad credentials are
refused", and the SASL settings are checked to reach aiokafka.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import ssl
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from support import asyncio_test, tls_files

from adapters.amqp import AmqpConsumer, AmqpProducer
from adapters.http import HttpConsumer, HttpProducer
from adapters.kafka import KafkaConsumer, KafkaOptions, KafkaProducer
from adapters.mqtt import MqttConsumer, MqttProducer
from adapters.nats import NatsConsumer, NatsProducer
from gateway.definitions import load_catalog
from gateway.definitions.sources import load_url
from gateway.ports import EndpointSettings, NotConnected, TlsSettings, read_one, write
from gateway.record import NativeMessage
from harness.brokers import Mosquitto, NatsServer, RabbitMQ, Tansu, free_port
from harness.tls import Pki, make_pki

TIMEOUT = 10.0
PASSWORD = "pw-" + uuid.uuid4().hex  # unique: any occurrence in logs is a leak
TOKEN = "tok-" + uuid.uuid4().hex



@pytest.fixture(autouse=True)
def _no_secret_in_logs(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    caplog.set_level(logging.DEBUG)
    yield
    for record in caplog.records:
        text = record.getMessage() + repr(record.args) + str(record.exc_info or "")
        assert PASSWORD not in text and TOKEN not in text, f"secret logged: {record!r}"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def _good_tls(pki: Pki) -> TlsSettings:
    return TlsSettings(str(pki.ca), str(pki.client_cert), str(pki.client_key))


def _wrong_ca(pki: Pki) -> TlsSettings:
    return TlsSettings(str(pki.wrong_ca), str(pki.client_cert), str(pki.client_key))


def _no_client_cert(pki: Pki) -> TlsSettings:
    return TlsSettings(str(pki.ca))


def _intruder(pki: Pki) -> TlsSettings:
    return TlsSettings(str(pki.ca), str(pki.wrong_client_cert), str(pki.wrong_client_key))


def _uid() -> str:
    return uuid.uuid4().hex[:10]


def _assert_no_secret(*texts: object) -> None:
    for text in texts:
        assert PASSWORD not in str(text) and TOKEN not in str(text), text


async def _refused(client: Any) -> str:
    """connect() must fail with NotConnected; returns its text (checked for secrets)."""
    try:
        with pytest.raises(NotConnected) as info:
            async with asyncio.timeout(30):
                await client.connect()
    finally:
        with contextlib.suppress(Exception):
            await client.aclose()
    text = str(info.value)
    _assert_no_secret(text, repr(info.value.__cause__))
    print(f"refused: {text}")  # shown with -s: the operator's view
    return text


# ====================================================================== MQTT


@pytest.fixture(scope="module")
def mqtts(pki: Pki) -> Iterator[Mosquitto]:
    broker = Mosquitto(tls=tls_files(pki), require_certificate=True, users={"alice": PASSWORD})
    with broker:
        yield broker


def _mqtt(url: str, tls: TlsSettings | None, password: str | None = PASSWORD,
          **options: Any) -> MqttProducer:
    return MqttProducer(EndpointSettings(url, username="alice", password=password, tls=tls,
                                         options=options))


@asyncio_test
async def test_mqtts_mutual_tls_and_password_round_trip(mqtts: Mosquitto, pki: Pki) -> None:
    assert mqtts.url.startswith("mqtts://")
    topic = f"sec/{_uid()}"
    settings = EndpointSettings(mqtts.url, username="alice", password=PASSWORD,
                                client_id=f"c-{_uid()}", tls=_good_tls(pki),
                                options={"filters": [topic]})
    _assert_no_secret(repr(settings))
    consumer = MqttConsumer(settings)
    producer = _mqtt(mqtts.url, _good_tls(pki))
    try:
        await consumer.connect()
        await producer.connect()
        # Several messages in one burst: TLS records holding more than one packet.
        records = [NativeMessage("MQTT/5.0", {"topic_name": topic, "qos": 1}, data={"n": i})
                   for i in range(20)]
        outcomes = await write(producer, records)
        assert all(o.delivered for o in outcomes), outcomes
        for i in range(20):
            async with asyncio.timeout(TIMEOUT):
                delivery = await read_one(consumer)
            assert delivery.message.data == {"n": i}
            await delivery.ack()
    finally:
        await producer.aclose()
        await consumer.aclose()


@asyncio_test
async def test_mqtts_wrong_password_is_refused(mqtts: Mosquitto, pki: Pki) -> None:
    text = await _refused(_mqtt(mqtts.url, _good_tls(pki), password="wrong-" + PASSWORD[:4]))
    assert "CONNACK refused" in text and "check the endpoint's username/password" in text


@asyncio_test
async def test_mqtts_unknown_server_ca_is_refused(mqtts: Mosquitto, pki: Pki) -> None:
    text = await _refused(_mqtt(mqtts.url, _wrong_ca(pki)))
    assert "TLS: server certificate rejected" in text and "tls.ca_file" in text, text


@asyncio_test
async def test_mqtts_missing_client_certificate_is_refused(mqtts: Mosquitto, pki: Pki) -> None:
    text = await _refused(_mqtt(mqtts.url, _no_client_cert(pki)))
    assert "TLS: the server refused the client certificate" in text, text


@asyncio_test
async def test_mqtts_client_certificate_of_another_ca_is_refused(
    mqtts: Mosquitto, pki: Pki
) -> None:
    text = await _refused(_mqtt(mqtts.url, _intruder(pki)))
    assert "TLS: the server refused the client certificate" in text, text


@asyncio_test
async def test_mqtt_plain_scheme_with_tls_block_still_uses_tls(
    mqtts: Mosquitto, pki: Pki
) -> None:
    # "mqtt://" + a tls block: TLS is what was asked for, so TLS is what is spoken.
    plain_url = mqtts.url.replace("mqtts://", "mqtt://")
    producer = _mqtt(plain_url, _good_tls(pki))
    try:
        await producer.connect()
        assert producer.connected
    finally:
        await producer.aclose()


# ====================================================================== NATS


@pytest.fixture(scope="module")
def nats_tls(pki: Pki) -> Iterator[NatsServer]:
    with NatsServer(tls=tls_files(pki), verify=True, users={"alice": PASSWORD}) as broker:
        yield broker


@pytest.fixture(scope="module")
def nats_token(pki: Pki) -> Iterator[NatsServer]:
    with NatsServer(tls=tls_files(pki), token=TOKEN) as broker:
        yield broker


def _nats(url: str, tls: TlsSettings | None, username: str | None = "alice",
          password: str | None = PASSWORD, **options: Any) -> NatsProducer:
    return NatsProducer(EndpointSettings(url, username=username, password=password, tls=tls,
                                         options={"connect_timeout": 3, **options}))


async def _nats_round_trip(url: str, tls: TlsSettings, username: str | None,
                           password: str) -> None:
    subject = f"sec.{_uid()}"
    consumer = NatsConsumer(EndpointSettings(url, username=username, password=password,
                                             tls=tls, options={"subjects": [subject]}))
    producer = _nats(url, tls, username, password)
    try:
        await consumer.connect()
        await producer.connect()
        outcomes = await write(producer, [NativeMessage("NATS", {"subject": subject},
                                                       data={"ok": True})])
        assert all(o.delivered for o in outcomes), outcomes
        async with asyncio.timeout(TIMEOUT):
            delivery = await read_one(consumer)
        assert delivery.message.data == {"ok": True}
        await delivery.ack()
    finally:
        await producer.aclose()
        await consumer.aclose()


@asyncio_test
async def test_nats_tls_mutual_tls_and_password_round_trip(
    nats_tls: NatsServer, pki: Pki
) -> None:
    assert nats_tls.url.startswith("tls://")
    await _nats_round_trip(nats_tls.url, _good_tls(pki), "alice", PASSWORD)


@asyncio_test
async def test_nats_wrong_password_is_refused(nats_tls: NatsServer, pki: Pki) -> None:
    text = await _refused(_nats(nats_tls.url, _good_tls(pki), password="nope"))
    assert "authorization violation" in text and "credentials" in text, text


@asyncio_test
async def test_nats_unknown_server_ca_is_refused(nats_tls: NatsServer, pki: Pki) -> None:
    text = await _refused(_nats(nats_tls.url, _wrong_ca(pki)))
    assert "TLS" in text and "certificate" in text, text


@asyncio_test
async def test_nats_missing_client_certificate_is_refused(
    nats_tls: NatsServer, pki: Pki
) -> None:
    text = await _refused(_nats(nats_tls.url, _no_client_cert(pki)))
    assert "TLS: the server refused the client certificate" in text, text


@asyncio_test
async def test_nats_token_round_trip_and_wrong_token(nats_token: NatsServer, pki: Pki) -> None:
    tls = _no_client_cert(pki)
    await _nats_round_trip(nats_token.url, tls, None, TOKEN)  # password alone = token
    text = await _refused(_nats(nats_token.url, tls, username=None, password="bad-token"))
    assert "authorization violation" in text, text


@asyncio_test
async def test_nats_tls_required_but_server_is_plain(nats_server: NatsServer, pki: Pki) -> None:
    # A server (or a man in the middle) that does not offer TLS gets no credentials.
    url = nats_server.url.replace("nats://", "tls://")
    text = await _refused(_nats(url, _good_tls(pki)))
    assert "does not offer TLS" in text, text


# ====================================================================== AMQP 1.0


@pytest.fixture(scope="module")
def rabbit_tls(pki: Pki) -> Iterator[RabbitMQ]:
    with RabbitMQ(tls=tls_files(pki), verify=True, users={"xrgw": PASSWORD}) as broker:
        yield broker


def _amqp_producer(url: str, tls: TlsSettings | None, password: str = PASSWORD) -> AmqpProducer:
    return AmqpProducer(EndpointSettings(url, username="xrgw", password=password, tls=tls,
                                         options={"node": "/queue/sec", "connect_timeout": 5}))


@asyncio_test
async def test_amqps_mutual_tls_and_sasl_plain_round_trip(rabbit_tls: RabbitMQ, pki: Pki) -> None:
    queue = f"/queue/sec-{_uid()}"
    settings = EndpointSettings(rabbit_tls.tls_url, username="xrgw", password=PASSWORD,
                                tls=_good_tls(pki), options={"node": queue})
    consumer = AmqpConsumer(settings)
    producer = AmqpProducer(settings)
    try:
        await consumer.connect()
        await producer.connect()
        outcomes = await write(producer, [NativeMessage("AMQP/1.0", {}, data={"ok": 1})])
        assert all(o.delivered for o in outcomes), outcomes
        async with asyncio.timeout(TIMEOUT):
            delivery = await read_one(consumer)
        assert delivery.message.data == {"ok": 1}
        await delivery.ack()
    finally:
        await producer.aclose()
        await consumer.aclose()


@asyncio_test
async def test_amqps_wrong_password_is_refused(rabbit_tls: RabbitMQ, pki: Pki) -> None:
    text = await _refused(_amqp_producer(rabbit_tls.tls_url, _good_tls(pki), "wrong"))
    assert "check the endpoint's username/password" in text, text


@asyncio_test
async def test_amqps_unknown_server_ca_is_refused(rabbit_tls: RabbitMQ, pki: Pki) -> None:
    text = await _refused(_amqp_producer(rabbit_tls.tls_url, _wrong_ca(pki)))
    assert text.startswith("TLS:") and "certificate verify failed" in text, text


@asyncio_test
async def test_amqps_missing_client_certificate_is_refused(
    rabbit_tls: RabbitMQ, pki: Pki
) -> None:
    text = await _refused(_amqp_producer(rabbit_tls.tls_url, _no_client_cert(pki)))
    assert text.startswith("TLS:") and "certificate required" in text, text


# ====================================================================== Kafka


class _TlsProxy:
    """A TLS-terminating TCP proxy (own thread and loop): TLS from the client, plain TCP
    to the broker. Requires a client certificate signed by the CA."""

    def __init__(self, pki: Pki, target_port: int) -> None:
        self.port = free_port()
        self._target = target_port
        self._context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(pki.ca))
        self._context.load_cert_chain(str(pki.server_cert), str(pki.server_key))
        self._context.verify_mode = ssl.CERT_REQUIRED
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._server: asyncio.Server | None = None

    def start(self) -> None:
        self._thread.start()
        assert self._ready.wait(10)

    def stop(self) -> None:
        def close() -> None:
            if self._server is not None:
                self._server.close()
            self._loop.stop()

        self._loop.call_soon_threadsafe(close)
        self._thread.join(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(asyncio.start_server(
            self._handle, "127.0.0.1", self.port, ssl=self._context))
        self._ready.set()
        self._loop.run_forever()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self._target)
        except OSError:
            writer.close()
            return

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(Exception):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            with contextlib.suppress(Exception):
                dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))


@pytest.fixture(scope="module")
def kafka_tls(pki: Pki) -> Iterator[_TlsProxy]:
    port = free_port()
    proxy = _TlsProxy(pki, port)
    with Tansu(port=port, advertised_port=proxy.port):
        proxy.start()
        try:
            yield proxy
        finally:
            proxy.stop()


@asyncio_test
async def test_kafka_ssl_with_client_certificate_round_trip(
    kafka_tls: _TlsProxy, pki: Pki
) -> None:
    url = f"kafka://127.0.0.1:{kafka_tls.port}"
    topic = f"sec-{_uid()}"
    producer = KafkaProducer(EndpointSettings(url, tls=_good_tls(pki), options={"topic": topic}))
    consumer = KafkaConsumer(EndpointSettings(
        url, tls=_good_tls(pki),
        options={"topics": [topic], "consumergroup": f"g-{_uid()}"}))
    try:
        await producer.connect()
        outcomes = await write(producer, [NativeMessage("KAFKA", {"topic": topic},
                                                       data={"ok": True})])
        assert all(o.delivered for o in outcomes), outcomes
        await consumer.connect()
        async with asyncio.timeout(30):
            delivery = await read_one(consumer)
        assert delivery.message.data == {"ok": True}
        await delivery.ack()
    finally:
        await producer.aclose()
        await consumer.aclose()


@asyncio_test
async def test_kafka_ssl_unknown_server_ca_is_refused(kafka_tls: _TlsProxy, pki: Pki) -> None:
    url = f"kafka://127.0.0.1:{kafka_tls.port}"
    text = await _refused(KafkaProducer(EndpointSettings(
        url, tls=_wrong_ca(pki), options={"connect_timeout": 5})))
    assert "TLS: server certificate rejected" in text and "tls.ca_file" in text, text


@asyncio_test
async def test_kafka_ssl_missing_client_certificate_is_refused(
    kafka_tls: _TlsProxy, pki: Pki
) -> None:
    url = f"kafka://127.0.0.1:{kafka_tls.port}"
    text = await _refused(KafkaProducer(EndpointSettings(
        url, tls=_no_client_cert(pki), options={"connect_timeout": 5})))
    assert text.startswith("cannot reach") and "TLS" in text, text
    assert "client certificate" in text, text


@pytest.fixture(scope="module")
def kafka_sasl() -> Iterator[Tansu]:
    with Tansu(authentication=True) as broker:
        yield broker


@asyncio_test
async def test_kafka_scram_bad_credentials_are_refused(kafka_sasl: Tansu) -> None:
    producer = KafkaProducer(EndpointSettings(
        f"kafka://{kafka_sasl.bootstrap_servers}", username="mallory", password=PASSWORD,
        options={"sasl_mechanism": "SCRAM-SHA-256", "connect_timeout": 5}))
    text = await _refused(producer)
    assert "SASL authentication failed" in text, text


def test_kafka_security_settings_reach_aiokafka(pki: Pki) -> None:
    opts = KafkaOptions.parse(EndpointSettings(
        "kafka://h:9093", username="alice", password=PASSWORD, tls=_good_tls(pki),
        options={"sasl_mechanism": "scram-sha-512"}))
    assert opts.security["security_protocol"] == "SASL_SSL"
    assert opts.security["sasl_mechanism"] == "SCRAM-SHA-512"
    assert opts.security["sasl_plain_username"] == "alice"
    assert opts.security["sasl_plain_password"] == PASSWORD
    context = opts.security["ssl_context"]
    assert isinstance(context, ssl.SSLContext) and context.verify_mode == ssl.CERT_REQUIRED
    _assert_no_secret(repr(opts))
    producer = KafkaProducer(EndpointSettings(
        "kafka://h:9093", username="alice", password=PASSWORD, tls=_good_tls(pki)))
    assert producer._opts.security["sasl_mechanism"] == "PLAIN"  # default, over TLS
    with pytest.raises(ValueError, match="PLAIN without TLS"):
        KafkaOptions.parse(EndpointSettings("kafka://h:9092", username="a", password="b"))
    with pytest.raises(ValueError, match="needs a username"):
        KafkaOptions.parse(EndpointSettings("kafka://h:9092",
                                            options={"security_protocol": "SASL_SSL"}))


# ====================================================================== HTTP


async def _https_ingress(pki: Pki, **options: Any) -> HttpConsumer:
    consumer = HttpConsumer(EndpointSettings(
        "https://127.0.0.1:0", password=TOKEN,
        tls=TlsSettings(str(pki.ca), str(pki.server_cert), str(pki.server_key)),
        options=options))
    await consumer.connect()
    return consumer


def _egress(url: str, tls: TlsSettings | None, password: str | None = TOKEN) -> HttpProducer:
    return HttpProducer(EndpointSettings(url, password=password, tls=tls,
                                         options={"timeout": 5}))


async def _send_one(producer: HttpProducer, consumer: HttpConsumer | None) -> Any:
    record = NativeMessage("HTTP", {"method": "POST", "path": "/hook"}, data={"x": 1})
    task = asyncio.ensure_future(write(producer, [record]))
    if consumer is not None:
        done, _ = await asyncio.wait({task}, timeout=1)
        if not done:  # the request got through: settle it
            async with asyncio.timeout(TIMEOUT):
                delivery = await read_one(consumer)
            assert delivery.message.data == {"x": 1}
            await delivery.ack()
    async with asyncio.timeout(TIMEOUT):
        outcomes = await task
    return outcomes[0]


@asyncio_test
async def test_https_mutual_tls_and_bearer_token(pki: Pki) -> None:
    consumer = await _https_ingress(pki)
    assert consumer.url.startswith("https://")
    try:
        good = _egress(consumer.url, _good_tls(pki))
        outcome = await _send_one(good, consumer)
        assert outcome.delivered, outcome
        await good.aclose()

        bad_token = _egress(consumer.url, _good_tls(pki), password="wrong")
        outcome = await _send_one(bad_token, None)
        assert not outcome.delivered and outcome.reason.startswith("HTTP 401"), outcome
        _assert_no_secret(outcome.reason)
        await bad_token.aclose()

        wrong_ca = _egress(consumer.url, _wrong_ca(pki))
        outcome = await _send_one(wrong_ca, None)
        assert "TLS: server certificate rejected" in outcome.reason, outcome
        await wrong_ca.aclose()

        no_cert = _egress(consumer.url, _no_client_cert(pki))
        outcome = await _send_one(no_cert, None)
        assert not outcome.delivered and outcome.retryable, outcome
        await no_cert.aclose()
    finally:
        await consumer.aclose()


@asyncio_test
async def test_https_ingress_limits_and_quiet_errors(pki: Pki) -> None:
    consumer = await _https_ingress(pki, max_headers=8, max_body_bytes=100)
    context = ssl.create_default_context(cafile=str(pki.ca))
    context.load_cert_chain(str(pki.client_cert), str(pki.client_key))
    auth = {"Authorization": f"Bearer {TOKEN}"}
    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context)) as http:
            async with http.post(consumer.url + "/x", data=b"{}") as answer:
                assert answer.status == 401
                assert answer.headers["WWW-Authenticate"].startswith("Bearer")
                body = await answer.text()
                assert "missing or invalid credentials" in body and TOKEN not in body
            many = {f"X-H{i}": "v" for i in range(20)} | auth
            async with http.post(consumer.url + "/x", data=b"{}", headers=many) as answer:
                assert answer.status == 400
                assert "Traceback" not in await answer.text()
            async with http.post(consumer.url + "/x", data=b"x" * 500, headers=auth) as answer:
                assert answer.status == 413
            task = asyncio.ensure_future(http.post(consumer.url + "/x", data=b"{}",
                                                   headers=auth))
            async with asyncio.timeout(TIMEOUT):
                delivery = await read_one(consumer)
            await delivery.nack("dead letter failed (HTTP 500: kafka-7.internal refused)")
            async with await task as answer:
                assert answer.status == 503
                assert "kafka-7" not in await answer.text()
    finally:
        await consumer.aclose()


# ====================================================================== registry


_CATALOG = {"specversion": "1.0-rc1", "messagegroups": {}}


@contextlib.asynccontextmanager
async def _registry(pki: Pki, body: bytes) -> Any:
    async def export(request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bearer {TOKEN}":
            return web.Response(status=401)
        return web.Response(body=body, content_type="application/json")

    app = web.Application()
    app.router.add_get("/reg/export", export)
    app.router.add_get("/reg", export)
    runner = web.AppRunner(app)
    await runner.setup()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(str(pki.server_cert), str(pki.server_key))
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"https://127.0.0.1:{port}/reg"
    finally:
        await runner.cleanup()


@asyncio_test
async def test_registry_https_with_ca_and_auth_header(pki: Pki) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with _registry(pki, json.dumps(_CATALOG).encode()) as url:
        good = await asyncio.to_thread(load_url, url, 5, headers=headers, ca_file=str(pki.ca))
        assert not hasattr(good, "severity"), good
        catalog = await asyncio.to_thread(load_catalog, [url], headers=headers,
                                          ca_file=str(pki.ca))
        assert not catalog.errors, catalog.errors

        no_auth = await asyncio.to_thread(load_url, url, 5, ca_file=str(pki.ca))
        assert "HTTP 401" in str(no_auth), no_auth

        wrong_ca = await asyncio.to_thread(load_url, url, 5, headers=headers,
                                           ca_file=str(pki.wrong_ca))
        assert "TLS: the registry certificate was rejected" in str(wrong_ca), wrong_ca
        system_ca = await asyncio.to_thread(load_url, url, 5, headers=headers)
        assert "TLS" in str(system_ca), system_ca
        _assert_no_secret(no_auth, wrong_ca, system_ca)


@asyncio_test
async def test_registry_garbage_is_a_problem_not_a_catalog(pki: Pki) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with _registry(pki, b"<html>oops</html>") as url:
        catalog = await asyncio.to_thread(load_catalog, [url], headers=headers,
                                          ca_file=str(pki.ca))
        assert catalog.errors and "malformed JSON" in str(catalog.errors[0])


def test_registry_unreachable_or_garbage_never_replaces_the_config(
    tmp_path: Path, pki: Pki
) -> None:
    """`load_config` (what a reload runs) rejects a config whose registry fails."""
    from gateway.config import load_config_text

    port = free_port()  # nothing listens there
    text = (f"definitions:\n  - url: https://127.0.0.1:{port}/reg\n"
            f"    ca_file: {pki.ca}\n"
            "    headers: {Authorization: 'Bearer ${REG_TOKEN}'}\n"
            "routes:\n  - from: a\n    to: [b]\ndeadletter: log\n")
    config, problems = load_config_text(text, "gw.yaml", tmp_path,
                                         environ={"REG_TOKEN": TOKEN})
    assert config is None
    assert any("cannot connect" in p.message for p in problems), problems
    _assert_no_secret(*problems)
