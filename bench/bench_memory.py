"""Benchmark: the gateway's memory with a full in-flight window, and under a slow sink.

Not a test: run by hand, from the repository root (the broker harness imports), e.g.

    python -m bench.bench_memory                       # window 10,000, 1 KB messages
    python -m bench.bench_memory --definitions 10000 --seconds 120 --json out.json

What it does:

* starts Tansu (Kafka, the source) and nats-server (the sink, core NATS) on loopback
  ephemeral ports with the broker harness, and makes the sink slow to confirm: the
  gateway reaches the NATS server through a proxy that passes what the gateway sends at
  once and holds what the server answers for `--rtt` seconds (a distant broker). Each
  batch of publishes is confirmed by a PONG `--rtt` late, so the window fills and stays
  full while the sink drains at most window / rtt messages per second. (A sink that stops
  reading would not fill it: TCP back-pressure then holds the route's pump, and so does
  the HTTP producer at its `concurrency` requests -- the window never grows past a
  batch or two, which is the memory bound for those);
* pre-loads `--messages` (default 10 x the window) JSON messages of `--size` bytes into one
  Kafka topic, keys spread over 64 devices;
* runs the real daemon (`xrgw run`, a child process) with one Kafka -> NATS route whose
  `inflight` window is `--window`, and one message definition (plus `--definitions - 1`
  others on other key prefixes);
* samples the child's resident set (VmRSS from /proc) and the route's
  `xrgw_messages_inflight` gauge (admin /metrics) every `--interval` seconds for
  `--seconds`.

Reported: RSS at idle (started, nothing read yet), when the window first fills, its peak,
at the end, and the slope of a least-squares line through the samples taken while the
window was full, leaving out the first third of them (MB per minute: flat is ~0), plus how
many messages the sink received.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from harness.brokers import NatsServer, Tansu, free_port
from harness.faults.gateway_process import GatewayProcess

DEVICES = 64


def documents(kafka: str, topic: str, sink: str, definitions: int) -> dict[str, Any]:
    def message(prefix: str) -> dict[str, Any]:
        return {"protocol": "KAFKA", "envelope": "CloudEvents/1.0",
                "protocoloptions": {"topic": topic, "key": {
                    "type": "uritemplate", "value": prefix + "/{dev}"}},
                "envelopemetadata": {
                    "type": {"value": f"com.example.{prefix}.reading"},
                    "source": {"type": "uritemplate", "value": "/devices/{dev}"}}}

    messages = {"reading": message("dev")}
    messages.update({f"other{i}": message(f"other{i}") for i in range(definitions - 1)})
    return {
        "specversion": "1.0-rc2",
        "endpoints": {
            "src": {"usage": ["consumer"], "protocol": "KAFKA",
                    "protocoloptions": {"endpoints": [{"uri": kafka}], "topic": topic,
                                        "consumergroup": f"mem-{topic}"},
                    "messagegroups": ["#/messagegroups/mem"]},
            "dst": {"usage": ["producer"], "protocol": "NATS",
                    "protocoloptions": {"endpoints": [{"uri": sink}], "subject": "mem.out"}},
        },
        "messagegroups": {"mem": {"envelope": "CloudEvents/1.0", "messages": messages}},
    }


def write_config(workdir: Path, kafka: str, topic: str, sink: str, admin: int,
                 args: argparse.Namespace) -> Path:
    (workdir / "mem.xreg.json").write_text(json.dumps(
        documents(kafka, topic, sink, args.definitions)))
    config = workdir / "gateway.yaml"
    config.write_text(f"""definitions: [mem.xreg.json]
routes:
  - from: src
    to: [dst]
    mode: binary
    inflight: {args.window}
deadletter: log
admin: {{listen: "127.0.0.1:{admin}"}}
log: {{level: warning}}
endpoints:
  src:
    options: {{max_in_flight: {args.window}}}
""")
    return config


async def preload(bootstrap: str, topic: str, count: int, size: int) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
    finally:
        await admin.close()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, acks="all")
    await producer.start()
    try:
        pad = "x" * max(0, size - 60)
        futures = []
        for seq in range(count):
            body = json.dumps({"seq": seq, "dev": seq % DEVICES, "pad": pad}).encode()
            futures.append(await producer.send(topic, body,
                                               key=f"dev/{seq % DEVICES}".encode()))
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


class Counter:
    """Counts what reaches the sink subject (a plain subscription of its own)."""

    def __init__(self) -> None:
        self.received = 0
        self._client: Any = None

    async def start(self, url: str) -> None:
        import nats

        async def count(_msg: Any) -> None:
            self.received += 1

        self._client = await nats.connect(url)
        await self._client.subscribe("mem.out", cb=count, pending_msgs_limit=1_000_000)

    async def stop(self) -> None:
        if self._client is not None:
            with contextlib.suppress(Exception):
                await self._client.close()


class DelayProxy:
    """TCP proxy to `upstream`: client bytes pass at once, server bytes `delay` s late
    (in order; those of a connection's first second at once, so its handshake is not
    held past the client's connect timeout)."""

    def __init__(self, upstream_port: int, delay: float) -> None:
        self.upstream_port = upstream_port
        self.delay = delay
        self.port = free_port()
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        await asyncio.gather(self._pipe(reader, up_writer, 0.0),
                             self._pipe(up_reader, writer, self.delay),
                             return_exceptions=True)
        for w in (writer, up_writer):
            w.close()

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    delay: float) -> None:
        loop = asyncio.get_running_loop()
        held: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def release() -> None:
            while True:
                due, chunk = await held.get()
                if not chunk:
                    writer.close()
                    return
                await asyncio.sleep(max(0.0, due - loop.time()))
                writer.write(chunk)
                await writer.drain()

        releaser = asyncio.create_task(release())
        handshake = loop.time() + 1.0  # INFO/CONNECT/PONG of the connect pass at once
        try:
            while chunk := await reader.read(1 << 16):
                now = loop.time()
                held.put_nowait((now + delay if now > handshake else now, chunk))
        finally:
            held.put_nowait((loop.time() + delay, b""))
            await asyncio.gather(releaser, return_exceptions=True)


def inflight(admin: int) -> float | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{admin}/metrics", timeout=2) as r:
            text = r.read().decode()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("xrgw_messages_inflight{"):
            return float(line.rsplit(" ", 1)[1])
    return None


def slope_per_minute(samples: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, MB), in MB per minute."""
    if len(samples) < 3:
        return float("nan")
    n = len(samples)
    mean_t = sum(t for t, _ in samples) / n
    mean_m = sum(m for _, m in samples) / n
    den = sum((t - mean_t) ** 2 for t, _ in samples)
    num = sum((t - mean_t) * (m - mean_m) for t, m in samples)
    return num / den * 60 if den else float("nan")


async def run(args: argparse.Namespace) -> dict[str, Any]:
    with Tansu() as kafka, NatsServer() as nats_server:
        bootstrap = kafka.bootstrap_servers
        topic = f"mem-{os.getpid()}-{int(time.time())}"
        sink = Counter()
        await sink.start(nats_server.url)
        workdir = Path(tempfile.mkdtemp(prefix="xrgw-mem-"))
        admin = free_port()
        assert nats_server.port is not None
        proxy = DelayProxy(nats_server.port, args.rtt)
        await proxy.start()
        config = write_config(workdir, kafka.url, topic, f"nats://127.0.0.1:{proxy.port}",
                              admin, args)
        count = args.messages or args.window * 10
        print(f"pre-loading {count} x {args.size} B ...", file=sys.stderr)
        await preload(bootstrap, topic, count, args.size)
        child = GatewayProcess(config, admin)
        child.start()
        result: dict[str, Any] = {"window": args.window, "size": args.size,
                                  "definitions": args.definitions, "messages": count,
                                  "sink_rtt_s": args.rtt}
        try:
            start = time.monotonic()
            samples: list[tuple[float, float, float | None]] = []
            idle = None
            while time.monotonic() - start < args.seconds:
                await asyncio.sleep(args.interval)
                if not child.running:
                    raise SystemExit(f"the gateway exited:\n{child.log_tail()}")
                level = await asyncio.to_thread(inflight, admin)
                mb = child.rss_bytes() / 2**20
                if idle is None and level is not None:
                    idle = mb
                samples.append((time.monotonic() - start, mb, level))
                print(f"  {samples[-1][0]:6.1f} s  rss {mb:7.1f} MB  inflight {level}",
                      file=sys.stderr)
            full = [(t, m) for t, m, lv in samples if lv is not None
                    and lv >= args.window * 0.95]
            result.update({
                "rss_idle_mb": idle,
                "rss_window_full_mb": full[0][1] if full else None,
                "rss_peak_mb": max(m for _, m, _ in samples),
                "rss_end_mb": samples[-1][1],
                "seconds_full": (full[-1][0] - full[0][0]) if full else 0.0,
                # The first third of the full period is the allocator settling in.
                "slope_mb_per_min_full": slope_per_minute(full[len(full) // 3:]),
                "max_inflight": max((lv or 0) for _, _, lv in samples),
                "sink_received": sink.received,
            })
        finally:
            await child.terminate(30)
            child.close()
            await sink.stop()
            await proxy.stop()
    return result


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--window", type=int, default=10_000, help="the route's inflight window")
    p.add_argument("--size", type=int, default=1024, help="message body bytes")
    p.add_argument("--messages", type=int, default=0, help="pre-loaded (default 10 x window)")
    p.add_argument("--definitions", type=int, default=1)
    p.add_argument("--rtt", type=float, default=5.0,
                   help="seconds the sink's answers are held back")
    p.add_argument("--seconds", type=float, default=60.0, help="how long to sample")
    p.add_argument("--interval", type=float, default=1.0)
    p.add_argument("--json", help="also write the result to this JSON file")
    args = p.parse_args()
    result = asyncio.run(run(args))
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    full = result["rss_window_full_mb"]
    print(f"\nwindow {args.window} x {args.size} B, {args.definitions} definition(s): "
          f"RSS idle {result['rss_idle_mb']:.0f} MB, window full "
          f"{full if full is None else round(full)} MB, peak {result['rss_peak_mb']:.0f} MB, "
          f"end {result['rss_end_mb']:.0f} MB; slope while full "
          f"{result['slope_mb_per_min_full']:+.2f} MB/min over {result['seconds_full']:.0f} s; "
          f"sink received {result['sink_received']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
