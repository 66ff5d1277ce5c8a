"""Benchmark: CPU per record of the Kafka producer adapter against aiokafka's `send()`.

Not a timed test: `python -m bench.bench_kafka_producer [--records 40960]`, from the
repository root (the broker harness starts Tansu on a loopback port).

Both sides send the same records (a key of eight values, five headers, ~200 B of body) to a
one-partition topic with acks=all and linger_ms 0, in submits of 1, 16 and 1,024 records,
and wait for every acknowledgement; reported is this process's CPU time per record and
the records per second, best of `--rounds`:

  baseline   aiokafka `send()` per record and the futures awaited: what a plain
             client-library bridge does (a passthrough bridge)
  adapter    `KafkaProducer.submit` (adapters/kafka/producer.py): records packed per partition
             into record batches; it also builds each record from a NativeMessage
             (to_send: topic, key, headers, content type), which the baseline does not

Result on the shared 2-core development host (2026-11-24, loaded by other jobs), us of CPU
per record, baseline / adapter: submits of 1: 27.0 / 43.9 (a submit's own cost: its turn,
deadline and confirmation); of 16: 25.2 / 9.2; of 1,024: 26.2 / 7.5. The adapter before
record batches (one `send()` per record, linger 5 ms): 62 / 25 / 21.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

from aiokafka import AIOKafkaProducer  # type: ignore[import-untyped]
from aiokafka.admin import AIOKafkaAdminClient, NewTopic  # type: ignore[import-untyped]

from adapters.kafka import KafkaProducer
from gateway.ports import EndpointSettings
from gateway.record import NativeMessage
from harness.brokers import Tansu

HEADERS = {"ce_id": "7f1c2a9e-2b1d-4c6f-9a0e-3d5b8c7e1f20", "ce_source": "/stores/1",
           "ce_type": "com.example.store.sale", "ce_specversion": "1.0",
           "ce_subject": "cashierdesk/4"}
BODY = {"storeid": 1, "cdid": 4, "amount": 12.5, "pad": "x" * 120}


async def create_topic(bootstrap: str, name: str) -> None:
    """A one-partition topic `name` (also used by bench_broker_headers and bench_latency)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, 1, 1)])
    finally:
        await admin.close()


async def _baseline(bootstrap: str, topic: str, records: int, size: int) -> float:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0,
                                max_batch_size=1 << 20)
    await producer.start()
    headers = [(k, v.encode()) for k, v in HEADERS.items()]
    headers.append(("content-type", b"application/json"))
    try:
        started = time.process_time()
        futures: list[Any] = []
        for n in range(records):
            futures.append(await producer.send(topic, json.dumps(BODY).encode(),
                                               key=f"store/{n % 8}".encode(),
                                               headers=headers))
            if len(futures) >= size * 64:
                await asyncio.gather(*futures)
                futures.clear()
        await asyncio.gather(*futures)
        return time.process_time() - started
    finally:
        await producer.stop()


async def _adapter(url: str, topic: str, records: int, size: int) -> float:
    producer = KafkaProducer(EndpointSettings(url, options={"linger_ms": 0}))
    await producer.connect()
    batch = [NativeMessage("KAFKA", {"topic": topic, "key": f"store/{n % 8}",
                                     "headers": HEADERS}, data=BODY) for n in range(size)]
    try:
        started = time.process_time()
        confirmations = []
        for _ in range(records // size):
            confirmations.append(await producer.submit(batch))
            if len(confirmations) >= 64:
                for confirmation in confirmations:
                    assert all(o.delivered for o in await confirmation)
                confirmations.clear()
        for confirmation in confirmations:
            assert all(o.delivered for o in await confirmation)
        return time.process_time() - started
    finally:
        await producer.aclose()


async def run(args: argparse.Namespace) -> None:
    with Tansu() as kafka:
        await create_topic(kafka.bootstrap_servers, "base")
        await create_topic(kafka.bootstrap_servers, "adapter")
        print("| submit size | baseline us/record | adapter us/record | ratio |")
        print("|---|---|---|---|")
        for size in (1, 16, 1024):
            records = args.records if size > 1 else args.records // 4
            base = min([await _baseline(kafka.bootstrap_servers, "base", records, size)
                        for _ in range(args.rounds)])
            ours = min([await _adapter(kafka.url, "adapter", records, size)
                        for _ in range(args.rounds)])
            print(f"| {size} | {base / records * 1e6:.1f} | {ours / records * 1e6:.1f} | "
                  f"{ours / base:.2f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=40960)
    parser.add_argument("--rounds", type=int, default=2)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
