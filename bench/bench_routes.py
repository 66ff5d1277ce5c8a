"""Benchmark: end-to-end throughput and latency per route, gateway vs. a plain passthrough.

Not a test: run by hand, e.g.

    python -m bench.bench_routes                 # all routes, 20,000 messages each
    python -m bench.bench_routes --messages 5000 --routes mqtt-kafka,kafka-nats --json out.json
    python -m bench.bench_routes --routes mqtt-kafka --profile   # + cProfile of the gateway

(from the repository root, so that the broker harness, `harness.brokers`, imports).

Brokers (Mosquitto, NATS, RabbitMQ, Tansu) are started on loopback ephemeral ports with the
broker harness (`harness.brokers`). For every route and every repetition, two *subjects*
run, one after the other, each in a fresh child process on fresh topics/queues/subjects:

* ``bridge``: the passthrough. The SAME adapters the gateway uses, made by the same
  factory (`adapters.registry.REGISTRY`) from the same endpoint config, with the same
  concurrency shape as `gateway.runtime.route.Route` (a window of 256 unsettled
  deliveries, 16 lanes keyed by the same ordering key): consumer.read() ->
  producer.write([body with the target's address]) -> delivery.ack(). No matching, no
  CloudEvents, no metrics.
* ``gateway``: `gateway.daemon.Gateway` in process, one route whose single message
  definition matches the source's templated address and renders a binary CloudEvent.

Throughput: N messages are pre-loaded into the source (MQTT persistent session, Kafka
topic, JetStream stream, RabbitMQ queue; HTTP has no backlog, so N POSTs are sent with 64
concurrent requests). The child is started; the parent counts arrivals at the sink with a
raw client (aiokafka / nats-py / paho). msgs/s = (N-1) / (time of the N-th arrival - time
of the 1st); CPU = the child's process CPU (all threads: time.process_time, sampled by
the child when the parent signals the 1st and the N-th arrival), per 1,000 messages.
Connection set-up and group joins are therefore outside the window. Best of --repeat.

Latency (--latency-routes, MQTT sources): a fresh child, then messages published at half
the best gateway rate for --latency-seconds with the send time in the body; latency =
arrival at the sink - send time (first 0.5 s dropped as warm-up). Reports p50/p99 for
both subjects and the p99 difference (the gateway's added latency). Best p99 of --repeat.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing as mp
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import nats
import paho.mqtt.client as paho
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from nats.js.api import StreamConfig
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from gateway.ports import read_one, write
from harness.brokers import Mosquitto, NatsServer, RabbitMQ, Tansu, free_port

PROTOCOL = {"mqtt": "MQTT/5.0", "kafka": "KAFKA", "nats": "NATS", "amqp": "AMQP/1.0",
            "http": "HTTP"}
ALL_ROUTES = ["mqtt-kafka", "kafka-nats", "nats-kafka", "amqp-kafka", "http-kafka",
              "kafka-mqtt"]
DEVICES = 64  # distinct addresses (ordering keys) the messages are spread over
PAD = "x" * 160  # body ~ 220 bytes of JSON


# ---------------------------------------------------------------------------------- config
@dataclass
class Plan:
    """One child run: route, subject, fresh names, broker URLs."""

    src: str
    dst: str
    subject: str  # "bridge" | "gateway"
    run: str
    urls: dict[str, str]
    http_port: int = 0
    profile: str | None = None

    @property
    def src_topic(self) -> str:  # Kafka source topic / AMQP queue / NATS stream name part
        return f"bench-{self.run}"

    def src_address(self, dev: int) -> str:
        return {"mqtt": f"/bench/{self.run}/dev/{dev}", "nats": f"bench.{self.run}.dev.{dev}",
                "http": f"/bench/{self.run}/dev/{dev}", "amqp": f"dev.{dev}",
                "kafka": self.src_topic}[self.src]

    @property
    def sink_address(self) -> str:
        return {"kafka": f"out-{self.run}", "nats": f"out.{self.run}",
                "mqtt": f"out/{self.run}"}[self.dst]

    @property
    def client_id(self) -> str:
        return f"bench-{self.run}"


def _documents(plan: Plan) -> dict[str, Any]:
    r = plan.run
    src_opts: dict[str, Any] = {
        "mqtt": {"qos": 1},
        "kafka": {"topic": plan.src_topic, "consumergroup": f"bench-{r}"},
        "nats": {"stream": f"BENCH_{r}", "durable": f"bench-{r}",
                 "subjectfilter": f"bench.{r}.>"},
        "amqp": {"node": f"/queue/bench-{r}"},
        "http": {},
    }[plan.src]
    match: dict[str, Any] = {
        "mqtt": {"topic_name": f"/bench/{r}/dev/{{dev}}"},
        "kafka": {"topic": "bench-{run}"},
        "nats": {"subject": f"bench.{r}.dev.{{dev}}"},
        "amqp": {"properties": {"subject": {"type": "uritemplate", "value": "dev.{dev}"}}},
        "http": {"path": f"/bench/{r}/dev/{{dev}}"},
    }[plan.src]
    source = "/runs/{run}" if plan.src == "kafka" else "/devices/{dev}"
    dst_opts: dict[str, Any] = {"kafka": {"topic": plan.sink_address},
                                "nats": {"subject": plan.sink_address},
                                "mqtt": {"topic": plan.sink_address, "qos": 1}}[plan.dst]
    src_uri = (f"http://127.0.0.1:{plan.http_port}" if plan.src == "http"
               else plan.urls[plan.src])
    return {
        "specversion": "1.0-rc2",
        "endpoints": {
            "src": {"usage": ["consumer"], "protocol": PROTOCOL[plan.src],
                    "protocoloptions": {"endpoints": [{"uri": src_uri}], **src_opts},
                    "messagegroups": ["#/messagegroups/bench"]},
            "dst": {"usage": ["producer"], "protocol": PROTOCOL[plan.dst],
                    "protocoloptions": {"endpoints": [{"uri": plan.urls[plan.dst]}],
                                        **dst_opts}},
        },
        "messagegroups": {"bench": {
            "envelope": "CloudEvents/1.0", "protocol": PROTOCOL[plan.src],
            "messages": {"reading": {
                "protocol": PROTOCOL[plan.src], "protocoloptions": match,
                "envelope": "CloudEvents/1.0",
                "envelopemetadata": {
                    "type": {"value": "com.example.bench.reading"},
                    "source": {"type": "uritemplate", "value": source},
                },
            }},
        }},
    }


def load_plan_config(plan: Plan, workdir: Path) -> Any:
    from gateway.config import load_config

    (workdir / "bench.xreg.json").write_text(json.dumps(_documents(plan)))
    client = f"\n    client_id: {plan.client_id}" if plan.src == "mqtt" else ""
    (workdir / "gateway.yaml").write_text(f"""
definitions: [bench.xreg.json]
routes:
  - from: src
    to: [dst]
    mode: binary
deadletter: log
admin: {{listen: "127.0.0.1:0"}}
log: {{level: warning}}
endpoints:
  src:
    uri: "{_documents(plan)['endpoints']['src']['protocoloptions']['endpoints'][0]['uri']}"{client}
""")
    config, problems = load_config(workdir / "gateway.yaml")
    if config is None:
        raise SystemExit("bench config rejected:\n" + "\n".join(map(str, problems)))
    return config


# ---------------------------------------------------------------------------------- child
# The fields whose values name a message's unit of order, per protocol: the plain bridge
# keeps each unit's messages in one lane. AMQP: one link, one order; HTTP: none.
_ORDER_FIELDS = {"KAFKA": ("topic", "partition"), "MQTT/3.1.1": ("topic_name",),
                 "MQTT/5.0": ("topic_name",), "NATS": ("subject",)}


def _unit_of_order(message: Any) -> object:
    if message.protocol == "AMQP/1.0":
        return message.protocol
    fields = _ORDER_FIELDS.get(message.protocol)
    return None if fields is None else tuple(message.fields.get(f) for f in fields)


class Passthrough:
    """The plain bridge: same adapters and concurrency shape as a Route, nothing else."""

    def __init__(self, consumer: Any, producer: Any, protocol: str, defaults: dict[str, Any],
                 inflight: int = 256, lanes: int = 16) -> None:
        self.consumer, self.producer = consumer, producer
        self.protocol, self.defaults = protocol, defaults
        self._window = asyncio.Semaphore(inflight)
        self._lanes: list[asyncio.Queue[Any]] = [asyncio.Queue() for _ in range(lanes)]
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def ready(self) -> bool:
        return bool(self.consumer.connected and self.producer.connected)

    async def start(self) -> None:
        await self.producer.connect()
        await self.consumer.connect()
        self._tasks = [asyncio.create_task(self._lane(q)) for q in self._lanes]
        self._tasks.append(asyncio.create_task(self._read()))

    async def _read(self) -> None:
        n = 0
        while True:
            await self._window.acquire()
            delivery = await read_one(self.consumer)
            key = _unit_of_order(delivery.message)
            n += 1
            lane = hash(key) % len(self._lanes) if key is not None else n % len(self._lanes)
            self._lanes[lane].put_nowait(delivery)

    async def _lane(self, queue: asyncio.Queue[Any]) -> None:
        from gateway.record import NativeMessage

        while True:
            delivery = await queue.get()
            try:
                message = delivery.message
                if message.has_json_data:
                    out = NativeMessage(self.protocol, self.defaults, data=message.data)
                else:
                    out = NativeMessage(self.protocol, self.defaults, payload=message.payload)
                [outcome] = await write(self.producer, [out])
                if outcome.delivered:
                    await delivery.ack()
                else:
                    await delivery.nack(outcome.reason or "failed", retry=True)
            finally:
                self._window.release()

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.consumer.aclose()
        await self.producer.aclose()


def child_main(plan: Plan, conn: Any) -> None:
    """Runs in a fresh process: the bridge or the gateway, until told to stop."""
    asyncio.run(_child(plan, conn))


async def _child(plan: Plan, conn: Any) -> None:
    from adapters.registry import REGISTRY
    from gateway.config import for_adapter
    from gateway.daemon import Gateway

    workdir = Path(tempfile.mkdtemp(prefix="xrgw-bench-"))
    config = load_plan_config(plan, workdir)
    profiler = None
    if plan.profile:
        import cProfile

        profiler = cProfile.Profile()
    subject: Any
    if plan.subject == "gateway":
        from gateway.heap import freeze_new, settle_heap

        subject = Gateway(config, REGISTRY)
        # The collector set as `xrgw run` sets it (`Gateway.run`): without it, full
        # collections walking the window took a third of this child's CPU (measured with
        # gc.callbacks: 0.49 of 1.9 s), which the daemon does not spend.
        settle_heap()
        await subject.start()
        freeze_new()

        def ready() -> bool:
            return all(subject.readiness().values())
    else:
        route = config.routes[0]
        src, dst = config.endpoints["src"], config.endpoints["dst"]
        subject = Passthrough(REGISTRY.consumer(for_adapter(src, route.messages)),
                              REGISTRY.producer(for_adapter(dst)), PROTOCOL[plan.dst],
                              REGISTRY.output_defaults(for_adapter(dst)))
        await subject.start()

        def ready() -> bool:
            return bool(subject.ready)
    for _ in range(600):
        if ready():
            break
        await asyncio.sleep(0.05)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def control() -> None:  # answers marks at once, from its own thread
        conn.send(("ready", ready()))
        while True:
            command = conn.recv()
            if command == "mark":
                conn.send(time.process_time())
                if profiler is not None:  # first mark starts, second stops the profile
                    loop.call_soon_threadsafe(_toggle_profile, profiler)
            else:
                loop.call_soon_threadsafe(stop.set)
                return

    threading.Thread(target=control, daemon=True).start()
    await stop.wait()
    if profiler is not None and plan.profile:
        import pstats

        with open(plan.profile, "w") as out:
            stats = pstats.Stats(profiler, stream=out)
            stats.sort_stats("tottime").print_stats(35)
            stats.sort_stats("cumulative").print_stats(35)
    with contextlib.suppress(Exception):
        await asyncio.wait_for(subject.stop(), 15)
    conn.send("stopped")


_profiling: dict[int, bool] = {}


def _toggle_profile(profiler: Any) -> None:
    if _profiling.get(id(profiler)):
        profiler.disable()
        _profiling[id(profiler)] = False
    else:
        profiler.enable()
        _profiling[id(profiler)] = True


# ---------------------------------------------------------------------------------- sinks
def _body(seq: int, dev: int) -> bytes:
    return json.dumps({"seq": seq, "dev": dev, "ts": time.time(), "pad": PAD}).encode()


class Sink:
    """Counts arrivals at the sink (monotonic times) and latencies (wall clock)."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.latency: list[tuple[float, float]] = []  # (send ts, latency s)

    def arrived(self, value: bytes | None) -> None:
        now = time.time()
        self.times.append(time.monotonic())
        with contextlib.suppress(Exception):
            sent = float(json.loads(value or b"{}")["ts"])
            self.latency.append((sent, now - sent))

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


class KafkaSink(Sink):
    def __init__(self, url: str, topic: str) -> None:
        super().__init__()
        self.bootstrap, self.topic = url.removeprefix("kafka://"), topic

    async def start(self) -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap)
        await admin.start()
        try:
            await admin.create_topics([NewTopic(self.topic, 1, 1)])
        finally:
            await admin.close()
        self.consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap,
                                         enable_auto_commit=False, fetch_max_wait_ms=20)
        await self.consumer.start()
        self.consumer.assign([TopicPartition(self.topic, 0)])
        await self.consumer.seek_to_beginning()
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            batch = await self.consumer.getmany(timeout_ms=100, max_records=5000)
            for records in batch.values():
                for record in records:
                    self.arrived(record.value)

    async def stop(self) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        await self.consumer.stop()


class NatsSink(Sink):
    def __init__(self, url: str, subject: str) -> None:
        super().__init__()
        self.url, self.subject = url, subject

    async def start(self) -> None:
        self.nc = await nats.connect(self.url)

        async def on(msg: Any) -> None:
            self.arrived(msg.data)

        await self.nc.subscribe(self.subject, cb=on, pending_msgs_limit=-1,
                                pending_bytes_limit=-1)
        await self.nc.flush()

    async def stop(self) -> None:
        await self.nc.close()


class MqttSink(Sink):
    def __init__(self, url: str, topic: str) -> None:
        super().__init__()
        self.url, self.topic = url, topic

    async def start(self) -> None:
        host, port = self.url.removeprefix("mqtt://").split(":")
        self.client = paho.Client(CallbackAPIVersion.VERSION2,
                                  protocol=MQTTProtocolVersion.MQTTv5)
        subscribed = threading.Event()
        self.client.on_message = lambda c, u, m: self.arrived(m.payload)
        self.client.on_subscribe = lambda *a: subscribed.set()
        self.client.connect(host, int(port))
        self.client.loop_start()
        self.client.subscribe(self.topic, qos=1)
        await asyncio.to_thread(subscribed.wait, 10)

    async def stop(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()


def make_sink(plan: Plan) -> Sink:
    url = plan.urls[plan.dst]
    if plan.dst == "kafka":
        return KafkaSink(url, plan.sink_address)
    if plan.dst == "nats":
        return NatsSink(url, plan.sink_address)
    return MqttSink(url, plan.sink_address)


# ---------------------------------------------------------------------------------- sources
def _mqtt_client(url: str) -> paho.Client:
    host, port = url.removeprefix("mqtt://").split(":")
    client = paho.Client(CallbackAPIVersion.VERSION2, protocol=MQTTProtocolVersion.MQTTv5)
    client.max_inflight_messages_set(1000)
    client.connect(host, int(port))
    client.loop_start()
    return client


def _mqtt_publish(plan: Plan, count: int, rate: float | None) -> None:
    client = _mqtt_client(plan.urls["mqtt"])
    props = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
    props.ContentType = "application/json"
    infos = []
    start = time.monotonic()
    for i in range(count):
        if rate:
            delay = start + i / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        infos.append(client.publish(plan.src_address(i % DEVICES), _body(i, i % DEVICES),
                                    qos=1, properties=props))
    for info in infos:
        info.wait_for_publish(60)
    client.loop_stop()
    client.disconnect()


async def preload(plan: Plan, config: Any, count: int) -> None:
    """Put `count` messages into the source before the child starts."""
    if plan.src == "mqtt":  # create the persistent session (and subscription) first
        from adapters.registry import REGISTRY
        from gateway.config import for_adapter

        consumer = REGISTRY.consumer(for_adapter(config.endpoints["src"],
                                                 config.routes[0].messages))
        await consumer.connect()
        await consumer.aclose()
        await asyncio.to_thread(_mqtt_publish, plan, count, None)
    elif plan.src == "kafka":
        producer = AIOKafkaProducer(bootstrap_servers=plan.urls["kafka"].removeprefix(
            "kafka://"), linger_ms=5, max_batch_size=256 * 1024)
        await producer.start()
        try:
            futures = [await producer.send(plan.src_topic, _body(i, i % DEVICES),
                                           key=f"dev-{i % DEVICES}".encode())
                       for i in range(count)]
            await asyncio.gather(*futures)
        finally:
            await producer.stop()
    elif plan.src == "nats":
        nc = await nats.connect(plan.urls["nats"])
        js = nc.jetstream()
        stream = f"BENCH_{plan.run}"
        await js.add_stream(StreamConfig(name=stream, subjects=[f"bench.{plan.run}.>"]))
        for i in range(count):
            await nc.publish(plan.src_address(i % DEVICES), _body(i, i % DEVICES))
            if i % 1000 == 999:
                await nc.flush()
        await nc.flush()
        for _ in range(200):
            if (await js.stream_info(stream)).state.messages >= count:
                break
            await asyncio.sleep(0.05)
        await nc.close()
    elif plan.src == "amqp":
        from adapters.amqp import AmqpProducer
        from gateway.ports import EndpointSettings
        from gateway.record import NativeMessage

        producer = AmqpProducer(EndpointSettings(plan.urls["amqp"],
                                                 options={"node": f"/queue/bench-{plan.run}"}))
        await producer.connect()
        try:
            for start in range(0, count, 500):
                records = [NativeMessage("AMQP/1.0", {
                    "properties": {"subject": plan.src_address(i % DEVICES),
                                   "content-type": "application/json"}},
                    payload=_body(i, i % DEVICES))
                    for i in range(start, min(count, start + 500))]
                outcomes = await write(producer, records)
                if not all(o.delivered for o in outcomes):
                    raise RuntimeError(f"AMQP preload failed: {outcomes[0]}")
        finally:
            await producer.aclose()


async def live_load(plan: Plan, count: int, rate: float | None) -> None:
    """Send while the child runs (HTTP always; MQTT for latency)."""
    if plan.src == "mqtt":
        await asyncio.to_thread(_mqtt_publish, plan, count, rate)
        return
    if plan.src != "http":
        raise ValueError(f"no live load for {plan.src}")
    import aiohttp

    url = f"http://127.0.0.1:{plan.http_port}"
    counter = iter(range(count))
    start = time.monotonic()

    async def worker(session: aiohttp.ClientSession) -> None:
        for i in counter:
            if rate:
                delay = start + i / rate - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
            async with session.post(url + plan.src_address(i % DEVICES),
                                    data=_body(i, i % DEVICES),
                                    headers={"content-type": "application/json"}) as resp:
                await resp.read()

    connector = aiohttp.TCPConnector(limit=64)
    async with aiohttp.ClientSession(connector=connector) as session:
        await asyncio.gather(*(worker(session) for _ in range(64)))


# ---------------------------------------------------------------------------------- runs
@dataclass
class Result:
    route: str
    subject: str
    messages: int
    received: int
    seconds: float
    msgs_per_s: float
    cpu_per_1k: float
    p50_ms: float | None = None
    p99_ms: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # Fewer than `messages` arrived before the timeout (or the child died): the rate is
    # of a partial run, reported as failed and never picked as the best of the repeats.
    failed: bool = False

    @property
    def delivered(self) -> str:
        return f"{self.received}/{self.messages}"


async def run_one(plan: Plan, count: int, *, latency_rate: float | None = None,
                  latency_seconds: float = 5.0, timeout: float = 180.0) -> Result:
    workdir = Path(tempfile.mkdtemp(prefix="xrgw-bench-"))
    if plan.src == "http":
        plan.http_port = free_port()
    config = load_plan_config(plan, workdir)
    if latency_rate:
        count = max(100, int(latency_rate * latency_seconds))
    sink = make_sink(plan)
    await sink.start()
    if not latency_rate:
        await preload(plan, config, count)
    ctx = mp.get_context("spawn")
    parent, child_conn = ctx.Pipe()
    proc = ctx.Process(target=child_main, args=(plan, child_conn), daemon=True)
    proc.start()
    route = f"{plan.src}-{plan.dst}"
    try:
        _tag, ok = await asyncio.wait_for(asyncio.to_thread(parent.recv), 60)
        if not ok:
            print(f"  ! {route} {plan.subject}: not ready after 30 s", file=sys.stderr)
        loader = None
        if latency_rate or plan.src == "http":
            loader = asyncio.create_task(live_load(plan, count, latency_rate))

        def mark() -> float:
            parent.send("mark")
            return float(parent.recv())

        deadline = time.monotonic() + timeout
        while not sink.times and time.monotonic() < deadline:
            await asyncio.sleep(0.002)
        cpu_first = mark() if sink.times else 0.0
        while len(sink.times) < count and time.monotonic() < deadline:
            if proc.exitcode is not None:
                break
            await asyncio.sleep(0.002)
        cpu_last = mark()
        received = len(sink.times)
        if loader is not None:
            loader.cancel()
            await asyncio.gather(loader, return_exceptions=True)
    finally:
        with contextlib.suppress(Exception):
            parent.send("stop")
            await asyncio.wait_for(asyncio.to_thread(parent.recv), 30)
        proc.join(10)
        if proc.is_alive():
            proc.kill()
        await sink.stop()
    n = min(received, count)
    seconds = (sink.times[n - 1] - sink.times[0]) if n > 1 else float("nan")
    result = Result(route, plan.subject, count, received, seconds,
                    (n - 1) / seconds if n > 1 and seconds > 0 else 0.0,
                    (cpu_last - cpu_first) / max(1, n - 1) * 1000,
                    failed=received < count)
    if latency_rate and sink.latency:
        first = min(s for s, _ in sink.latency)
        lat = sorted(x for s, x in sink.latency if s >= first + 0.5)
        if len(lat) >= 100:
            q = statistics.quantiles(lat, n=100)
            result.p50_ms, result.p99_ms = q[49] * 1000, q[98] * 1000
        result.extra["rate"] = latency_rate
    return result


def best(results: list[Result], key: Callable[[Result], float]) -> Result:
    """The best complete run; when every run failed, the one that got furthest (still
    marked failed, so the table says so instead of showing its rate as a result)."""
    complete = [r for r in results if not r.failed]
    if complete:
        return max(complete, key=key)
    return max(results, key=lambda r: r.received)


def _run_line(res: Result) -> str:
    state = "" if not res.failed else "  FAILED (partial run: timed out or child exited)"
    return (f"{res.msgs_per_s:8.0f} msg/s  {res.cpu_per_1k:6.3f} CPU s/1k  "
            f"({res.delivered} delivered/sent){state}")


async def main(args: argparse.Namespace) -> int:
    routes = [r.strip() for r in args.routes.split(",") if r.strip()]
    for r in routes:
        if r not in ALL_ROUTES:
            raise SystemExit(f"unknown route {r!r}; known: {', '.join(ALL_ROUTES)}")
    needed = {p for r in routes for p in r.split("-")} - {"http"}
    classes = {"mqtt": Mosquitto, "kafka": Tansu, "nats": NatsServer, "amqp": RabbitMQ}
    throughput: list[dict[str, Any]] = []
    latency: list[dict[str, Any]] = []
    with contextlib.ExitStack() as stack:
        urls = {}
        for name in sorted(needed):
            print(f"starting {name} ...", file=sys.stderr)
            urls[name] = stack.enter_context(classes[name]()).url
        for route in routes:
            src, dst = route.split("-")
            runs: dict[str, list[Result]] = {"bridge": [], "gateway": []}
            for rep in range(args.repeat):
                for subject in ("bridge", "gateway"):
                    plan = Plan(src, dst, subject, uuid.uuid4().hex[:8], urls)
                    if args.profile and subject == "gateway" and rep == 0:
                        plan.profile = str(Path(args.profile_dir) / f"profile-{route}.txt")
                    res = await run_one(plan, args.messages, timeout=args.timeout)
                    print(f"  {route:<11} {subject:<8} rep {rep + 1}: {_run_line(res)}",
                          file=sys.stderr)
                    runs[subject].append(res)
            b = best(runs["bridge"], lambda r: r.msgs_per_s)
            g = best(runs["gateway"], lambda r: r.msgs_per_s)
            throughput.append(throughput_row(route, b, g))
            if (route in args.latency_routes.split(",") and src == "mqtt" and g.msgs_per_s
                    and not g.failed):
                rate = g.msgs_per_s / 2
                lat: dict[str, list[Result]] = {"bridge": [], "gateway": []}
                for _rep in range(args.repeat):
                    for subject in ("bridge", "gateway"):
                        plan = Plan(src, dst, subject, uuid.uuid4().hex[:8], urls)
                        res = await run_one(plan, 0, latency_rate=rate,
                                            latency_seconds=args.latency_seconds,
                                            timeout=args.timeout)
                        print(f"  {route:<11} {subject:<8} latency @ {rate:.0f}/s: "
                              f"p50 {res.p50_ms or float('nan'):.2f} ms  "
                              f"p99 {res.p99_ms or float('nan'):.2f} ms", file=sys.stderr)
                        lat[subject].append(res)
                lb = best(lat["bridge"], lambda r: -(r.p99_ms or 1e9))
                lg = best(lat["gateway"], lambda r: -(r.p99_ms or 1e9))
                latency.append({"route": route, "rate": rate, "bridge": asdict(lb),
                                "gateway": asdict(lg),
                                "added_p99_ms": (lg.p99_ms or 0) - (lb.p99_ms or 0)})
    print_table(throughput, latency, args)
    if args.json:
        Path(args.json).write_text(json.dumps({"messages": args.messages,
                                               "repeat": args.repeat,
                                               "throughput": throughput,
                                               "latency": latency}, indent=2))
    return 0


def throughput_row(route: str, b: Result, g: Result) -> dict[str, Any]:
    """One route's table row; no ratio when either side only has a partial run."""
    failed = b.failed or g.failed
    return {"route": route, "bridge": {**asdict(b), "delivered": b.delivered},
            "gateway": {**asdict(g), "delivered": g.delivered}, "failed": failed,
            "ratio": g.msgs_per_s / b.msgs_per_s if b.msgs_per_s and not failed else 0.0,
            "cpu_ratio": (g.cpu_per_1k / b.cpu_per_1k
                          if b.cpu_per_1k and not failed else 0.0)}


def print_table(throughput: list[dict[str, Any]], latency: list[dict[str, Any]],
                args: argparse.Namespace) -> None:
    print(f"\nthroughput: {args.messages} messages per run, best of {args.repeat}; "
          "target gateway/bridge >= 0.80")
    print(f"{'route':<11} | {'bridge msg/s':>12} {'CPU s/1k':>8} {'deliv/sent':>13} | "
          f"{'gateway msg/s':>13} {'CPU s/1k':>8} {'deliv/sent':>13} | {'ratio':>5} "
          f"{'CPU x':>5} | target")
    print("-" * 120)
    for t in throughput:
        b, g = t["bridge"], t["gateway"]
        ok = "FAILED" if t.get("failed") else "ok" if t["ratio"] >= 0.8 else "MISS"
        print(f"{t['route']:<11} | {b['msgs_per_s']:12.0f} {b['cpu_per_1k']:8.3f} "
              f"{b['delivered']:>13} | {g['msgs_per_s']:13.0f} {g['cpu_per_1k']:8.3f} "
              f"{g['delivered']:>13} | {t['ratio']:5.2f} {t['cpu_ratio']:5.2f} | {ok}")
    if latency:
        print(f"\nlatency: publish at half the best gateway rate for {args.latency_seconds:g} s, "
              "best p99 of repeats; target added p99 <= 5 ms")
        print(f"{'route':<11} {'rate/s':>7} | {'bridge p50':>10} {'p99':>7} | "
              f"{'gateway p50':>11} {'p99':>7} | {'added p99':>9} | target")
        print("-" * 90)
        for t in latency:
            b, g = t["bridge"], t["gateway"]
            ok = "ok" if t["added_p99_ms"] <= 5 else "MISS"
            print(f"{t['route']:<11} {t['rate']:7.0f} | {b['p50_ms'] or 0:8.2f}ms "
                  f"{b['p99_ms'] or 0:5.2f}ms | {g['p50_ms'] or 0:9.2f}ms "
                  f"{g['p99_ms'] or 0:5.2f}ms | {t['added_p99_ms']:7.2f}ms | {ok}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--messages", type=int, default=20_000, help="messages per run")
    p.add_argument("--routes", default=",".join(ALL_ROUTES),
                   help=f"comma-separated, from {', '.join(ALL_ROUTES)}")
    p.add_argument("--repeat", type=int, default=2, help="runs per subject; best is kept")
    p.add_argument("--latency-routes", default="mqtt-kafka",
                   help="routes (MQTT sources) to measure latency on")
    p.add_argument("--latency-seconds", type=float, default=5.0)
    p.add_argument("--timeout", type=float, default=180.0, help="seconds per run at most")
    p.add_argument("--json", help="also write the results to this JSON file")
    p.add_argument("--profile", action="store_true",
                   help="cProfile the gateway's event-loop thread in the 1st repetition")
    p.add_argument("--profile-dir", default=".", help="where profile-<route>.txt go")
    return p.parse_args(argv)


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main(parse_args())))
