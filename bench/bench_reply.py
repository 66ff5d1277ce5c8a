"""Benchmark: throughput and added latency of a request-reply route, against callers
talking to the same echo service without the gateway, in the same run.

Not a test: run by hand, from the repository root (the broker harness imports), e.g.

    python -m bench.bench_reply --callers 40 --seconds 10

nats-server and Mosquitto are started on loopback ephemeral ports with the broker
harness; the real daemon (`xrgw run`) runs as a child process with two reply routes to a
NATS echo service (`reply: true`, binary CloudEvents); the echo services (NATS, HTTP,
MQTT 5: `harness.reply_pairs`) run in one child process of their own. `--callers`
closed-loop callers (each sends a request, waits for its answer, sends the next) run in
this process, on the clients of `harness.reply_pairs` (aiohttp, nats-py, paho-mqtt),
for `--seconds` each subject, the first `--warmup` seconds discarded:

- `http-direct`   HTTP callers -> the HTTP echo server (no gateway);
- `http>xrgw>nats` HTTP callers -> xrgw HTTP ingress -> NATS echo service;
- `mqtt5-direct`  MQTT 5 callers -> Mosquitto -> MQTT 5 echo service (no gateway);
- `mqtt5>xrgw>nats` MQTT 5 callers -> Mosquitto -> xrgw -> NATS echo service;
- `nats-direct`   NATS callers -> the NATS echo service (the service's own cost).

Reported per subject: answers per second, p50/p99 of the caller's round trip, errors
(no answer within `--timeout`); and per gateway subject its ratios to the direct
subject of the same caller protocol (throughput ratio, p50 and p99 ratios) and the added
p50/p99 in ms. Ratios, not absolute timings: the machine is shared. `--json` prints the
result as one JSON document.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp

from harness.brokers import Mosquitto, NatsServer, free_port
from harness.faults.gateway_process import GatewayProcess
from harness.reply_pairs import (
    ECHO,
    MqttRequester,
    http_requester,
    http_service,
    mqtt5_service,
    nats_requester,
    nats_service,
    request_body,
)

Ask = Callable[[str, bytes, float], Awaitable[Any]]


class NoDelayMosquitto(Mosquitto):
    """The harness's Mosquitto with `set_tcp_nodelay true`: without it, small QoS 1
    publishes wait on Nagle's algorithm and every MQTT round trip costs tens of ms,
    hiding what the gateway adds."""

    def prepare(self) -> None:
        super().prepare()
        with open(self.config_path, "a", encoding="utf-8") as config:
            config.write("\nset_tcp_nodelay true\n")


def write_config(workdir: Path, nats_url: str, mqtt_url: str, run: str, http_port: int,
                 admin: int, inflight: int, reply_timeout: float) -> Path:
    group = ["#/messagegroups/rr"]
    doc = {
        "specversion": "1.0-rc2",
        "endpoints": {
            "http-in": {"usage": ["consumer"], "protocol": "HTTP", "messagegroups": group,
                        "protocoloptions": {"endpoints": [
                            {"uri": f"http://127.0.0.1:{http_port}"}]}},
            "mqtt-in": {"usage": ["consumer"], "protocol": "MQTT/5.0", "messagegroups": group,
                        "protocoloptions": {"endpoints": [{"uri": mqtt_url}], "qos": 1}},
            "svc": {"usage": ["producer"], "protocol": "NATS",
                    "protocoloptions": {"endpoints": [{"uri": nats_url}],
                                        "subject": f"svc.{run}"}},
        },
        "messagegroups": {"rr": {"envelope": "CloudEvents/1.0", "messages": {
            "http-ask": {"protocol": "HTTP", "envelope": "CloudEvents/1.0",
                         "protocoloptions": {"path": {"value": f"/rr/{run}/ask"}},
                         "envelopemetadata": {"type": {"value": "com.example.ask"},
                                              "source": {"value": "/bench"}}},
            "mqtt-ask": {"protocol": "MQTT/5.0", "envelope": "CloudEvents/1.0",
                         "protocoloptions": {"topic_name": f"rr/{run}/ask"},
                         "envelopemetadata": {"type": {"value": "com.example.ask"},
                                              "source": {"value": "/bench"}}}}}},
    }
    (workdir / "rr.xreg.json").write_text(json.dumps(doc))
    config = workdir / "gateway.yaml"
    route = f"reply: true, reply_timeout: {reply_timeout}s, inflight: {inflight}"
    config.write_text(f"""definitions: [rr.xreg.json]
routes:
  - {{from: http-in, to: [svc], {route}}}
  - {{from: mqtt-in, to: [svc], {route}}}
deadletter: log
admin: {{listen: "127.0.0.1:{admin}"}}
log: {{level: warning}}
endpoints:
  mqtt-in:
    client_id: bench-rr-{run}
""")
    return config


def echo_services(nats_url: str, mqtt_url: str, run: str, ready: Any, stop: Any) -> None:
    """Own process: the NATS, MQTT 5 and HTTP echo services until `stop` is set."""
    async def main() -> None:
        async with nats_service(nats_url, f"svc.{run}", 0.0), \
                mqtt5_service(mqtt_url, f"direct/{run}/ask", 0.0), \
                http_service("", "", 0.0) as http:
            ready.put(http.url)
            while not stop.is_set():
                await asyncio.sleep(0.2)
    asyncio.run(main())


async def callers(ask: Ask, address: str, count: int, seconds: float, warmup: float,
                  timeout: float) -> dict[str, Any]:
    """`count` closed-loop callers for `seconds`; their round trips after `warmup`."""
    latencies: list[float] = []
    errors = 0
    started = time.monotonic()
    measure_from, end = started + warmup, started + seconds

    async def caller(index: int) -> None:
        nonlocal errors
        n = index * 1_000_000
        while (now := time.monotonic()) < end:
            n += 1
            answer = await ask(address, request_body(ECHO, n), timeout)
            done = time.monotonic()
            ok = answer is not None and getattr(answer, "status", None) in (None, 200)
            if now >= measure_from:
                if ok:
                    latencies.append(done - now)
                else:
                    errors += 1

    await asyncio.gather(*(caller(i) for i in range(count)))
    measured = seconds - warmup
    latencies.sort()
    out: dict[str, Any] = {"answers": len(latencies), "errors": errors,
                           "per_second": round(len(latencies) / measured, 1)}
    if latencies:
        out["p50_ms"] = round(1000 * statistics.median(latencies), 2)
        out["p99_ms"] = round(1000 * latencies[min(len(latencies) - 1,
                                                   int(0.99 * len(latencies)))], 2)
    return out


async def run_subjects(args: argparse.Namespace, nats_url: str, mqtt_url: str, run: str,
                       gateway_http: str, echo_http: str) -> dict[str, dict[str, Any]]:
    results: dict[str, dict[str, Any]] = {}
    measure = (args.callers, args.seconds, args.warmup, args.timeout)
    async with http_requester(echo_http) as ask:
        results["http-direct"] = await callers(ask, "/echo", *measure)
    async with http_requester(gateway_http) as ask:
        results["http>xrgw>nats"] = await callers(ask, f"/rr/{run}/ask", *measure)
    for subject, topic in (("mqtt5-direct", f"direct/{run}/ask"),
                           ("mqtt5>xrgw>nats", f"rr/{run}/ask")):
        # One MQTT connection per `--mqtt-callers-per-connection` callers.
        connections = [MqttRequester(mqtt_url) for _ in range(
            max(1, -(-args.callers // args.mqtt_callers_per_connection)))]
        try:
            for requester in connections:
                await requester.start()

            async def spread(address: str, body: bytes, timeout: float,
                             pool: list[MqttRequester] = connections) -> Any:
                return await pool[hash(body) % len(pool)].ask(address, body, timeout)

            results[subject] = await callers(spread, topic, *measure)
        finally:
            for requester in connections:
                requester.close()
    async with nats_requester(nats_url) as ask:
        results["nats-direct"] = await callers(ask, f"svc.{run}", *measure)
    return results


def ratios(results: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for subject, direct in (("http>xrgw>nats", "http-direct"),
                            ("mqtt5>xrgw>nats", "mqtt5-direct")):
        gw, base = results[subject], results[direct]
        if "p50_ms" not in gw or "p50_ms" not in base or not base["per_second"]:
            continue
        out[subject] = {
            "against": direct,
            "throughput_ratio": round(gw["per_second"] / base["per_second"], 3),
            "p50_ratio": round(gw["p50_ms"] / base["p50_ms"], 2),
            "p99_ratio": round(gw["p99_ms"] / base["p99_ms"], 2),
            "added_p50_ms": round(gw["p50_ms"] - base["p50_ms"], 2),
            "added_p99_ms": round(gw["p99_ms"] - base["p99_ms"], 2),
        }
    return out


async def wait_ready(gateway: GatewayProcess, url: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            if not gateway.running:
                raise RuntimeError(f"xrgw exited:\n{gateway.log_tail()}")
            try:
                async with session.get(f"{url}/readyz") as response:
                    if response.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.2)
    raise RuntimeError(f"xrgw not ready after {timeout}s:\n{gateway.log_tail()}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--callers", type=int, default=40,
                        help="concurrent closed-loop callers per subject (default 40)")
    parser.add_argument("--seconds", type=float, default=10.0,
                        help="each subject's duration (default 10)")
    parser.add_argument("--warmup", type=float, default=2.0,
                        help="seconds discarded at each subject's start (default 2)")
    parser.add_argument("--timeout", type=float, default=5.0,
                        help="a caller's wait for its answer (default 5 s)")
    parser.add_argument("--inflight", type=int, default=256,
                        help="the reply routes' window, routes[].inflight (default 256)")
    parser.add_argument("--mqtt-callers-per-connection", type=int, default=10,
                        help="MQTT 5 callers sharing one client connection (default 10)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args(argv)
    if args.warmup >= args.seconds:
        parser.error("--warmup must be shorter than --seconds")

    run = uuid.uuid4().hex[:8]
    ctx = mp.get_context("spawn")
    with NatsServer() as nats_broker, NoDelayMosquitto() as mosquitto, \
            tempfile.TemporaryDirectory() as tmp:
        http_port, admin = free_port(), free_port()
        config = write_config(Path(tmp), nats_broker.url, mosquitto.url, run, http_port,
                              admin, args.inflight, max(args.timeout - 1, 1.0))
        ready, stop = ctx.Queue(), ctx.Event()
        services = ctx.Process(target=echo_services, args=(
            nats_broker.url, mosquitto.url, run, ready, stop), daemon=True)
        services.start()
        gateway = GatewayProcess(config, admin)
        gateway.start()
        try:
            echo_http = ready.get(timeout=60)
            asyncio.run(wait_ready(gateway, f"http://127.0.0.1:{admin}"))
            results = asyncio.run(run_subjects(
                args, nats_broker.url, mosquitto.url, run,
                f"http://127.0.0.1:{http_port}", echo_http))
        finally:
            gateway.close()
            stop.set()
            services.join(10)
    report = {"callers": args.callers, "seconds": args.seconds, "warmup": args.warmup,
              "subjects": results, "gateway_vs_direct": ratios(results)}
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"{args.callers} closed-loop callers, {args.seconds:g} s per subject "
          f"({args.warmup:g} s warm-up discarded)")
    print(f"{'subject':<18}{'answers/s':>11}{'p50 ms':>9}{'p99 ms':>9}{'errors':>8}")
    for subject, row in results.items():
        print(f"{subject:<18}{row['per_second']:>11}{row.get('p50_ms', '-'):>9}"
              f"{row.get('p99_ms', '-'):>9}{row['errors']:>8}")
    for subject, row in report["gateway_vs_direct"].items():
        print(f"{subject} vs {row['against']}: throughput x{row['throughput_ratio']}, "
              f"p50 x{row['p50_ratio']} (+{row['added_p50_ms']} ms), "
              f"p99 x{row['p99_ratio']} (+{row['added_p99_ms']} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
