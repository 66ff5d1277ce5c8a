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


def child(route: str, batches: int, bodies: str) -> None:
    from bench import bench_stages as bs
    from gateway.ports import Delivery
    from gateway.runtime.heap import settle_heap

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


def count(route: str, batches: int, bodies: str) -> int:
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
         "-m", "bench.bench_instructions", "--child", route, str(batches), bodies],
        capture_output=True, text=True, check=True)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise SystemExit(f"no count from callgrind: {done.stderr[-500:]}")
    return int(found.group(1))


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], int(sys.argv[3]), sys.argv[4])
        return
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--routes", default="kafka-nats,nats-kafka,kafka-kafka")
    p.add_argument("--bodies", default="parsed,deferred")
    args = p.parse_args()
    for route in args.routes.split(","):
        for bodies in args.bodies.split(","):
            per = (count(route, 8, bodies) - count(route, 2, bodies)) / (6 * BATCH)
            print(f"{route:12s} bodies {bodies:8s} {per:10,.0f} instructions/msg", flush=True)


if __name__ == "__main__":
    main()
