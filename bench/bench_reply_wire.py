"""Benchmark: a reply route to a Kafka or AMQP 1.0 service -- throughput and the latency
the gateway adds, at a stated number of concurrent HTTP callers.

Not a test: run by hand, from the repository root (the broker harness imports), e.g.

    python -m bench.bench_reply_wire --requests 2000 --callers 1 20 --repeat 2

Tansu and RabbitMQ start on loopback ephemeral ports (the broker harness). Per output
protocol, a `reply: true` route (HTTP ingress -> Kafka / AMQP, binary CloudEvents, the
adapters as `xrgw run` builds them) runs in this process; the service on the far side is
the protocol's own client on a thread of its own (`harness/reply_clients.py`: librdkafka,
python-qpid-proton), answering at once. The HTTP callers run in a child process
(aiohttp, `--callers` concurrent, each waiting for its answer before asking again).

Reported per run: requests per second, and the caller's round trip p50/p99/max; and, as
the reference without the gateway, the same service asked directly by the protocol's own
requester (one at a time: the round trip through the broker and the service alone).
`added p50` is the gateway's one-caller p50 minus the direct p50.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import time
import uuid
from collections.abc import Callable
from typing import Any

from adapters.amqp import AmqpProducer
from adapters.http import HttpConsumer
from adapters.kafka import KafkaProducer
from adapters.memory import MemoryProducer
from gateway.convert import Converter
from gateway.definitions import read_document
from gateway.observability.metrics import Metrics
from gateway.ports import EndpointSettings
from gateway.runtime.route import Output, Route
from harness.brokers import RabbitMQ, Tansu
from harness.reply_clients import (
    AmqpRequester,
    AmqpService,
    KafkaRequester,
    KafkaService,
    create_topics,
)

CATALOG = read_document({"messagegroups": {"quotes": {"envelope": "CloudEvents/1.0",
    "messages": {"http": {"protocol": "HTTP",
                          "protocoloptions": {"path": {"value": "/quote/{id}"}},
                          "envelope": "CloudEvents/1.0", "envelopemetadata": {
                              "type": {"value": "com.example.quote"},
                              "source": {"value": "/quotes", "type": "uritemplate"}}}}}}},
    "bench.json")


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _callers(url: str, requests: int, callers: int, out: Any) -> None:
    """Child process: `callers` concurrent HTTP callers, `requests` in all; sends back
    (seconds elapsed, [round trip seconds], failures)."""
    import aiohttp

    async def main() -> tuple[float, list[float], int]:
        latencies: list[float] = []
        failures = 0
        left = requests
        async with aiohttp.ClientSession() as session:
            async def caller() -> None:
                nonlocal left, failures
                while left > 0:
                    left -= 1
                    started = time.perf_counter()
                    async with session.post(f"{url}/quote/q", json={"item": "tea"}) as r:
                        await r.read()
                        if r.status != 200:
                            failures += 1
                    latencies.append(time.perf_counter() - started)
            began = time.perf_counter()
            await asyncio.gather(*(caller() for _ in range(callers)))
            return time.perf_counter() - began, latencies, failures

    out.send(asyncio.run(main()))


async def _route_run(output: Output, requests: int, callers: int) -> dict[str, float]:
    consumer = HttpConsumer(EndpointSettings("http://127.0.0.1:0",
                                             options={"settle_timeout": 60}))
    route = Route("reply", "in", consumer, Converter(CATALOG.messages()), [output],
                  deadletter=Output("dlq", "KAFKA", MemoryProducer(),
                                    defaults={"topic": "d"}),
                  metrics=Metrics(), reply_timeout=10.0)
    await route.start()
    try:
        while not route.ready:
            await asyncio.sleep(0.05)
        # warm-up: the first request opens the reply receiver / reader
        await _run_callers(consumer.url, 20, 1)
        elapsed, latencies, failures = await _run_callers(consumer.url, requests, callers)
    finally:
        await route.stop(grace=2.0)
        await output.producer.aclose()
    return {"rps": len(latencies) / elapsed, "p50_ms": _quantile(latencies, 0.5) * 1000,
            "p99_ms": _quantile(latencies, 0.99) * 1000, "max_ms": max(latencies) * 1000,
            "failures": failures}


async def _run_callers(url: str, requests: int, callers: int) -> tuple[float, list[float], int]:
    ctx = mp.get_context("spawn")
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_callers, args=(url, requests, callers, send))
    child.start()
    result: tuple[float, list[float], int] = await asyncio.to_thread(receive.recv)
    await asyncio.to_thread(child.join)
    return result


def _direct(ask: Callable[[bytes], Any], requests: int) -> dict[str, float]:
    latencies = []
    for _ in range(requests):
        started = time.perf_counter()
        ask(json.dumps({"item": "tea"}).encode())
        latencies.append(time.perf_counter() - started)
    return {"p50_ms": _quantile(latencies, 0.5) * 1000,
            "p99_ms": _quantile(latencies, 0.99) * 1000}


def _row(name: str, result: dict[str, float]) -> None:
    print(f"{name:34} " + "  ".join(f"{k} {v:8.1f}" for k, v in result.items()), flush=True)


async def _kafka(tansu: Tansu, requests: int, callers: list[int], repeat: int) -> None:
    for rep in range(repeat):
        uid = uuid.uuid4().hex[:8]
        await asyncio.to_thread(create_topics, tansu.bootstrap_servers, f"svc-{uid}",
                                f"gw-{uid}", f"direct-{uid}")
        with KafkaService(tansu.bootstrap_servers, f"svc-{uid}"):
            requester = await asyncio.to_thread(KafkaRequester, tansu.bootstrap_servers,
                                                f"svc-{uid}", f"direct-{uid}")
            await asyncio.to_thread(_direct, requester.ask, 20)  # warm-up
            _row(f"kafka direct (rep {rep})", await asyncio.to_thread(
                _direct, requester.ask, min(requests, 500)))
            await asyncio.to_thread(requester.close)
            for count in callers:
                output = Output("svc", "KAFKA", KafkaProducer(EndpointSettings(
                    tansu.url, options={"topic": f"svc-{uid}", "reply_topic": f"gw-{uid}"})),
                    defaults={"topic": f"svc-{uid}"})
                _row(f"http->kafka {count} callers (rep {rep})",
                     await _route_run(output, requests, count))


async def _amqp(rabbitmq: RabbitMQ, requests: int, callers: list[int], repeat: int) -> None:
    for rep in range(repeat):
        uid = uuid.uuid4().hex[:8]
        with AmqpService(rabbitmq.host, rabbitmq.port, f"/queue/svc-{uid}"):
            requester = await asyncio.to_thread(AmqpRequester, rabbitmq.host, rabbitmq.port,
                                                f"/queue/svc-{uid}", f"/queue/direct-{uid}")
            await asyncio.to_thread(_direct, requester.ask, 20)
            _row(f"amqp direct (rep {rep})", await asyncio.to_thread(
                _direct, requester.ask, min(requests, 500)))
            await asyncio.to_thread(requester.close)
            for count in callers:
                output = Output("svc", "AMQP/1.0", AmqpProducer(EndpointSettings(
                    rabbitmq.login_url, options={
                        "node": f"/queue/svc-{uid}", "terminus-durability": "none",
                        "reply_address": f"/queue/gw-{uid}"})))
                _row(f"http->amqp {count} callers (rep {rep})",
                     await _route_run(output, requests, count))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--callers", type=int, nargs="+", default=[1, 20])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--only", choices=("kafka", "amqp"))
    args = parser.parse_args()
    if args.only != "amqp":
        with Tansu() as tansu:
            asyncio.run(_kafka(tansu, args.requests, args.callers, args.repeat))
    if args.only != "kafka":
        with RabbitMQ() as rabbitmq:
            asyncio.run(_amqp(rabbitmq, args.requests, args.callers, args.repeat))


if __name__ == "__main__":
    main()
