"""Benchmark: latency the gateway adds, MQTT -> Kafka, at a fixed publish rate.

Not a test: run by hand, from the repository root (the broker harness imports), e.g.

    python -m bench.bench_latency --rate 3500 --seconds 20

Mosquitto and Tansu are started on loopback ephemeral ports with the broker harness; the
real daemon (`xrgw run`, a child process) runs one MQTT 5 -> Kafka route (binary
CloudEvents). A publisher in its own process sends QoS 1 messages at `--rate` per second
for `--seconds`, the send time in each body; this process reads the Kafka topic.

Reported, after the first `--warmup` seconds:
- end to end (publish -> Kafka consumer) p50/p99/max, which includes the two brokers and
  the Kafka consumer's fetch wait;
- the gateway's own part: its `xrgw_processing_seconds` histogram (a batch's receive to
  the sink's confirmation, weighted by the batch's size), p50/p99 read off the buckets
  (upper bound of the bucket the quantile falls in), sampled at the end minus at the end
  of the warm-up.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from harness.brokers import Mosquitto, Tansu, free_port
from harness.faults.gateway_process import GatewayProcess

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


async def run(args: argparse.Namespace) -> dict[str, Any]:
    with Mosquitto() as mqtt, Tansu() as kafka:
        run_id = f"{os.getpid()}{int(time.time()) % 100000}"
        admin_client = AIOKafkaAdminClient(bootstrap_servers=kafka.bootstrap_servers)
        await admin_client.start()
        try:
            await admin_client.create_topics([NewTopic(f"out-{run_id}", 1, 1)])
        finally:
            await admin_client.close()
        workdir = Path(tempfile.mkdtemp(prefix="xrgw-lat-"))
        admin = free_port()
        config = write_config(workdir, mqtt.url, kafka.url, run_id, admin, args.linger_ms)
        child = GatewayProcess(config, admin)
        child.start()
        consumer = AIOKafkaConsumer(f"out-{run_id}", bootstrap_servers=kafka.bootstrap_servers,
                                    auto_offset_reset="earliest", fetch_max_wait_ms=5)
        await consumer.start()
        latencies: list[tuple[float, float]] = []
        try:
            for _ in range(300):  # until the gateway's admin server answers
                with contextlib.suppress(OSError):
                    histogram(admin)
                    break
                await asyncio.sleep(0.1)
            await asyncio.sleep(2)  # subscriptions and the producer's metadata
            assert mqtt.port is not None
            pub = mp.get_context("spawn").Process(
                target=publisher, args=("127.0.0.1", mqtt.port, run_id, args.rate, args.seconds))
            pub.start()
            started = time.time()
            warm: dict[float, float] | None = None
            total = int(args.rate * args.seconds)
            deadline = time.monotonic() + args.seconds + 30
            while len(latencies) < total and time.monotonic() < deadline:
                if warm is None and time.time() - started > args.warmup:
                    warm = await asyncio.to_thread(histogram, admin)
                batch = await consumer.getmany(timeout_ms=200)
                now = time.time()
                for records in batch.values():
                    for record in records:
                        sent = json.loads(record.value)["ts"]
                        latencies.append((sent, now - sent))
            end = await asyncio.to_thread(histogram, admin)
            pub.join(10)
        finally:
            await consumer.stop()
            await child.terminate(20)
            child.close()
    kept = sorted(lat for sent, lat in latencies if sent - started > args.warmup)
    result: dict[str, Any] = {"rate": args.rate, "seconds": args.seconds,
                              "linger_ms": args.linger_ms,
                              "received": len(latencies), "sent": total}
    if len(kept) >= 100:
        q = statistics.quantiles(kept, n=100)
        result.update(e2e_p50_ms=q[49] * 1000, e2e_p99_ms=q[98] * 1000,
                      e2e_max_ms=kept[-1] * 1000)
    if warm is not None:
        window = {b: end[b] - warm.get(b, 0.0) for b in end}
        if window[float("inf")] > 0:
            result.update(gateway_p50_le_ms=quantile_bound(window, 0.5) * 1000,
                          gateway_p99_le_ms=quantile_bound(window, 0.99) * 1000)
    return result


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rate", type=float, default=3500, help="messages per second")
    p.add_argument("--seconds", type=float, default=20)
    p.add_argument("--warmup", type=float, default=3)
    p.add_argument("--linger-ms", type=int, help="the Kafka output's linger_ms (default: "
                   "the adapter's)")
    p.add_argument("--json", help="also write the result here")
    args = p.parse_args()
    result = asyncio.run(run(args))
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
