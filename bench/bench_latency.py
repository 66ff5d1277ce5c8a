"""Benchmark: latency the gateway adds, MQTT -> Kafka, at a fixed publish rate.

Not a test: run by hand, from the repository root (the broker harness imports), e.g.

    python -m bench.bench_latency --rate 2000 --seconds 12 --repeat 3

Mosquitto and Tansu are started on loopback ephemeral ports with the broker harness. Two
subjects run in turn on the same brokers, each as a child process with fresh topics, the
order swapped every repetition after one discarded broker warm-up run:
- `gateway`: the real daemon (`xrgw run`), one MQTT 5 -> Kafka route, binary CloudEvents;
- `passthrough`: `bench.latency_passthrough`, the same delivery contract on the raw client
  libraries (paho on the event loop, aiokafka; acknowledged after Kafka confirmed).
A publisher in its own process sends QoS 1 messages at `--rate` per second for
`--seconds`, the send time in each body; this process reads the Kafka topic.

Reported per run, after the first `--warmup` seconds:
- end to end (publish -> Kafka consumer) p50/p99/max, which includes the two brokers and
  the Kafka consumer's fetch wait;
- for the gateway, its own part: the `xrgw_processing_seconds` histogram (a batch's
  receive to the sink's confirmation, weighted by the batch's size), p50/p99 read off the
  buckets (upper bound of the bucket the quantile falls in), sampled at the end minus at
  the end of the warm-up.
And `added_p99_ms`: the gateway's median p99 minus the passthrough's.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing as mp
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer

from bench.bench_kafka_producer import create_topic
from harness.brokers import Mosquitto, Tansu, free_port
from harness.faults.gateway_process import ROOT, GatewayProcess

PAD = "x" * 160


def write_config(workdir: Path, mqtt: str, kafka: str, run: str, admin: int,
                 linger_ms: int | None) -> Path:
    linger = "" if linger_ms is None else f"\n  dst:\n    options: {{linger_ms: {linger_ms}}}"
    doc = {
        "specversion": "1.0-rc2",
        "endpoints": {
            "src": {"usage": ["consumer"], "protocol": "MQTT/5.0",
                    "protocoloptions": {"endpoints": [{"uri": mqtt}], "qos": 1},
                    "messagegroups": ["#/messagegroups/lat"]},
            "dst": {"usage": ["producer"], "protocol": "KAFKA",
                    "protocoloptions": {"endpoints": [{"uri": kafka}],
                                        "topic": f"out-{run}"}},
        },
        "messagegroups": {"lat": {"envelope": "CloudEvents/1.0", "messages": {"reading": {
            "protocol": "MQTT/5.0", "envelope": "CloudEvents/1.0",
            "protocoloptions": {"topic_name": f"lat/{run}/dev/{{dev}}"},
            "envelopemetadata": {
                "type": {"value": "com.example.reading"},
                "source": {"type": "uritemplate", "value": "/devices/{dev}"}}}}}},
    }
    (workdir / "lat.xreg.json").write_text(json.dumps(doc))
    config = workdir / "gateway.yaml"
    config.write_text(f"""definitions: [lat.xreg.json]
routes:
  - from: src
    to: [dst]
    mode: binary
deadletter: log
admin: {{listen: "127.0.0.1:{admin}"}}
log: {{level: warning}}
endpoints:
  src:
    client_id: lat-{run}{linger}
""")
    return config


def publisher(host: str, port: int, run: str, rate: float, seconds: float) -> None:
    """Own process: QoS 1 publishes at `rate`/s, paced against the clock."""
    import paho.mqtt.client as paho
    from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion

    client = paho.Client(CallbackAPIVersion.VERSION2, client_id=f"pub-{run}",
                         protocol=MQTTProtocolVersion.MQTTv5)
    client.max_inflight_messages_set(1000)
    client.max_queued_messages_set(0)
    client.connect(host, port)
    client.loop_start()
    start = time.monotonic()
    total = int(rate * seconds)
    for seq in range(total):
        due = start + seq / rate
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        body = json.dumps({"seq": seq, "ts": time.time(), "pad": PAD})
        client.publish(f"lat/{run}/dev/{seq % 64}", body, qos=1)
    time.sleep(2)
    client.loop_stop()
    client.disconnect()


def histogram(admin: int) -> dict[float, float]:
    """Cumulative counts of xrgw_processing_seconds per upper bound."""
    with urllib.request.urlopen(f"http://127.0.0.1:{admin}/metrics", timeout=5) as r:
        text = r.read().decode()
    out: dict[float, float] = {}
    for line in text.splitlines():
        if line.startswith("xrgw_processing_seconds_bucket{"):
            le = line.split('le="', 1)[1].split('"', 1)[0]
            out[float("inf") if le == "+Inf" else float(le)] = float(line.rsplit(" ", 1)[1])
    return out


def quantile_bound(counts: dict[float, float], q: float) -> float:
    """Upper bound of the bucket the q-quantile falls in."""
    total = counts[float("inf")]
    for bound in sorted(counts):
        if counts[bound] >= q * total:
            return bound
    return float("inf")


def _quantiles(latencies: list[tuple[float, float]], started: float,
               warmup: float) -> dict[str, float]:
    kept = sorted(lat for sent, lat in latencies if sent - started > warmup)
    if len(kept) < 100:
        return {}
    q = statistics.quantiles(kept, n=100)
    return {"e2e_p50_ms": q[49] * 1000, "e2e_p99_ms": q[98] * 1000,
            "e2e_max_ms": kept[-1] * 1000}


class GatewayChild:
    """The real daemon (`xrgw run`) as a child process, with its processing histogram."""

    reports_processing = True

    def __init__(self, mqtt: str, kafka: str, run: str, linger_ms: int | None) -> None:
        self.admin = free_port()
        workdir = Path(tempfile.mkdtemp(prefix="xrgw-lat-"))
        config = write_config(workdir, mqtt, kafka, run, self.admin, linger_ms)
        self.process = GatewayProcess(config, self.admin)
        self.process.start()

    async def ready(self) -> None:
        for _ in range(300):  # until the gateway's admin server answers
            with contextlib.suppress(OSError):
                histogram(self.admin)
                return
            await asyncio.sleep(0.1)

    async def processing(self) -> dict[float, float]:
        return await asyncio.to_thread(histogram, self.admin)

    async def stop(self) -> None:
        await self.process.terminate(20)
        self.process.close()


class Passthrough:
    """`bench.latency_passthrough` as a child process: the plain bridge baseline."""

    reports_processing = False

    def __init__(self, mqtt_port: int, run: str, kafka: str, linger_ms: int | None) -> None:
        cmd = [sys.executable, "-m", "bench.latency_passthrough",
               "--mqtt", f"127.0.0.1:{mqtt_port}", "--filter", f"lat/{run}/dev/+",
               "--kafka", kafka, "--topic", f"out-{run}", "--client-id", f"lat-pt-{run}"]
        if linger_ms is not None:
            cmd += ["--linger-ms", str(linger_ms)]
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, start_new_session=True)

    async def ready(self) -> None:
        assert self.proc.stdout is not None
        line = await asyncio.to_thread(self.proc.stdout.readline)
        if line.strip() != b"ready":
            raise RuntimeError(f"passthrough bridge did not start (said {line!r})")

    async def processing(self) -> dict[float, float]:
        raise NotImplementedError("the plain bridge keeps no histogram")

    async def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.to_thread(self.proc.wait, 20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


async def measure(subject: str, mqtt: Mosquitto, kafka: Tansu,
                  args: argparse.Namespace) -> dict[str, Any]:
    """One subject, fresh topics and a fresh child, at `args.rate` for `args.seconds`."""
    run_id = f"{os.getpid()}{int(time.time() * 1000) % 10_000_000}"
    await create_topic(kafka.bootstrap_servers, f"out-{run_id}")
    assert mqtt.port is not None
    child: GatewayChild | Passthrough = (
        GatewayChild(mqtt.url, kafka.url, run_id, args.linger_ms) if subject == "gateway"
        else Passthrough(mqtt.port, run_id, kafka.bootstrap_servers, args.linger_ms))
    consumer = AIOKafkaConsumer(f"out-{run_id}", bootstrap_servers=kafka.bootstrap_servers,
                                auto_offset_reset="earliest", fetch_max_wait_ms=5)
    await consumer.start()
    latencies: list[tuple[float, float]] = []
    warm: dict[float, float] | None = None
    end: dict[float, float] = {}
    try:
        await child.ready()
        await asyncio.sleep(2)  # subscriptions and the producer's metadata
        pub = mp.get_context("spawn").Process(
            target=publisher, args=("127.0.0.1", mqtt.port, run_id, args.rate, args.seconds))
        pub.start()
        started = time.time()
        total = int(args.rate * args.seconds)
        deadline = time.monotonic() + args.seconds + 30
        while len(latencies) < total and time.monotonic() < deadline:
            if (child.reports_processing and warm is None
                    and time.time() - started > args.warmup):
                warm = await child.processing()
            batch = await consumer.getmany(timeout_ms=200)
            now = time.time()
            for records in batch.values():
                for record in records:
                    sent = json.loads(record.value)["ts"]
                    latencies.append((sent, now - sent))
        if child.reports_processing:
            end = await child.processing()
        pub.join(10)
    finally:
        await consumer.stop()
        await child.stop()
    result: dict[str, Any] = {"subject": subject, "rate": args.rate, "seconds": args.seconds,
                              "linger_ms": args.linger_ms,
                              "received": len(latencies), "sent": total}
    result.update(_quantiles(latencies, started, args.warmup))
    if warm is not None:
        window = {b: end[b] - warm.get(b, 0.0) for b in end}
        if window[float("inf")] > 0:
            result.update(gateway_p50_le_ms=quantile_bound(window, 0.5) * 1000,
                          gateway_p99_le_ms=quantile_bound(window, 0.99) * 1000)
    return result


async def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every subject `--repeat` times on the same brokers, the order swapped each time
    (the first subject after a start-up meets colder brokers)."""
    subjects = args.subjects.split(",")
    runs: list[dict[str, Any]] = []
    with Mosquitto() as mqtt, Tansu() as kafka:
        if args.broker_warmup > 0:
            # A fresh Tansu answers its first topic's produce requests slowly: whoever
            # ran first lost tens of milliseconds of p99 to it. One short run, discarded.
            await measure(subjects[0], mqtt, kafka,
                          argparse.Namespace(**{**vars(args), "seconds": args.broker_warmup,
                                                "warmup": 0.0}))
        for rep in range(args.repeat):
            for subject in subjects if rep % 2 == 0 else subjects[::-1]:
                result = await measure(subject, mqtt, kafka, args)
                result["rep"] = rep
                print(json.dumps(result), file=sys.stderr, flush=True)
                runs.append(result)
    summary: dict[str, Any] = {"rate": args.rate, "runs": runs}
    p99: dict[str, float] = {}
    for subject in subjects:
        mine = [r["e2e_p99_ms"] for r in runs if r["subject"] == subject and "e2e_p99_ms" in r]
        if mine:
            p99[subject] = statistics.median(mine)
            summary[f"{subject}_p99_ms"] = mine
    if "gateway" in p99 and "passthrough" in p99:
        # The figure: what the gateway adds to the plain bridge's p99 (medians).
        summary["added_p99_ms"] = p99["gateway"] - p99["passthrough"]
    return summary


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rate", type=float, default=3500, help="messages per second")
    p.add_argument("--seconds", type=float, default=20)
    p.add_argument("--warmup", type=float, default=3)
    p.add_argument("--linger-ms", type=int, help="the Kafka output's linger_ms (default: "
                   "the adapter's)")
    p.add_argument("--subjects", default="passthrough,gateway",
                   help="comma-separated: passthrough (bench.latency_passthrough), gateway")
    p.add_argument("--broker-warmup", type=float, default=4,
                   help="seconds of a first, discarded run (0: none)")
    p.add_argument("--repeat", type=int, default=2, help="runs per subject, order swapped")
    p.add_argument("--json", help="also write the result here")
    args = p.parse_args()
    result = asyncio.run(run(args))
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
