"""Network faults between the gateway and one broker, through the harness's TCP fault
proxy (`harness/faults/proxy.py`): the link is blackholed until /readyz says not ready
(and a few seconds longer), then every connection is reset at a fixed period, then it
heals (`harness/faults/schedule.py`). Numbered messages flow meanwhile; afterwards every
one must be there (lost = 0), duplicates stay within one window per fault, the order per
lane (the publishers' unit of order: MQTT topic, Kafka key) holds for first arrivals,
and /readyz said "not ready" during the blackhole and "ready" once healed.

One scenario per side of a route and protocol the issue named: a core NATS sink, a
Kafka sink, an MQTT source and a Kafka source. Only the gateway's connection to the
faulty broker goes through the proxy: the test's publishers and readers talk to the
brokers directly, except where Kafka's metadata sends every client to the advertised
address (the proxy): there the test publishes before and reads after the fault.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from harness.brokers import Mosquitto, Tansu, free_port
from harness.faults.gateway_process import GatewayProcess, gateway_process
from harness.faults.proxy import FaultProxy
from harness.faults.publishers import LANES, publish, publish_kafka
from harness.faults.readers import (
    KafkaReader,
    create_stream,
    create_topics,
    jetstream_count,
    read_jetstream,
    read_kafka,
)
from harness.faults.report import report
from harness.faults.route_config import INFLIGHT, RECEIVE_MAX, write_config, write_route_config
from harness.faults.schedule import FaultLog, FaultPlan, play
from harness.faults.tally import Tally
from harness.faults.waiting import patience, until, until_async

pytestmark = pytest.mark.fault

#: Messages per scenario: enough to span the fault, small enough for CI.
N = 4_000
#: The fault: blackhole >= 6 s (and until not ready), then 4 resets 1.5 s apart.
PLAN = FaultPlan(blackhole=6.0, resets=4, every=1.5)
#: Seconds the adapters wait for a confirmation or a connection before calling the
#: link dead.
CONFIRM_TIMEOUT = 2
#: The gateway's MQTT keepalive here: paho calls a link dead after 1.5 keepalives
#: without an answer.
MQTT_KEEPALIVE = 2
#: Whether /readyz must say "not ready" while the Kafka *source* link is blackholed: it
#: must, once a fetch has gone unanswered for the session timeout (adapters/kafka/liveness.py;
#: before, 200 throughout a 6 s blackhole). The sink side turns within `publish_timeout`.
KAFKA_SOURCE_NOT_READY = True


def dup_bound(log: FaultLog) -> int:
    """Each break of the link can send one window again: what was in flight (the
    route's `inflight`) plus what the source had handed out (its receive maximum)."""
    return (log.resets + 1) * (INFLIGHT + RECEIVE_MAX)


@pytest.fixture
def run_id() -> str:
    return uuid.uuid4().hex[:8]


@pytest.fixture
def proxied_tansu(tmp_path: Path) -> Iterator[tuple[Tansu, FaultProxy]]:
    """A Tansu of this test alone behind a fault proxy, advertising the proxy's address:
    every Kafka client (after bootstrap, metadata names the proxy) goes through it."""
    broker_port = free_port()
    with FaultProxy(broker_port) as proxy, Tansu(
            port=broker_port, data_dir=tmp_path / "tansu",
            advertised_port=proxy.port) as broker:
        yield broker, proxy


def kafka_url(proxy: FaultProxy) -> str:
    return f"kafka://{proxy.address}"


async def paced(publish_chunk: Callable[[range], Awaitable[None]], sent: range,
                chunks: int, pause: float) -> None:
    """`sent` in `chunks` parts, `pause` seconds apart: a stream that spans the fault."""
    size = -(-len(sent) // chunks)
    for start in range(sent.start, sent.stop, size):
        await publish_chunk(range(start, min(start + size, sent.stop)))
        await asyncio.sleep(pause)


def check(name: str, sent: range, delivered: Tally, dead: Tally, log: FaultLog,
          note: str = "") -> None:
    """The assertions every scenario shares, then its row for `make fault`."""
    late = delivered.out_of_order(LANES)
    result = report(name, sent, delivered, dead,
                    f"{log.describe()}; out of order {late}; {note}".rstrip("; "),
                    readyz=log.readyz())
    assert result.lost == 0, f"{result.lost} lost: {delivered.missing(sent)[:20]}"
    assert sum(dead.counts.values()) == 0, "nothing should be dead-lettered"
    assert delivered.duplicates <= dup_bound(log), f"{delivered.duplicates} duplicates"
    assert late == 0, f"{late} messages arrived after a later one of their lane"
    assert log.resets == PLAN.resets and log.connections_reset >= 1, log.describe()
    result.record()


async def read_stream(url: str, stream: str, subject: str, sent: range) -> Tally:
    """What the stream holds once all of `sent` could be there (or a deadline passed:
    then what is missing shows as lost in the row instead of as a timeout)."""
    with contextlib.suppress(AssertionError):
        await until_async(lambda: jetstream_count(url, stream), len(sent), patience(N))
    return await read_jetstream(url, stream, subject, 0)


async def started(gateway: GatewayProcess, source: str) -> None:
    gateway.start()
    await gateway.wait_ready(90, source=source)


async def fault_during(gateway: GatewayProcess, source: str, proxy: FaultProxy,
                       sent: range, publish_chunk: Callable[[range], Awaitable[None]]
                       ) -> FaultLog:
    """Start the gateway, publish `sent` in paced chunks (a stream that spans the fault)
    and play the fault plan on `proxy` meanwhile; the log of what the fault did."""
    await started(gateway, source)
    publishing = asyncio.create_task(paced(publish_chunk, sent, chunks=20, pause=0.5))
    log = await play(PLAN, proxy, gateway)
    await publishing
    return log


def _mqtt_chunks(mosquitto: Mosquitto, run_id: str) -> Callable[[range], Awaitable[None]]:
    """Publishes a chunk of numbered messages to the MQTT source (a thread: paho)."""
    return lambda part: asyncio.to_thread(publish, mosquitto, run_id, part)


async def endpoint_connected(gateway: GatewayProcess, endpoint: str) -> float | None:
    """`xrgw_endpoint_connected` of `endpoint` (None when the series is missing)."""
    _, text = await gateway.get("/metrics")
    label = f'endpoint="{endpoint}"'
    for line in text.splitlines():
        if line.startswith("xrgw_endpoint_connected{") and label in line.split("}")[0]:
            return float(line.rsplit(" ", 1)[1])
    return None


class ConnectedWatch:
    """`xrgw_endpoint_connected` of one endpoint sampled in the background: the values
    seen."""

    def __init__(self, gateway: GatewayProcess, endpoint: str) -> None:
        self.seen: set[float | None] = set()
        self._gateway, self._endpoint = gateway, endpoint
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            self.seen.add(await endpoint_connected(self._gateway, self._endpoint))
            await asyncio.sleep(0.2)

    async def stop(self) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


# ====================================================================== sinks


def test_core_nats_sink_through_faults(tmp_path, tansu, nats_server, run_id):
    """Kafka -> core NATS, the NATS link blackholed then reset: a core publish counts
    only once the server answered a PING behind it on the same connection, so what was
    written into a connection that broke is sent again. (Before: 75 of 20,000 lost with
    `published_total` at 20,000, nothing logged, /readyz 200 throughout.) The server
    keeps what reached it in a stream over the output subject, which the test reads."""
    sent = range(N)
    in_topic, dead_topic = f"faults-in-{run_id}", f"faults-px-dead-{run_id}"
    stream, subject = f"FAULTS_PX_{run_id}", f"faults.px.{run_id}"
    port = free_port()
    with FaultProxy(nats_server.port) as proxy:
        config = write_route_config(
            tmp_path, name="px-nats", source=("faults-kafka-in", {
                "uri": tansu.url, "options": {
                    "topics": [in_topic], "consumergroup": f"faults-px-{run_id}",
                    "max_in_flight": RECEIVE_MAX}}),
            outputs={"faults-nats": {"uri": f"nats://{proxy.address}", "options": {
                "subject": subject, "publish_timeout": CONFIRM_TIMEOUT,
                "connect_timeout": CONFIRM_TIMEOUT}}},
            deadletter=("faults-deadletter", {"uri": tansu.url,
                                              "options": {"topic": dead_topic}}),
            admin_port=port)

        async def scenario() -> tuple[Tally, Tally, FaultLog]:
            await create_topics(tansu, dead_topic)
            await create_topics(tansu, in_topic, partitions=8)
            await create_stream(nats_server.url, stream, subject)
            with gateway_process(config, port) as gateway:
                log = await fault_during(gateway, "faults-kafka-in", proxy, sent,
                                         lambda part: publish_kafka(tansu, in_topic, run_id, part))
                delivered = await read_stream(nats_server.url, stream, subject, sent)
                dead = await read_kafka(tansu, dead_topic, expect=None, quiet=0.5)
            return delivered, dead, log

        delivered, dead, log = asyncio.run(scenario())
    check("core nats sink: blackhole + resets", sent, delivered, dead, log)


def test_kafka_sink_through_faults(tmp_path, mosquitto, tansu, proxied_tansu, run_id):
    """MQTT -> Kafka, the Kafka link blackholed then reset: failed produce requests are
    retried by the route, resends before new batches; nothing is lost."""
    sink, proxy = proxied_tansu
    sent = range(N)
    topic, dead_topic = f"faults-pxk-{run_id}", f"faults-pxk-dead-{run_id}"
    port = free_port()
    config = write_config(
        tmp_path, name="px-kafka", mqtt=mosquitto, client_id=f"xrgw-px-kafka-{run_id}",
        run=run_id, outputs={"faults-kafka": {"uri": kafka_url(proxy), "options": {
            "topic": topic, "publish_timeout": CONFIRM_TIMEOUT}}},
        tansu=tansu, deadletter_topic=dead_topic, admin_port=port)

    async def scenario() -> tuple[Tally, Tally, FaultLog]:
        await create_topics(sink, topic)
        await create_topics(tansu, dead_topic)
        with gateway_process(config, port) as gateway:
            log = await fault_during(gateway, "faults-mqtt", proxy, sent,
                                     _mqtt_chunks(mosquitto, run_id))
            delivered = await read_kafka(sink, topic, expect=None, quiet=3.0,
                                         timeout=patience(N))
            delivered = await read_kafka(sink, topic, expect=sent if not delivered.missing(
                sent) else None, quiet=1.0, timeout=patience(N))
            dead = await read_kafka(tansu, dead_topic, expect=None, quiet=0.5)
            gateway.assert_no_stall()
        return delivered, dead, log

    delivered, dead, log = asyncio.run(scenario())
    check("kafka sink: blackhole + resets", sent, delivered, dead, log)


def test_mqtt_source_through_faults(tmp_path, mosquitto, tansu, run_id):
    """MQTT (QoS 1, persistent session) -> Kafka, the MQTT link blackholed then reset:
    the session keeps what the gateway did not acknowledge, the broker sends it again
    after each reconnect; nothing is lost."""
    sent = range(N)
    topic, dead_topic = f"faults-pxm-{run_id}", f"faults-pxm-dead-{run_id}"
    port = free_port()
    with FaultProxy(mosquitto.port) as proxy:
        config = write_config(
            tmp_path, name="px-mqtt", mqtt=mosquitto, client_id=f"xrgw-px-mqtt-{run_id}",
            run=run_id, outputs={"faults-kafka": {"uri": tansu.url,
                                                  "options": {"topic": topic}}},
            tansu=tansu, deadletter_topic=dead_topic, admin_port=port)
        _through(config, "faults-mqtt", f"mqtt://{proxy.address}",
                 {"keepalive": MQTT_KEEPALIVE, "connect_timeout": CONFIRM_TIMEOUT})

        async def scenario() -> tuple[Tally, Tally, FaultLog]:
            await create_topics(tansu, topic, dead_topic)
            with gateway_process(config, port) as gateway:
                log = await fault_during(gateway, "faults-mqtt", proxy, sent,
                                         _mqtt_chunks(mosquitto, run_id))
                delivered = await read_kafka(tansu, topic, expect=sent, timeout=patience(N))
                dead = await read_kafka(tansu, dead_topic, expect=None, quiet=0.5)
                gateway.assert_no_stall()
            return delivered, dead, log

        delivered, dead, log = asyncio.run(scenario())
    check("mqtt source: blackhole + resets", sent, delivered, dead, log)


def test_kafka_source_through_faults(tmp_path, tansu, proxied_tansu, run_id):
    """Kafka (consumer group) -> Kafka, the source link blackholed then reset with
    latency: fetches and commits fail, the group is rejoined, consumption resumes from
    the committed offsets; nothing is lost. The records are all written before the
    fault (every Kafka client of the source broker goes through the proxy)."""
    source, proxy = proxied_tansu
    sent = range(N)
    in_topic = f"faults-in-{run_id}"
    topic, dead_topic = f"faults-pxs-{run_id}", f"faults-pxs-dead-{run_id}"
    port = free_port()
    config = write_route_config(
        tmp_path, name="px-kafka-in", source=("faults-kafka-in", {
            "uri": kafka_url(proxy), "options": {
                "topics": [in_topic], "consumergroup": f"faults-pxs-{run_id}",
                "max_in_flight": RECEIVE_MAX, "session_timeout_ms": 6000,
                "heartbeat_interval_ms": 500, "connect_timeout": CONFIRM_TIMEOUT}}),
        outputs={"faults-kafka": {"uri": tansu.url, "options": {"topic": topic}}},
        deadletter=("faults-deadletter", {"uri": tansu.url,
                                          "options": {"topic": dead_topic}}),
        admin_port=port)

    async def scenario() -> tuple[Tally, Tally, FaultLog, str]:
        await create_topics(source, in_topic, partitions=8)
        await create_topics(tansu, topic, dead_topic)
        await publish_kafka(source, in_topic, run_id, sent)
        live = KafkaReader(tansu, topic)
        watching = asyncio.create_task(live.run())
        proxy.delay(0.05)  # a slow link: the stream is still flowing when the fault hits
        with gateway_process(config, port) as gateway:
            await started(gateway, "faults-kafka-in")
            await until(lambda: live.tally.unique >= N // 5, patience(N),
                        lambda: f"{live.tally.unique} arrived before the fault")
            at_fault = live.tally.unique

            async def gauge_down() -> None:
                # The gauge says what /readyz said: 0 in the blackhole (checked while it
                # holds), 1 once healed.
                deadline = asyncio.get_running_loop().time() + PLAN.patience
                while (seen := await endpoint_connected(gateway, "faults-kafka-in")) != 0.0:
                    assert asyncio.get_running_loop().time() < deadline, (
                        f"xrgw_endpoint_connected {seen} in the blackhole")
                    await asyncio.sleep(0.1)

            log = await play(replace(PLAN, not_ready=KAFKA_SOURCE_NOT_READY, latency=0.05),
                             proxy, gateway, gauge_down if KAFKA_SOURCE_NOT_READY else None)
            at_heal = live.tally.unique
            if KAFKA_SOURCE_NOT_READY:
                await until_async(lambda: _as_count(endpoint_connected(
                    gateway, "faults-kafka-in")), 1, 30)
            await until(lambda: not live.tally.missing(sent), patience(N),
                        lambda: f"{live.tally.unique} of {N} arrived")
            live.stop()
            await watching
            delivered = await read_kafka(tansu, topic, expect=sent)
            dead = await read_kafka(tansu, dead_topic, expect=None, quiet=0.5)
        return delivered, dead, log, f"{at_fault} arrived at the fault, {at_heal} at the heal"

    delivered, dead, log, note = asyncio.run(scenario())
    check("kafka source: blackhole + resets", sent, delivered, dead, log, note)


async def _as_count(value: Awaitable[float | None]) -> int:
    return int(await value or 0)


def test_idle_kafka_source_stays_ready(tmp_path, tansu, proxied_tansu, run_id):
    """The other side of the Kafka source's liveness check: a topic with nothing to read
    for longer than the check's threshold (the session timeout: a fetch unanswered that
    long means the link is gone) keeps /readyz 200 and the endpoint connected, because
    the broker answers every fetch long-poll, records or not."""
    source, proxy = proxied_tansu
    in_topic = f"faults-idle-{run_id}"
    topic, dead_topic = f"faults-idle-out-{run_id}", f"faults-idle-dead-{run_id}"
    session_ms = 6000
    port = free_port()
    config = write_route_config(
        tmp_path, name="px-kafka-idle", source=("faults-kafka-in", {
            "uri": kafka_url(proxy), "options": {
                "topics": [in_topic], "consumergroup": f"faults-idle-{run_id}",
                "session_timeout_ms": session_ms, "heartbeat_interval_ms": 500,
                "connect_timeout": CONFIRM_TIMEOUT}}),
        outputs={"faults-kafka": {"uri": tansu.url, "options": {"topic": topic}}},
        deadletter=("faults-deadletter", {"uri": tansu.url,
                                          "options": {"topic": dead_topic}}),
        admin_port=port)

    async def scenario() -> tuple[set[int], set[float | None]]:
        await create_topics(source, in_topic, partitions=2)
        await create_topics(tansu, topic, dead_topic)
        statuses: set[int] = set()
        with gateway_process(config, port) as gateway:
            await started(gateway, "faults-kafka-in")
            gauge = ConnectedWatch(gateway, "faults-kafka-in")
            loop = asyncio.get_running_loop()
            end = loop.time() + 2 * session_ms / 1000  # twice the threshold, idle
            while loop.time() < end:
                statuses.add(await gateway.readyz())
                await asyncio.sleep(0.1)
            await gauge.stop()
            assert "has not answered a fetch" not in gateway.log_path.read_text()
        return statuses, gauge.seen

    statuses, seen = asyncio.run(scenario())
    assert statuses == {200}, statuses
    assert seen == {1.0}, seen


def _through(config: Path, endpoint: str, uri: str, options: dict[str, object]) -> None:
    """Point `endpoint` of a written config at `uri` (the proxy), with extra options."""
    data = json.loads(config.read_text())
    data["endpoints"][endpoint]["uri"] = uri
    data["endpoints"][endpoint].setdefault("options", {}).update(options)
    config.write_text(json.dumps(data, indent=2))
