"""AMQP sources and RabbitMQ restarts: the queue a `/queue/<name>` address makes is durable
unless the endpoint says otherwise (`terminus-durability`, adapters/amqp/terminus.py).

RabbitMQ 3.x declares the queue of a `/queue/<name>` address when a link attaches, with
the durability the link's terminus asks for. Proton's default (none) made it transient:
measured on 62d9be0, a RabbitMQ restart under an AMQP->Kafka route erased 6,307 of
10,000 messages and the gateway sat ready and idle. The RabbitMQ here is private, since
the tests restart it.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
import uuid
from collections.abc import Iterator

import pytest

from adapters.amqp import AmqpConsumer, AmqpProducer
from gateway.ports import EndpointSettings, NotConnected, write
from gateway.protocols import AMQP
from gateway.record import NativeMessage
from harness.brokers import RabbitMQ, free_port
from harness.faults.gateway_process import gateway_process
from harness.faults.publishers import publish_amqp
from harness.faults.readers import KafkaReader, create_topics, read_kafka
from harness.faults.report import fault_n, report
from harness.faults.route_config import GRACE, RECEIVE_MAX, write_route_config
from harness.faults.tally import Tally
from harness.faults.waiting import patience, until

#: Messages in the restart scenario ($XRGW_FAULT_N scales it, as for the fault tests).
N = fault_n(5_000)


@pytest.fixture(scope="module")
def own_rabbitmq() -> Iterator[RabbitMQ]:
    """One private broker for the module (the tests restart it; each uses its own
    queues, so a restart in one does not disturb another)."""
    with RabbitMQ() as broker:
        yield broker


def _queues(broker: RabbitMQ) -> dict[str, str]:
    """name -> durable ("true"/"false") of the broker's queues, from rabbitmqctl."""
    ctl = "/usr/lib/rabbitmq/bin/rabbitmqctl"
    done = subprocess.run([ctl, "-n", broker.nodename, "-q", "list_queues", "name", "durable"],
                          env=dict(broker.environment()), capture_output=True, text=True,
                          timeout=120, check=True)
    rows = [line.split("\t") for line in done.stdout.splitlines() if "\t" in line]
    return {row[0]: row[1] for row in rows if row[0] != "name"}


def _settings(broker: RabbitMQ, node: str, **options: object) -> EndpointSettings:
    return EndpointSettings(broker.url, options={"node": node, "connect_timeout": 30,
                                                 **options})


async def _drain(consumer: AmqpConsumer, count: int) -> list[object]:
    seen: list[object] = []
    async with asyncio.timeout(60):
        while len(seen) < count:
            for delivery in await consumer.read_batch(count - len(seen)):
                seen.append(delivery.message.data)
                await delivery.ack()
    return seen


def test_a_queue_the_gateway_declares_survives_a_broker_restart(own_rabbitmq: RabbitMQ) -> None:
    """A consumer on `/queue/<name>` with the default options declares a durable queue;
    durable messages in it survive a RabbitMQ restart. (On the old default the queue was
    transient: after the restart it is gone, and the consumer reads nothing.)"""
    name = f"dur-{uuid.uuid4().hex[:8]}"
    node = f"/queue/{name}"

    async def declare_then_publish() -> None:
        consumer = AmqpConsumer(_settings(own_rabbitmq, node))
        await consumer.connect()
        await consumer.aclose()  # the queue stays: it is not exclusive nor auto-delete
        producer = AmqpProducer(_settings(own_rabbitmq, f"/amq/queue/{name}"))
        await producer.connect()
        try:
            outcomes = await write(producer, [NativeMessage(AMQP, {}, {"seq": i})
                                              for i in range(100)])
            assert all(o.delivered for o in outcomes), outcomes[:3]
        finally:
            await producer.aclose()

    asyncio.run(declare_then_publish())
    assert _queues(own_rabbitmq).get(name) == "true"
    own_rabbitmq.restart()

    async def read_back() -> list[object]:
        consumer = AmqpConsumer(_settings(own_rabbitmq, node))
        await consumer.connect()
        try:
            return await _drain(consumer, 100)
        finally:
            await consumer.aclose()

    seqs = sorted(d["seq"] for d in asyncio.run(read_back()) if isinstance(d, dict))
    assert seqs == list(range(100))


def test_terminus_durability_none_and_exchange_addresses_declare_transient_queues(
        own_rabbitmq: RabbitMQ) -> None:
    """`terminus-durability: none` keeps the old transient queue (an explicit choice); an
    `/exchange/...` source stays non-durable under `auto`, so RabbitMQ does not leave a
    durable queue of its own behind at every attach."""
    name = f"transient-{uuid.uuid4().hex[:8]}"

    async def attach() -> None:
        for node, options in ((f"/queue/{name}", {"terminus-durability": "none"}),
                              ("/exchange/amq.topic/xrgw.k", {})):
            consumer = AmqpConsumer(_settings(own_rabbitmq, node, **options))
            await consumer.connect()
            await consumer.aclose()

    asyncio.run(attach())
    queues = _queues(own_rabbitmq)
    assert queues.get(name) == "false"
    assert "true" not in {durable for queue, durable in queues.items()
                          if queue.startswith("amq.gen-")}, queues


def test_auto_attaches_to_an_existing_transient_queue_as_it_is(
        own_rabbitmq: RabbitMQ, caplog: pytest.LogCaptureFixture) -> None:
    """An existing transient queue (made by another client, or an older gateway) refuses
    the durable attach; under `auto` the consumer and the producer attach again with a
    transient terminus and say so once, so the route runs: the messages the producer sends
    reach the consumer, and the queue is still the transient one."""
    name = f"old-{uuid.uuid4().hex[:8]}"

    async def scenario() -> list[object]:
        old = AmqpConsumer(_settings(own_rabbitmq, f"/queue/{name}",
                                     **{"terminus-durability": "none"}))
        await old.connect()
        await old.aclose()
        consumer = AmqpConsumer(_settings(own_rabbitmq, f"/queue/{name}"))
        producer = AmqpProducer(_settings(own_rabbitmq, f"/queue/{name}"))
        try:
            await consumer.connect()
            await producer.connect()
            # The first send meets the refusal (retryable); the route's retry attaches.
            outcomes = await write(producer, [NativeMessage(AMQP, {}, {"n": 1})])
            if not outcomes[0].delivered:
                assert outcomes[0].retryable, outcomes
                outcomes = await write(producer, [NativeMessage(AMQP, {}, {"n": 1})])
            assert outcomes[0].delivered, outcomes
            return await _drain(consumer, 1)
        finally:
            await producer.aclose()
            await consumer.aclose()

    with caplog.at_level("WARNING", logger="adapters.amqp"):
        assert asyncio.run(scenario()) == [{"n": 1}]
    assert _queues(own_rabbitmq)[name] == "false"
    warnings = [r.getMessage() for r in caplog.records if "exists as a transient queue" in
                r.getMessage()]
    assert len(warnings) == 2, warnings  # one from each adapter, not one per attach


def test_a_durability_mismatch_is_refused_with_the_fix(own_rabbitmq: RabbitMQ) -> None:
    """`terminus-durability: configuration` insists on a durable queue: an existing
    transient one refuses the attach, the consumer's error says what to change, and a
    producer's messages fail for good (dead-lettered), not retried for ever."""
    name = f"old-{uuid.uuid4().hex[:8]}"
    durable = {"terminus-durability": "configuration"}

    async def scenario() -> tuple[str, list[str]]:
        old = AmqpConsumer(_settings(own_rabbitmq, f"/queue/{name}",
                                     **{"terminus-durability": "none"}))
        await old.connect()
        await old.aclose()
        consumer = AmqpConsumer(_settings(own_rabbitmq, f"/queue/{name}", **durable))
        with pytest.raises(NotConnected) as refused:
            await consumer.connect()
        await consumer.aclose()
        producer = AmqpProducer(_settings(own_rabbitmq, f"/queue/{name}", **durable))
        await producer.connect()
        try:
            outcomes = await write(producer, [NativeMessage(AMQP, {}, {"n": 1})])
        finally:
            await producer.aclose()
        assert not outcomes[0].delivered and not outcomes[0].retryable, outcomes
        return str(refused.value), [o.reason or "" for o in outcomes]

    why, reasons = asyncio.run(scenario())
    for text in (why, reasons[0]):
        assert "inequivalent arg 'durable'" in text and "terminus-durability" in text, text


def test_rabbitmq_restart_under_an_amqp_route_loses_nothing(own_rabbitmq: RabbitMQ, tansu,
                                                            tmp_path) -> None:
    """The issue's scenario: an AMQP -> Kafka route on `/queue/<name>` with the default
    options, a backlog of N messages, RabbitMQ restarted while the gateway works through
    it. Every message reaches Kafka (duplicates allowed: at-least-once), nothing is
    dead-lettered, and the gateway goes on after the restart."""
    run = uuid.uuid4().hex[:8]
    node, topic, dead_topic = f"/queue/restart-{run}", f"amqp-restart-{run}", f"dead-{run}"
    sent = range(N)
    port = free_port()
    config = write_route_config(
        tmp_path, name="amqp-restart",
        source=("faults-amqp-in", {"uri": own_rabbitmq.login_url,
                                   "options": {"node": node, "max_in_flight": RECEIVE_MAX}}),
        outputs={"faults-kafka": {"uri": tansu.url, "options": {"topic": topic}}},
        deadletter=("faults-deadletter", {"uri": tansu.url, "options": {"topic": dead_topic}}),
        admin_port=port)

    async def scenario() -> tuple[Tally, Tally, str]:
        await create_topics(tansu, topic, dead_topic)
        live = KafkaReader(tansu, topic)
        watching = asyncio.create_task(live.run())
        with gateway_process(config, port) as gateway:
            # The gateway declares the queue, then steps aside while the backlog builds.
            gateway.start()
            await gateway.wait_ready(90, source="faults-amqp-in")
            code, _ = await gateway.terminate(GRACE + 5)
            assert code == 0
            await publish_amqp(own_rabbitmq.login_url, f"/amq/queue/restart-{run}", run, sent)
            gateway.start()
            await until(lambda: live.tally.unique >= N // 5, patience(N),
                        lambda: f"{live.tally.unique} arrived before the restart")
            at_restart = live.tally.unique
            began = time.monotonic()
            await asyncio.to_thread(own_rabbitmq.restart)
            await until(lambda: not live.tally.missing(sent), patience(N, 120),
                        lambda: f"{live.tally.unique} of {N} arrived after the restart")
            elapsed = time.monotonic() - began
            live.stop()
            await watching
            delivered = await read_kafka(tansu, topic, expect=sent)
            dead = await read_kafka(tansu, dead_topic, expect=None, quiet=0.5)
            code, _ = await gateway.terminate(GRACE + 5)
            assert code == 0, f"exit code {code}"
        return delivered, dead, (f"restarted at {at_restart} arrived; all arrived "
                                 f"{elapsed:.1f}s after the restart began")

    delivered, dead, note = asyncio.run(scenario())
    result = report("rabbitmq restart under amqp->kafka", sent, delivered, dead, note)
    assert result.lost == 0
    assert dead.unique == 0
