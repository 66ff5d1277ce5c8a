"""Pure Python against mypyc-compiled hot modules, in process, per stage of the kafka ->
nats route's per-message work: is compiling them worth it (issue 36)?

Not a test; nothing asserts; nothing in the repository changes. Run from its root:

    .venv/bin/python -m bench.bench_compiled [--messages 5000] [--alternations 5]
        [--tree DIR] [--routes]

It copies the tracked files into a scratch tree (`--tree DIR`: that one, reused when it
already holds a build), compiles `COMPILED` there with mypyc (`.venv/bin/mypyc`, which
comes with mypy; needs gcc and the Python headers; about a minute), and times fresh child
processes, pure and compiled alternately (`--alternations` of each, which goes first
alternating too), so that load on the machine meets both alike; each stage is timed in CPU
time of the process, not wall time. The table gives the median per stage and the ratio
pure / compiled. The pure child imports the same tree with the extension modules hidden
(`_hide_compiled`), so both run the same source.

The route is `bench.bench_routes`'s gateway subject for kafka -> nats (one definition,
binary CloudEvents out, ~220 B JSON bodies, 64 keys); the stages are what the daemon does
per message between the Kafka client and the NATS socket:

- intake: aiokafka records -> deliveries (`Commits.deliver`: native records, slots);
- convert: `BatchMaker.convert` in slices of `CONVERT_SLICE` (match, render, headers);
- frames: `to_publish` + `publish_frame` of every rendered record (the NATS write,
  less the socket).

`--routes` then also runs `bench.bench_routes --routes kafka-nats` against real brokers
from this tree (pure) and from the scratch tree (compiled), alternately, and prints the
gateway's msg/s and CPU per message of each run.

What kept other modules out (see docs/performance.md): `gateway/record.py` (a frozen
dataclass written through `self.__dict__`, a ClassVar set per instance, an `object()`
sentinel as the default of a JSON-typed parameter), `gateway/cloudevents/event.py`
(`object.__new__` on a subclass of the SDK's CloudEvent; `cls.__new__` crashes mypyc),
`gateway/cloudevents/bindings/__init__.py` (mypyc cannot type `BINDING` through the
import cycle), and the renderers that `gateway/envelope/fastrender.py` generates and
execs per definition shape.
"""

from __future__ import annotations

import argparse
import gc
import importlib.machinery
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
STAGES = ("intake", "convert", "frames")
#: The per-message modules of the kafka -> nats route that mypyc compiles unchanged.
COMPILED = (
    "adapters/kafka/commits.py",
    "adapters/kafka/record.py",
    "adapters/nats/record.py",
    "gateway/cloudevents/bindings/common.py",
    "gateway/cloudevents/bindings/headers.py",
    "gateway/cloudevents/bindings/kafka.py",
    "gateway/cloudevents/bindings/nats.py",
    "gateway/cloudevents/datacodec.py",
    "gateway/cloudevents/mediatype.py",
    "gateway/cloudevents/timestamps.py",
    "gateway/cloudevents/typesystem.py",
    "gateway/convert.py",
    "gateway/envelope/ids.py",
    "gateway/envelope/outgoing.py",
    "gateway/envelope/render.py",
    "gateway/json/values.py",
    "gateway/matching/fast.py",
    "gateway/matching/index.py",
    "gateway/matching/matcher.py",
    "gateway/ports/_delivery.py",
    "gateway/runtime/batches.py",
    "gateway/runtime/keys.py",
    "gateway/runtime/ledger.py",
    "gateway/runtime/stats.py",
    "gateway/templates/match.py",
)
MODULES = [path.removesuffix(".py").replace("/", ".") for path in COMPILED]


def _hide_compiled() -> None:
    """Import `gateway` and `adapters` from their .py files even where a compiled .so
    sits next to them (the interpreter prefers the extension module)."""
    source_only = (importlib.machinery.SourceFileLoader, importlib.machinery.SOURCE_SUFFIXES)

    class SourceFirst(importlib.machinery.PathFinder):
        @classmethod
        def find_spec(cls, fullname: str, path: Any = None, target: Any = None) -> Any:
            if fullname.split(".")[0] not in ("gateway", "adapters") or "." not in fullname:
                return None
            for entry in path or ():
                spec = importlib.machinery.FileFinder(entry, source_only).find_spec(fullname)
                if spec is not None:
                    return spec
            return None

    sys.meta_path.insert(0, SourceFirst)


def _records(count: int) -> list[Any]:
    from aiokafka.structs import ConsumerRecord  # type: ignore[import-untyped]

    from bench.bench_routes import DEVICES, _body

    return [ConsumerRecord("bench-r1", 0, n, 1_764_000_000_000 + n, 0,
                           f"dev-{n % DEVICES}".encode(), _body(n, n % DEVICES), None, 6,
                           220, []) for n in range(count)]


def child(count: int, reps: int) -> dict[str, Any]:
    from adapters.kafka.commits import Commits
    from adapters.nats.record import publish_frame, to_publish
    from adapters.registry import REGISTRY
    from bench.bench_routes import Plan, load_plan_config
    from gateway.config import for_adapter
    from gateway.convert import Converter
    from gateway.observability.metrics import Metrics
    from gateway.runtime.batches import CONVERT_SLICE, BatchMaker
    from gateway.runtime.keys import PartitionKeys
    from gateway.runtime.output import Output
    from gateway.runtime.stats import RouteStats

    plan = Plan("kafka", "nats", "gateway", "r1",
                {"kafka": "kafka://127.0.0.1:9", "nats": "nats://127.0.0.1:9"})
    with tempfile.TemporaryDirectory() as workdir:
        config = load_plan_config(plan, Path(workdir))
    route = config.routes[0]
    given = for_adapter(config.endpoints["dst"])
    output = Output("dst", "NATS", REGISTRY.producer(given),
                    defaults=REGISTRY.output_defaults(given))
    converter = Converter(route.messages, ambiguity=route.ambiguity, schema=route.schema)
    stats = RouteStats("src->dst", "src", Metrics(), None, 4096, [output])
    maker = BatchMaker(converter, [output], route.mode, PartitionKeys(route.partitionkey),
                       stats)
    spent: dict[str, list[float]] = {stage: [] for stage in STAGES}
    frames = 0
    for _ in range(reps):
        records = _records(count)
        gc.collect()
        started = time.process_time()
        commits = Commits()
        deliveries = []
        for start in range(0, count, 500):  # a getmany() answer of 500 records
            deliveries += commits.deliver({"tp": records[start:start + 500]},
                                          "2026-11-27T20:00:00.000Z")
        spent["intake"].append(time.process_time() - started)
        gc.collect()
        started = time.process_time()
        batches = [maker.convert(deliveries[start:start + CONVERT_SLICE], 0.0)
                   for start in range(0, count, CONVERT_SLICE)]
        spent["convert"].append(time.process_time() - started)
        rendered = [record for batch in batches for record in batch.sent[0].records]
        gc.collect()
        started = time.process_time()
        out = [publish_frame(to_publish(record), "") for record in rendered]
        spent["frames"].append(time.process_time() - started)
        frames = len(out)
    assert frames == count, f"{frames} of {count} messages rendered"
    loaded = {name: sys.modules[name].__file__ or "" for name in MODULES}
    # The least of the repetitions: what the work costs when nothing else took the core.
    return {"us": {stage: min(v) / count * 1e6 for stage, v in spent.items()},
            "compiled": sorted(n for n, f in loaded.items() if not f.endswith(".py")),
            "sample": out[0].decode(errors="replace")}


def build(tree: Path) -> None:
    """The tracked files (and this one) in `tree`, and `COMPILED` compiled in place there
    unless it already holds their extension modules (a reused `--tree`)."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                           check=True).stdout.decode().split("\0")
    for name in {*filter(None, files), str(Path(__file__).relative_to(ROOT))}:
        if (ROOT / name).is_file():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, tree / name)
    if all(list((tree / path).parent.glob(Path(path).stem + ".*.so")) for path in COMPILED):
        return
    print(f"compiling {len(COMPILED)} modules with mypyc in {tree} ...", file=sys.stderr)
    mypyc = Path(sys.executable).parent / "mypyc"
    subprocess.run([str(mypyc), *COMPILED], cwd=tree, check=True, stdout=subprocess.DEVNULL)


def run_child(tree: Path, variant: str, args: argparse.Namespace) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "bench.bench_compiled", "--child", variant,
         "--messages", str(args.messages), "--reps", str(args.reps)],
        cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)},
        capture_output=True, text=True, check=True)
    answer: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    if variant == "compiled" and len(answer["compiled"]) != len(MODULES):
        missing = sorted(set(MODULES) - set(answer["compiled"]))
        raise SystemExit(f"not compiled: {missing}")
    if variant == "pure" and answer["compiled"]:
        raise SystemExit(f"the pure child imported compiled {answer['compiled']}")
    return answer


def routes(tree: Path, args: argparse.Namespace) -> None:
    """`bench.bench_routes` kafka -> nats, pure (this tree) and compiled (`tree`)."""
    runs: dict[str, list[dict[str, float]]] = {"pure": [], "compiled": []}
    for _ in range(args.alternations_routes):
        for variant, where in (("pure", ROOT), ("compiled", tree)):
            with tempfile.NamedTemporaryFile(suffix=".json") as out:
                subprocess.run(
                    [sys.executable, "-m", "bench.bench_routes", "--routes", "kafka-nats",
                     "--messages", str(args.route_messages), "--repeat", "3",
                     "--json", out.name],
                    cwd=where, env={**os.environ, "PYTHONPATH": str(where)}, check=True,
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                row = json.loads(Path(out.name).read_text())["throughput"][0]
            gateway, bridge = row["gateway"], row["bridge"]
            runs[variant].append({"msg/s": gateway["msgs_per_s"],
                                  "CPU µs/msg": gateway["cpu_per_1k"] * 1e3,
                                  "vs bridge": row["ratio"]})
            print(f"  bench_routes {variant:<8} {gateway['msgs_per_s']:8.0f} msg/s "
                  f"{gateway['cpu_per_1k'] * 1e3:6.1f} CPU µs/msg (bridge "
                  f"{bridge['msgs_per_s']:8.0f} msg/s)", file=sys.stderr)
    print(f"\nbench_routes kafka-nats, {args.route_messages:,} messages, best of 3 per run, "
          f"{args.alternations_routes} alternations; medians")
    print(f"{'':<11} {'pure':>8} {'compiled':>9} {'ratio':>6}")
    for key in ("msg/s", "CPU µs/msg", "vs bridge"):
        pure, compiled = (statistics.median(r[key] for r in runs[v])
                          for v in ("pure", "compiled"))
        ratio = compiled / pure if key != "CPU µs/msg" else pure / compiled
        print(f"{key:<11} {pure:>8.2f} {compiled:>9.2f} {ratio:>5.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--reps", type=int, default=5,
                        help="repetitions inside a child (the least counts)")
    parser.add_argument("--alternations", type=int, default=5)
    parser.add_argument("--tree", help="scratch tree to build in (kept; reused if built)")
    parser.add_argument("--routes", action="store_true",
                        help="also bench_routes kafka-nats, pure against compiled")
    parser.add_argument("--route-messages", type=int, default=5000)
    parser.add_argument("--alternations-routes", type=int, default=2)
    parser.add_argument("--child", choices=("pure", "compiled"))
    args = parser.parse_args()
    if args.child is not None:
        if args.child == "pure":
            _hide_compiled()
        print(json.dumps(child(args.messages, args.reps)))
        return
    tree = Path(args.tree or tempfile.mkdtemp(prefix="xrgw-compiled-"))
    try:
        build(tree)
        results: dict[str, list[dict[str, float]]] = {"pure": [], "compiled": []}
        for turn in range(args.alternations):  # which goes first alternates too
            for variant in ("pure", "compiled")[::1 if turn % 2 == 0 else -1]:
                results[variant].append(run_child(tree, variant, args)["us"])
        print(f"kafka -> nats in process, {args.messages:,} messages x {args.reps} reps per "
              f"child, {args.alternations} alternations; median µs/msg, ratio pure / "
              "compiled of the medians, and the range of the ratios of the pairs run "
              "back to back")
        print(f"{'stage':<10} {'pure':>8} {'compiled':>9} {'ratio':>6}  {'pairs':>11}")
        for stage in (*STAGES, "total"):
            pure, compiled = ([sum(r.values()) if stage == "total" else r[stage]
                               for r in results[variant]] for variant in ("pure", "compiled"))
            pairs = [a / b for a, b in zip(pure, compiled, strict=True)]
            print(f"{stage:<10} {statistics.median(pure):>8.2f} "
                  f"{statistics.median(compiled):>9.2f} "
                  f"{statistics.median(pure) / statistics.median(compiled):>5.2f}x  "
                  f"{min(pairs):.2f}-{max(pairs):.2f}x")
        if args.routes:
            routes(tree, args)
    finally:
        if args.tree is None:
            shutil.rmtree(tree, ignore_errors=True)


if __name__ == "__main__":
    main()
