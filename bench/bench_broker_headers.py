"""Benchmark: what a binary CloudEvent's headers cost the broker, per message.

Not a test: run by hand, from the repository root (the broker harness imports):

    .venv/bin/python -m bench.bench_broker_headers [--messages 100000] [--reps 3]

A bridge that forwards a message as it came sends its few application headers; the
gateway sends the same body with a binary CloudEvent's headers (`ce-id`, `ce-source`,
`ce-time`, ...: seven for the store example instead of two). This measures what that alone
costs each broker, with nothing else different: one client publishes the same body, with
the same subject or key, flushed or batched the same way, once with the two headers a
plain bridge forwards (`content-type`, `x-message-id`) and once with the headers the
gateway's own binding and producer code write for a converted event. The broker's CPU
(utime + stime of its process) is read before and after, per message.

- NATS: core publishes, one flush every `--flush-every` messages, received by a
  subscriber on its own connection (as the bench's sink watcher does).
- Kafka (Tansu): acks=all, linger 5 ms, 256 KB batches, 1,000 sends in flight.

Brokers are started on loopback ephemeral ports with the broker harness and stopped at
the end. Repetitions alternate the two header sets; the table gives the median.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import nats
from aiokafka import AIOKafkaProducer

from adapters.kafka.record import to_send
from adapters.nats.record import to_publish
from bench.bench_kafka_producer import create_topic
from gateway.cloudevents import encode
from gateway.cloudevents.event import CloudEvent
from harness.brokers import NatsServer, Tansu

BODY_SIZE = 200


def body() -> bytes:
    head = ('{"storeid":"1005","cdid":"05","ts":"2026-11-24T12:00:00.000Z",'
            '"total":123.45,"currency":"EUR","items":3,"pad":"')
    return (head + "x" * (BODY_SIZE - len(head) - 2) + '"}').encode()


def event() -> CloudEvent:
    """The event the store example renders for one message (as `xrgw run` would)."""
    return CloudEvent({
        "specversion": "1.0", "type": "com.example.store.sale",
        "source": "/stores/1005", "subject": "05", "id": str(uuid.uuid4()),
        "time": datetime.now(UTC), "datacontenttype": "application/json",
    }, json.loads(body()))


PLAIN = [("content-type", b"application/json"), ("x-message-id", b"run-12345")]


def cloudevent_kafka_headers() -> list[tuple[str, bytes]]:
    return to_send(encode(event(), "KAFKA", "binary"), default_topic="t").headers


def cloudevent_nats_headers() -> dict[str, str]:
    record = encode(event(), "NATS", "binary")
    args = to_publish(record.replace_fields({**record.fields, "subject": "s"}))
    return dict(args.pairs or [])


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def nats_run(url: str, headers: dict[str, str], count: int, flush_every: int) -> None:
    publisher = await nats.connect(url, pending_size=8 * 1024 * 1024)
    subscriber = await nats.connect(url)
    subject = f"hdr.{uuid.uuid4().hex[:8]}"
    received = 0
    done = asyncio.Event()

    async def on_message(_: object) -> None:
        nonlocal received
        received += 1
        if received == count:
            done.set()

    await subscriber.subscribe(subject, cb=on_message, pending_msgs_limit=count + 1,
                               pending_bytes_limit=-1)
    await subscriber.flush()
    payload = body()
    for index in range(count):
        await publisher.publish(subject, payload, headers=headers)
        if index % flush_every == flush_every - 1:
            await publisher.flush()
    await publisher.flush()
    await asyncio.wait_for(done.wait(), 120)
    await publisher.close()
    await subscriber.close()


async def kafka_run(bootstrap: str, headers: list[tuple[str, bytes]], count: int) -> None:
    topic = f"hdr-{uuid.uuid4().hex[:8]}"
    await create_topic(bootstrap, topic)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5,
                                max_batch_size=256 * 1024)
    await producer.start()
    try:
        payload, key = body(), b"store/1005/cashierdesk/05"
        pending: list[asyncio.Future[object]] = []
        for _ in range(count):
            pending.append(await producer.send(topic, payload, key=key, headers=headers))
            if len(pending) >= 1000:
                await asyncio.gather(*pending)
                pending = []
        await asyncio.gather(*pending)
    finally:
        await producer.stop()


async def measure(pid: int, run: Callable[[], Awaitable[None]], count: int) -> float:
    before = cpu_seconds(pid)
    await run()
    return (cpu_seconds(pid) - before) / count * 1e6


def header_bytes(headers: list[tuple[str, bytes]] | dict[str, str]) -> int:
    pairs = headers.items() if isinstance(headers, dict) else headers
    return sum(len(name) + len(value) for name, value in pairs)


async def main(args: argparse.Namespace) -> None:
    rows: list[tuple[str, str, int, int, float]] = []
    with NatsServer() as nats_server, Tansu() as kafka:
        assert nats_server.pid is not None and kafka.pid is not None
        sets_nats = {"plain bridge": {k: v.decode() for k, v in PLAIN},
                     "binary CloudEvent": cloudevent_nats_headers()}
        sets_kafka = {"plain bridge": PLAIN, "binary CloudEvent": cloudevent_kafka_headers()}
        results: dict[tuple[str, str], list[float]] = {}
        for _ in range(args.reps):
            for label, nats_headers in sets_nats.items():
                results.setdefault(("NATS", label), []).append(await measure(
                    nats_server.pid, lambda h=nats_headers: nats_run(  # type: ignore[misc]
                        nats_server.url, h, args.messages, args.flush_every), args.messages))
            for label, kafka_headers in sets_kafka.items():
                results.setdefault(("Kafka", label), []).append(await measure(
                    kafka.pid, lambda h=kafka_headers: kafka_run(  # type: ignore[misc]
                        kafka.bootstrap_servers, h, args.messages), args.messages))
        for (broker, label), values in results.items():
            headers = (sets_nats if broker == "NATS" else sets_kafka)[label]
            rows.append((broker, label, len(headers), header_bytes(headers),
                         statistics.median(values)))
    print("| broker | headers of | count | header bytes | broker CPU µs/msg (median) | ratio |")
    print("|---|---|---|---|---|---|")
    base: dict[str, float] = {}
    for broker, label, count, size, cpu in rows:
        base.setdefault(broker, cpu)
        print(f"| {broker} | {label} | {count} | {size} | {cpu:.2f} | "
              f"{cpu / base[broker]:.2f} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--flush-every", type=int, default=1000,
                        help="NATS: messages per flush (the gateway flushes once per batch)")
    asyncio.run(main(parser.parse_args()))
