"""Benchmark: instructions per message of a route's in-process stages, counted by
valgrind (callgrind), which the host's noise does not move.

Not a test: run by hand (from the repository root; needs `valgrind`), e.g.

    python -m bench.bench_instructions --routes kafka-kafka,kafka-nats
    python -m bench.bench_instructions --routes kafka-kafka --bodies parsed,deferred

For each route of `bench_stages.py` (one definition, binary CloudEvents out, the
passthrough harness's records and headers) a child process makes the client's records,
turns them into native records (`to_record`), converts them (`BatchMaker.convert`: the
fused path once learned) and writes the producer's form of each output record, in
batches of 1,000 with a window of 4 batches kept alive. Each child runs twice under
callgrind, with 2 and with 8 batches; the difference over 6,000 messages is the count per
message, without the interpreter's start-up and the first batch.

`--bodies`: `parsed` (bodies parsed as they arrive, the default of every source) and/or
`deferred` (parsed when first read, what a route tells its source where its outputs
never read them: `gateway/ports/_bodies.py`).

`--whole` (Kafka sources): the consumer's part and the settler's too, as the daemon
runs them between the client library and the sockets: the commit tracking's deliveries
(`Commits.deliver`), the conversion and the producer's form as above, then what
settling a batch does when nothing failed (`DeadLetters.write`, `ports.ack_all`) and
freeing it. Only the event loop, the clients and the metrics' own work are left out.
`--answerer` adds the reply-topic hook the consumer made for every record before a
route that answers nobody could say so (`ports.answer_nobody`).

`--settle each,bulk`: instead, what settling a read batch of a Kafka partition costs per
message (1,000 records delivered by the consumer's commit tracking, then acked): `each`
through every delivery's own `ack`, the way the route settled before, `bulk` through
`ports.ack_all` (one call to the tracking per batch: `gateway/ports/_bulk.py`).

Instructions are not time: a cache miss costs no instruction (a body parsed late, when its
bytes are no longer in cache, counts the same as one parsed early). Use it to compare
two ways of doing the same work, and the passthrough harness for what a route costs.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys

BATCH = 1000
RECEIVED = "2026-11-29T12:00:00Z"


def child(route: str, batches: int, bodies: str) -> None:
    from bench import bench_stages as bs
    from gateway.heap import settle_heap
    from gateway.ports import Delivery

    source, sink = route.split("-")
    maker = bs.route_maker(bs._definition(source), sink)
    write = bs._writer(sink)
    read = bs._reader(source, BATCH, parse=bodies == "parsed")
    settle_heap()
    kept: list[object] = []
    for _ in range(batches):
        records = read()
        batch = maker.convert([Delivery(r, bs._settle) for r in records], 0.0)
        write(batch.sent[0].records)
        kept.append(batch)
        del kept[:-4]


def settle_child(how: str, batches: int) -> None:
    import asyncio

    from aiokafka import TopicPartition  # type: ignore[import-untyped]

    from adapters.kafka.commits import Commits
    from bench import bench_stages as bs
    from gateway.ports import ack_all

    async def main() -> None:
        commits = Commits()  # no client: the offsets wait for one, no request is made
        records = bs._kafka_records(BATCH)
        tp = TopicPartition("t", 0)
        for batch in range(batches):
            for record in records:  # the next offsets of the partition
                record.offset += BATCH if batch else 0
            deliveries = commits.deliver({tp: records}, "")
            if how == "bulk":
                await ack_all(deliveries)
            else:
                for delivery in deliveries:
                    await delivery.ack()

    asyncio.run(main())


def whole_child(route: str, batches: int, bodies: str) -> None:
    import asyncio

    from aiokafka import TopicPartition
    from prometheus_client import CollectorRegistry

    from adapters.kafka.commits import Commits
    from adapters.kafka.options import KafkaOptions
    from adapters.kafka.reply import AnswerSender
    from bench import bench_stages as bs
    from gateway.heap import settle_heap
    from gateway.observability.metrics import Metrics
    from gateway.policies.retry import RetryPolicy
    from gateway.ports import EndpointSettings, ack_all
    from gateway.redaction.redactor import Redactor
    from gateway.runtime.deadletters import DeadLetters
    from gateway.runtime.sender import Sender
    from gateway.runtime.stalls import Stalls
    from gateway.runtime.window import Window

    source, sink = route.split("-")
    assert source == "kafka", "--whole: Kafka sources only"
    maker = bs.route_maker(bs._definition(source), sink)
    write = bs._writer(sink)
    settings = EndpointSettings(uri="kafka://127.0.0.1:9092",
                                options={"topics": ["t"], "consumergroup": "g"})
    answers = AnswerSender(KafkaOptions.parse(settings), "bench")
    # The settler's dead letters (none configured: nothing fails here anyway).
    stats = maker._stats
    stalls = Stalls("bench", Metrics(CollectorRegistry()), 60.0)
    window = Window(4096, BATCH, stats, stalls)
    sender = Sender(maker.outputs, None, RetryPolicy(), None, stats, stalls)
    deadletters = DeadLetters(None, "src", Redactor(), sender, window, stats, stalls)

    async def main() -> None:
        commits = Commits()  # no client: the offsets wait for one, no request is made
        # A route that answers nobody tells its consumer so (`ports.answer_nobody`);
        # `--answerer` keeps the hook every record was looked at for before that.
        commits.answerer = answers.answerer if "--answerer" in sys.argv else None
        commits.parse_bodies = bodies == "parsed"
        records = bs._kafka_records(BATCH)
        tp = TopicPartition("t", 0)
        settle_heap()
        kept: list[object] = []
        for number in range(batches):
            for record in records:  # the next offsets of the partition
                record.offset += BATCH if number else 0
            # The consumer's receive time: one text per batch (`KafkaConsumer._deliver`).
            batch = maker.convert(commits.deliver({tp: records}, RECEIVED), 0.0)
            write(batch.sent[0].records)
            kept.append(batch)
            if len(kept) > 4:  # settled in order, a window of 4 batches kept alive
                oldest = kept.pop(0)
                assert not await deadletters.write(oldest.messages, {})  # type: ignore[attr-defined]
                await ack_all(oldest.deliveries())  # type: ignore[attr-defined]
                del oldest

    asyncio.run(main())


def count(route: str, batches: int, bodies: str, mode: str = "--child",
          extra: tuple[str, ...] = ()) -> int:
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
         "-m", "bench.bench_instructions", mode, route, str(batches), bodies, *extra],
        capture_output=True, text=True, check=True)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise SystemExit(f"no count from callgrind: {done.stderr[-500:]}")
    return int(found.group(1))


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        if sys.argv[2] == "settle":
            settle_child(sys.argv[4], int(sys.argv[3]))
        else:
            child(sys.argv[2], int(sys.argv[3]), sys.argv[4])
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--whole-child":
        whole_child(sys.argv[2], int(sys.argv[3]), sys.argv[4])
        return
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--routes", default="kafka-nats,nats-kafka,kafka-kafka")
    p.add_argument("--bodies", default="parsed,deferred")
    p.add_argument("--whole", action="store_true",
                   help="Kafka sources: the consumer's and the settler's part too")
    p.add_argument("--answerer", action="store_true",
                   help="--whole: with the consumer's reply-topic hook per record")
    p.add_argument("--settle", default="", help="each,bulk: settling instead of the routes")
    args = p.parse_args()
    if args.settle:
        for how in args.settle.split(","):
            per = (count("settle", 8, how) - count("settle", 2, how)) / (6 * BATCH)
            print(f"kafka settle {how:5s} {per:10,.0f} instructions/msg", flush=True)
        return
    mode, what = ("--whole-child", "whole") if args.whole else ("--child", "stages")
    for route in args.routes.split(","):
        for bodies in args.bodies.split(","):
            extra = ("--answerer",) if args.answerer else ()
            per = (count(route, 8, bodies, mode, extra)
                   - count(route, 2, bodies, mode, extra)) / (6 * BATCH)
            print(f"{route:12s} {what} bodies {bodies:8s} {per:10,.0f} instructions/msg",
                  flush=True)


if __name__ == "__main__":
    main()
