"""Benchmark: match + render cost per message as the number of definitions grows.

Not a timed test: run `make bench` (or `python -m bench.bench_matcher`). One run measures
10, 1,000 and 10,000 definitions on the same machine, so the 10k/10 ratio is meaningful
even on a noisy shared host. Each size reports the best of several rounds (the least
disturbed), in microseconds per message, single core.

Definitions look like real catalogs: MQTT topic templates with literal levels and
placeholders, a user property, and a CloudEvents envelope whose type, source and subject
are rendered from the captures.
"""

from __future__ import annotations

import argparse
import json
import random
import time

from gateway.convert import Converter
from gateway.definitions.model import (
    CLOUDEVENTS,
    MessageDefinition,
    OptionConstraint,
    Property,
    Provenance,
)
from gateway.record import NativeMessage


def make_definitions(count: int) -> list[MessageDefinition]:
    out = []
    for i in range(count):
        topic = f"/plant/p{i % 97}/area{i // 97}/{{device}}/m{i % 13}"
        out.append(
            MessageDefinition(
                xid=f"/messagegroups/bench/messages/m{i}",
                message_id=f"m{i}",
                group_id="bench",
                provenance=Provenance("bench", f"$.m{i}"),
                protocol="MQTT/5.0",
                protocol_options=(
                    OptionConstraint("topic_name", None,
                                     Property("uritemplate", topic, True)),
                    OptionConstraint("user_properties", "unit",
                                     Property("uritemplate", "{unit}", True)),
                ),
                envelope=CLOUDEVENTS,
                envelope_metadata={
                    "type": Property("string", f"com.example.measure{i}", True),
                    "source": Property("uritemplate", "/plants/p" + str(i % 97) +
                                       "/devices/{device}", True),
                    "subject": Property("uritemplate", "{unit}", True),
                },
                order=i,
            )
        )
    return out


def make_messages(count: int, n_defs: int, seed: int = 7) -> list[NativeMessage]:
    rng = random.Random(seed)
    out = []
    for k in range(count):
        i = rng.randrange(n_defs)
        topic = f"/plant/p{i % 97}/area{i // 97}/dev{k % 50}/m{i % 13}"
        out.append(NativeMessage(
            "MQTT/5.0",
            {"topic_name": topic, "qos": 1,
             "user_properties": [{"name": "unit", "value": "celsius"}]},
            data={"value": k},
            received_at="2026-11-21T09:00:00Z",
        ))
    return out


def measure(n_defs: int, n_messages: int, rounds: int) -> float:
    converter = Converter(make_definitions(n_defs))
    messages = make_messages(n_messages, n_defs)
    convert = converter.convert
    for record in messages[:1000]:  # warm caches (compiled envelope templates)
        assert convert(record, explain=False).ok
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for record in messages:
            convert(record, explain=False)
        best = min(best, time.perf_counter() - start)
    return best / n_messages * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    sizes = (10, 1_000, 10_000)
    results = {n: measure(n, args.messages, args.rounds) for n in sizes}
    ratio = results[10_000] / results[10]
    if args.json:
        print(json.dumps({"us_per_message": results, "ratio_10k_10": ratio}))
        return 0
    print("match+render, one core, best of", args.rounds, "rounds of", args.messages, "messages")
    for n, us in results.items():
        print(f"  {n:>6} definitions: {us:6.2f} us/message  ({1e6 / us:,.0f} msg/s)")
    print(f"  ratio 10k/10: {ratio:.2f}  (targets: <= 5 us at 10k, ratio <= 1.5)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
