"""Benchmark: the cost per message of `schema: enforce`, and of each validator.

Measured on the shared 2-core development host (10,000 messages, best of 3):
convert off 11.7 us, convert enforce 19.5 us (enforce adds 7.8 us), fastjsonschema
5.3 us, jsonschema 74 us, avro 6.6 us per message. `jsonschema` alone would cost six
times the rest of the path, hence `fastjsonschema` for the drafts it implements.

Not a timed test: `python -m bench.bench_schema`. Process CPU time, best of several rounds,
microseconds per message, one core. Records are NATS messages built as the adapter builds
them (`NativeMessage.from_wire`: parsed JSON data plus its bytes) for a definition whose
JSON Schema (draft-07, an order of five typed fields with bounds) is referenced from the
same document (`#/schemagroups/...`), and for an Avro one.

  convert off        `Converter.convert_batch` with `schema: off` (match + render)
  convert enforce    the same with `schema: enforce` (match + validate + render)
  enforce cost       the difference: what enforcing adds to a message
  fastjsonschema     the compiled validator alone (what enforce uses for drafts 4-7)
  jsonschema         `jsonschema`'s `is_valid` alone (the reference implementation,
                     used for 2019-09/2020-12 and for error messages)
  avro               `fastavro` validation of the same JSON datum
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from gateway.convert import Converter
from gateway.definitions import read_document
from gateway.definitions.model import MessageDefinition
from gateway.definitions.schema_model import SchemaDocument
from gateway.policies.schema import SchemaPolicy
from gateway.record import NativeMessage
from gateway.schemas.compile import JsonSchemaValidator, Unsupported, compile_document

BATCH = 256
ORDER_SCHEMA: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
    "required": ["id", "sku", "amount", "quantity", "store"],
    "properties": {"id": {"type": "string", "minLength": 1},
                   "sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]+$"},
                   "amount": {"type": "number", "minimum": 0},
                   "quantity": {"type": "integer", "minimum": 1, "maximum": 1000},
                   "store": {"type": "string"}}}
AVRO_SCHEMA = {"type": "record", "name": "Order", "fields": [
    {"name": "id", "type": "string"}, {"name": "sku", "type": "string"},
    {"name": "amount", "type": "double"}, {"name": "quantity", "type": "int"},
    {"name": "store", "type": "string"}]}


def definitions() -> list[MessageDefinition]:
    return list(read_document({
        "messagegroups": {"orders": {"envelope": "CloudEvents/1.0", "messages": {"placed": {
            "protocol": "NATS", "protocoloptions": {"subject": "orders.{store}.placed"},
            "envelopemetadata": {"type": {"value": "com.example.order.placed"},
                                 "source": {"type": "uritemplate",
                                            "value": "/stores/{store}"}},
            "datacontenttype": "application/json",
            "dataschemauri": "#/schemagroups/orders/schemas/order"}}}},
        "schemagroups": {"orders": {"schemas": {"order": {"versions": {"1": {
            "format": "JsonSchema/draft-07", "schema": ORDER_SCHEMA}}}}}},
    }).messages())


def messages(count: int, seed: int) -> list[NativeMessage]:
    out = []
    for i in range(count):
        body = {"id": f"o-{seed}-{i}", "sku": f"ABC-{i}", "amount": 12.5 + i % 7,
                "quantity": 1 + i % 9, "store": f"s{i % 13}"}
        raw = json.dumps(body).encode()
        out.append(NativeMessage.from_wire("NATS", {"subject": f"orders.s{i % 13}.placed"},
                                           raw, "application/json"))
    return out


def _best(rounds: int, batches: int, run: Callable[[list[NativeMessage]], object]) -> float:
    best = float("inf")
    for round_number in range(rounds):
        spent = 0.0
        for seed in range(round_number * batches, (round_number + 1) * batches):
            batch = messages(BATCH, seed)
            start = time.process_time()
            run(batch)
            spent += time.process_time() - start
        best = min(best, spent / (batches * BATCH) * 1e6)
    return best


def measure(n_messages: int, rounds: int) -> dict[str, float]:
    batches = max(1, n_messages // BATCH)
    defs = definitions()
    figures: dict[str, float] = {}
    policies: tuple[SchemaPolicy, ...] = ("off", "enforce")
    for policy in policies:
        converter = Converter(defs, schema=policy)
        check = converter.convert_batch(messages(4, 0))
        assert all(c.ok for [c] in check), check
        figures[f"convert {policy}"] = _best(rounds, batches, converter.convert_batch)
    figures["enforce cost"] = figures["convert enforce"] - figures["convert off"]
    fast = compile_document(SchemaDocument("JsonSchema/draft-07", ORDER_SCHEMA, "bench:f"))
    assert isinstance(fast, JsonSchemaValidator)
    figures["fastjsonschema"] = _best(rounds, batches,
                                      lambda b: [fast.check(r) for r in b])
    reference = fast._full  # the reference validator of the same schema
    figures["jsonschema"] = _best(rounds, batches,
                                  lambda b: [reference.is_valid(r.data) for r in b])
    avro = compile_document(SchemaDocument("Avro/1.11", AVRO_SCHEMA, "bench:a"))
    assert not isinstance(avro, Unsupported)
    figures["avro"] = _best(rounds, batches, lambda b: [avro.check(r) for r in b])
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    figures = measure(args.messages, args.rounds)
    if args.json:
        print(json.dumps({"us_per_message": figures}))
        return 0
    print(f"us per message, one core, process CPU, best of {args.rounds} rounds of "
          f"{args.messages} messages")
    for name, value in figures.items():
        print(f"  {name:<18} {value:8.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
