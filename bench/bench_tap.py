"""What an `xrgw tap` costs a route, in process: CPU per message of one route (memory
consumer and producers, the store example's definition, binary CloudEvents out) with no
tap, with a tap whose reader keeps up (it makes and serialises every line, as the
`/tap` endpoint does, on the same event loop), and with a tap whose reader never reads
(its queue full: every message dropped and counted).

Not a test; nothing asserts. Interleaved repetitions, CPU time of the process
(`time.process_time`), so other load on the machine moves the figures less than wall
time would. The brokers' and the network's share is in the external harness
(`tapped_xrgw.py`).

    .venv/bin/python -m bench.bench_tap [-n 50000] [--reps 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path

from adapters.memory import MemoryConsumer, MemoryProducer
from gateway.convert import Converter
from gateway.definitions import load_catalog
from gateway.observability.metrics import Metrics
from gateway.policies.retry import RetryPolicy
from gateway.record import NativeMessage
from gateway.runtime.route import Output, Route
from gateway.tap.endpoint import encode
from gateway.tap.filter import TapFilter
from gateway.tap.hub import TapHub
from gateway.tap.line import message_line

ROOT = Path(__file__).resolve().parents[1]
MODES = ("no tap", "tap, reader keeps up", "tap, reader stalled")


def messages(count: int) -> list[NativeMessage]:
    return [NativeMessage("MQTT/5.0", {
        "topic_name": f"/store/{n % 100}/cashierdesk/{n % 7}", "qos": 1,
        "user_properties": [{"name": "eventType", "value": "com.example.sale"}]},
        data={"desk": n % 7, "amount": n, "items": ["a", "b", "c"]}) for n in range(count)]


async def one(mode: str, records: list[NativeMessage], catalog: Converter) -> tuple[float, int]:
    hub = TapHub()
    consumer = MemoryConsumer(records, close_when_empty=True, max_in_flight=4096)
    route = Route("store", "store-mqtt", consumer, catalog,
                  [Output("events", "KAFKA", MemoryProducer(), defaults={"topic": "t"})],
                  deadletter=Output("dlq", "KAFKA", MemoryProducer(),
                                    defaults={"topic": "dead"}),
                  metrics=Metrics(), retry=RetryPolicy(), tap=hub)
    reader: asyncio.Task[None] | None = None
    subscription = None
    if mode != MODES[0]:
        subscription = hub.subscribe(TapFilter())
    if mode == MODES[1]:
        assert subscription is not None
        sub = subscription

        async def read() -> None:
            while True:
                await sub.wait(1.0)
                for entry in sub.take():
                    encode(message_line(entry))
                await asyncio.sleep(0)

        reader = asyncio.create_task(read())
    started = time.process_time()
    await route.start()
    await route.wait_finished()
    if reader is not None:  # what the reader still has to write is the tap's cost too
        assert subscription is not None
        while subscription.queue:
            await asyncio.sleep(0)
        reader.cancel()
    spent = time.process_time() - started
    await route.stop(grace=5)
    return spent, subscription.dropped if subscription is not None else 0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", type=int, default=50_000)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    converter = Converter(load_catalog([ROOT / "config/examples/store.xreg.json"]).messages())
    spent: dict[str, list[float]] = {mode: [] for mode in MODES}
    dropped: dict[str, list[int]] = {mode: [] for mode in MODES}
    for _ in range(args.reps):
        for mode in MODES:
            seconds, lost = asyncio.run(one(mode, messages(args.n), converter))
            spent[mode].append(seconds)
            dropped[mode].append(lost)
    base = statistics.median(spent[MODES[0]])
    print(f"{args.n:,} messages, {args.reps} interleaved reps, median CPU of the process")
    print(f"{'mode':<24} {'µs/msg':>8} {'msgs/CPU-s':>11} {'vs no tap':>9} {'dropped':>9}")
    for mode in MODES:
        median = statistics.median(spent[mode])
        print(f"{mode:<24} {median / args.n * 1e6:>8.1f} {args.n / median:>11,.0f} "
              f"{median / base:>9.2f} {statistics.median(dropped[mode]):>9,.0f}")


if __name__ == "__main__":
    main()
