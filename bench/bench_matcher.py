"""Benchmark: match + render cost per message as the number of definitions grows.

Not a timed test: run `make bench` (or `python -m bench.bench_matcher`). One run measures
every size on the same machine, so the ratio between the largest and the smallest size is
meaningful even on a noisy shared host. Each figure is the best of several rounds (the
least disturbed) of process CPU time (`time.process_time`, so other processes on a shared
host disturb it less than wall time), in microseconds per message, single core.

Two catalogs, each with definitions that look like real ones:

- mqtt: MQTT 5 topic templates with literal levels and placeholders, a user property,
  and a CloudEvents envelope whose type, source and subject are rendered from the
  captures; messages carry no correlation data, so every id is random.
- kafka: one constant topic per definition, a templated key and header; messages carry
  topic, partition and offset, so every id is the name-based UUID of that identity.
- topic: like kafka, but every definition on one topic, told apart by a constant
  `type` header (the index splits that topic's bucket by the header).

Messages are built as the adapters build them (`NativeMessage.from_wire`: parsed JSON
data plus the bytes it came from). Per size:

  match         `decode` (is it a CloudEvent?) and `Matcher.match`: the definition and
                the captures
  render        `EnvelopeRenderer.render`: the CloudEvent of an already matched message
  match+render  `Converter.convert_batch` over batches of 256 messages (one window of
                the route): both, as the route calls them; the issue's target is
                <= 5 us per message at 10,000 definitions
  output        `OutputFormat.render` of each event for one binary-mode output with an
                address default (kafka for the mqtt catalog, NATS for the kafka one)

`--adversarial` measures instead what one long topic costs (issue 28: matching is linear
in the input's length): per template with several placeholders in one segment, one
record through `Converter.convert_batch` (match, and explain when nothing matches, as the
route does) with a normal topic, and with topics of 1,000, 1,500 and 65,535 characters
built to make a backtracking matcher try every split (a run of the template's separator
closed by the wrong literal: unmatched, then explained; and closed by the right one).
Microseconds per record, best of `--rounds`, process CPU.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Callable, Sequence

from gateway.cloudevents.bindings import decode
from gateway.convert import Converter
from gateway.definitions.model import (
    CLOUDEVENTS,
    MessageDefinition,
    OptionConstraint,
    Property,
    Provenance,
)
from gateway.envelope.outgoing import OutputFormat
from gateway.record import NativeMessage

BATCH = 256  # the route's default window
RECEIVED_AT = "2026-11-21T09:00:00Z"


def _definition(i: int, protocol: str, options: tuple[OptionConstraint, ...],
                source: str) -> MessageDefinition:
    return MessageDefinition(
        xid=f"/messagegroups/bench/messages/m{i}",
        message_id=f"m{i}",
        group_id="bench",
        provenance=Provenance("bench", f"$.m{i}"),
        protocol=protocol,
        protocol_options=options,
        envelope=CLOUDEVENTS,
        envelope_metadata={
            "type": Property("string", f"com.example.measure{i}", True),
            "source": Property("uritemplate", source, True),
            "subject": Property("uritemplate", "{unit}", True),
        },
        order=i,
    )


def mqtt_definitions(count: int) -> list[MessageDefinition]:
    return [
        _definition(i, "MQTT/5.0", (
            OptionConstraint("topic_name", None, Property(
                "uritemplate", f"/plant/p{i % 97}/area{i // 97}/{{device}}/m{i % 13}", True)),
            OptionConstraint("user_properties", "unit", Property("uritemplate", "{unit}", True)),
        ), f"/plants/p{i % 97}/devices/{{device}}")
        for i in range(count)
    ]


def mqtt_messages(count: int, n_defs: int, seed: int = 7) -> list[NativeMessage]:
    rng = random.Random(seed)
    out = []
    for k in range(count):
        i = rng.randrange(n_defs)
        topic = f"/plant/p{i % 97}/area{i // 97}/dev{k % 50}/m{i % 13}"
        out.append(NativeMessage.from_wire(
            "MQTT/5.0",
            {"topic_name": topic, "qos": 1,
             "user_properties": [{"name": "unit", "value": "celsius"}]},
            json.dumps({"value": k, "status": "ok"}).encode(), None, RECEIVED_AT))
    return out


def kafka_definitions(count: int) -> list[MessageDefinition]:
    return [
        _definition(i, "KAFKA", (
            OptionConstraint("topic", None, Property("string", f"plant.p{i % 97}.m{i}", True)),
            OptionConstraint("key", None, Property("uritemplate", "{device}", True)),
            OptionConstraint("headers", "unit", Property("uritemplate", "{unit}", True)),
        ), f"/plants/p{i % 97}/devices/{{device}}")
        for i in range(count)
    ]


def kafka_messages(count: int, n_defs: int, seed: int = 7) -> list[NativeMessage]:
    rng = random.Random(seed)
    out = []
    for k in range(count):
        i = rng.randrange(n_defs)
        out.append(NativeMessage.from_wire(
            "KAFKA",
            {"topic": f"plant.p{i % 97}.m{i}", "partition": k % 4, "offset": k,
             "key": f"dev{k % 50}", "timestamp": 1795251600000,
             "headers": [{"name": "unit", "value": "celsius"},
                         {"name": "content-type", "value": "application/json"}]},
            json.dumps({"value": k, "status": "ok"}).encode(), "application/json",
            RECEIVED_AT))
    return out


# definitions(count), messages(count, definitions, seed), the output of the events
def shared_topic_definitions(count: int) -> list[MessageDefinition]:
    return [
        _definition(i, "KAFKA", (
            OptionConstraint("topic", None, Property("string", "measurements", True)),
            OptionConstraint("key", None, Property("uritemplate", "{device}", True)),
            OptionConstraint("headers", "type", Property("string", f"m{i}", True)),
            OptionConstraint("headers", "unit", Property("uritemplate", "{unit}", True)),
        ), f"/plants/p{i % 97}/devices/{{device}}")
        for i in range(count)
    ]


def shared_topic_messages(count: int, n_defs: int, seed: int = 7) -> list[NativeMessage]:
    rng = random.Random(seed)
    out = []
    for k in range(count):
        i = rng.randrange(n_defs)
        out.append(NativeMessage.from_wire(
            "KAFKA",
            {"topic": "measurements", "partition": k % 4, "offset": k, "key": f"dev{k % 50}",
             "timestamp": 1795251600000,
             "headers": [{"name": "type", "value": f"m{i}"},
                         {"name": "unit", "value": "celsius"},
                         {"name": "content-type", "value": "application/json"}]},
            json.dumps({"value": k, "status": "ok"}).encode(), "application/json",
            RECEIVED_AT))
    return out


Catalog = tuple[Callable[[int], list[MessageDefinition]],
                Callable[[int, int, int], list[NativeMessage]], OutputFormat]
CATALOGS: dict[str, Catalog] = {
    "mqtt": (mqtt_definitions, mqtt_messages,
             OutputFormat("KAFKA", defaults={"topic": "measurements"})),
    "kafka": (kafka_definitions, kafka_messages,
              OutputFormat("NATS", defaults={"subject": "measurements.{device}"})),
    "topic": (shared_topic_definitions, shared_topic_messages,
              OutputFormat("NATS", defaults={"subject": "measurements.{device}"})),
}


def measure(catalog: str, n_defs: int, n_messages: int, rounds: int) -> dict[str, float]:
    """Best of `rounds`, in microseconds per message, of each figure.

    The route converts a batch as soon as the adapter has built it, so its records are
    in the CPU's cache: each batch is built fresh (not timed) right before it is timed,
    rather than converting a list of records built long before (cold memory would
    dominate). The catalog is what it is: 10,000 definitions do not fit in the cache."""
    make_definitions, make_messages, output = CATALOGS[catalog]
    converter = Converter(make_definitions(n_defs))
    match_record, render = converter.matcher.match, converter.renderer.render
    best: dict[str, float] = {}
    batches = max(1, n_messages // BATCH)
    for round_number in range(rounds):
        spent = dict.fromkeys(("match", "render", "match+render", "output"), 0.0)
        for seed in range(round_number * batches, (round_number + 1) * batches):
            batch = make_messages(BATCH, n_defs, seed)
            start = time.process_time()
            for record in batch:
                event = decode(record)
                match_record(record, None if event is None else event.canonical_attributes())
            spent["match"] += time.process_time() - start
            matched = [match_record(record) for record in batch]
            start = time.process_time()
            for record, result in zip(batch, matched, strict=True):
                render(result.definition, record, result.context)  # type: ignore[arg-type]
            spent["render"] += time.process_time() - start
            start = time.process_time()
            converted = converter.convert_batch(batch)
            spent["match+render"] += time.process_time() - start
            events = [(c.event, c.match.context) for [c] in converted]
            assert all(event is not None for event, _ in events), converted
            start = time.process_time()
            for event, context in events:
                output.render(event, context)  # type: ignore[arg-type]
            spent["output"] += time.process_time() - start
        for name, seconds in spent.items():
            best[name] = min(best.get(name, float("inf")), seconds / (batches * BATCH) * 1e6)
    return best


# (template, a normal topic, the character the adversarial topics repeat, right closer)
ADVERSARIAL = [
    ("/plant/{site}-{line}-{machine}/temp", "/plant/p1-l2-m3/temp", "-", "/temp"),
    ("/plant/{site}.{line}.{machine}/temp", "/plant/p1.l2.m3/temp", ".", "/temp"),
    ("/plant/{a}_{b}_{c}_{d}/temp", "/plant/a_b_c_d/temp", "_", "/temp"),
    ("/s/{a}{b}{c}/t", "/s/abc/t", "a", "/t"),
    ("/s/{a}-{b}-{a}/t", "/s/x-y-x/t", "-", "/t"),
    # The same with a segment no split of which works ("hit" does not match either): the
    # search runs until its budget is spent.
    ("/s/{a}-{b}-{a}/t", "/s/x-y-x/t", "-", "y/t"),
]
ADVERSARIAL_LENGTHS = (1_000, 1_500, 65_535)


def _one_record(topic: str) -> NativeMessage:
    return NativeMessage.from_wire("MQTT/5.0", {"topic_name": topic, "qos": 1},
                                   b'{"value": 1}', None, RECEIVED_AT)


def measure_adversarial(rounds: int) -> list[dict[str, object]]:
    """Per template: µs per record for the normal topic and each adversarial length
    (`miss`: closed by the wrong literal, `hit`: by the right one)."""
    out: list[dict[str, object]] = []
    for template, normal, unit, closer in ADVERSARIAL:
        definition = _definition(0, "MQTT/5.0", (OptionConstraint(
            "topic_name", None, Property("uritemplate", template, True)),), "/s")
        converter = Converter([definition])
        head = template[:template.index("{")]
        topics = {"normal": normal}
        for length in ADVERSARIAL_LENGTHS:
            for name, tail in (("miss", closer + "x"), ("hit", closer)):
                body = (unit * length)[:length - len(head) - len(tail)]
                topics[f"{length} {name}"] = head + body + tail
        row: dict[str, object] = {"template": template}
        for name, topic in topics.items():
            record = _one_record(topic)
            converter.convert_batch([record])  # build the matcher's tests first
            best = float("inf")
            for _ in range(rounds):
                repeat = 20 if len(topic) < 10_000 else 5
                start = time.process_time()
                for _ in range(repeat):
                    converter.convert_batch([record])
                best = min(best, (time.process_time() - start) / repeat * 1e6)
            row[name] = best
        out.append(row)
    return out


def print_adversarial(rows: list[dict[str, object]]) -> None:
    columns = ["normal"] + [f"{n} {k}" for n in ADVERSARIAL_LENGTHS for k in ("miss", "hit")]
    print("µs per record (convert_batch of one record: match, explain when unmatched), "
          "process CPU")
    print(f"{'template':<38}" + "".join(f"{c:>12}" for c in columns))
    for row in rows:
        print(f"{row['template']!s:<38}"
              + "".join(f"{float(row[c]):>12.1f}" for c in columns))  # type: ignore[arg-type]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sizes", default="1,100,10000",
                        help="numbers of definitions, comma-separated")
    parser.add_argument("--catalogs", default="mqtt,kafka,topic",
                        help=f"comma-separated, of {', '.join(CATALOGS)}")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--adversarial", action="store_true",
                        help="time one long adversarial topic per template instead")
    args = parser.parse_args(argv)
    if args.adversarial:
        rows = measure_adversarial(args.rounds)
        if args.json:
            print(json.dumps({"us_per_record": rows}))
        else:
            print_adversarial(rows)
        return 0
    sizes = [int(s) for s in args.sizes.split(",")]
    results = {
        catalog: {n: measure(catalog, n, args.messages, args.rounds) for n in sizes}
        for catalog in args.catalogs.split(",")
    }
    if args.json:
        print(json.dumps({"us_per_message": results}))
        return 0
    print(f"us per message, one core, process CPU, best of {args.rounds} rounds of "
          f"{args.messages} messages")
    for catalog, by_size in results.items():
        print(f"\n{catalog}:  definitions |  match | render | match+render | output")
        for n, figures in by_size.items():
            print(f"{n:>19} | {figures['match']:6.2f} | {figures['render']:6.2f} | "
                  f"{figures['match+render']:12.2f} | {figures['output']:6.2f}")
        largest, smallest = by_size[max(sizes)], by_size[min(sizes)]
        print(f"  ratio {max(sizes)}/{min(sizes)} match+render: "
              f"{largest['match+render'] / smallest['match+render']:.2f}")
    print()
    for catalog, by_size in results.items():
        for n, figures in by_size.items():
            print(f"{catalog}: match+render µs/msg at {n} definitions: "
                  f"{figures['match+render']:.2f}")
    print("target: match+render <= 5 µs/msg at 10000 definitions")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
