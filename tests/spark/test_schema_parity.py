"""Parity of the `schema` policy: Spark and the core converter give the same verdicts.

The definitions of `tests/data/schemas/orders.xreg.json` (JSON Schema by resource and
by version, Avro by XID, a JSON Schema 2020-12 file, an unenforceable JsonStructure)
and a tie broken by an Avro schema; each record through both under off, tiebreak and
enforce: the same outcome, definition, reason and error path.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from gateway.convert import Converter
from gateway.definitions import load_catalog, read_document
from gateway.definitions.model import MessageDefinition
from gateway.record import NativeMessage
from gateway.spark import compile_catalog, compile_stage

ORDERS = Path(__file__).resolve().parents[1] / "data" / "schemas" / "orders.xreg.json"

TIE = {
    "messagegroups": {"tie": {"envelope": "CloudEvents/1.0", "messages": {
        name: {"protocol": "NATS", "protocoloptions": {"subject": "tie.{x}"},
               "envelopemetadata": {"type": {"value": f"com.example.tie.{name}"},
                                    "source": {"value": "/tie"}},
               "dataschemauri": f"#/schemagroups/tie/schemas/{name}"}
        for name in ("a", "b")}}},
    "schemagroups": {"tie": {"schemas": {
        name: {"format": "Avro/1.11", "versions": {"1": {"schema": {
            "type": "record", "name": name.upper(),
            "fields": [{"name": name, "type": "int"}]}}}}
        for name in ("a", "b")}}},
}


def _definitions() -> list[MessageDefinition]:
    catalog = load_catalog(ORDERS)
    assert not catalog.errors, catalog.errors
    return [*catalog.messages(), *read_document(TIE).messages()]


def _line(subject: str, body: Any) -> str:
    return NativeMessage("NATS", {"subject": subject}, data=body).to_line()


RECORDS = [
    _line("orders.__SFX__.placed.s1", {"amount": 3, "sku": "a"}),
    _line("orders.__SFX__.placed.s2", {"amount": -3, "sku": "a"}),
    _line("orders.__SFX__.placed.s3", {"amount": 3}),
    _line("orders.__SFX__.v1.s1", {"amount": -3}),
    _line("orders.__SFX__.refund.s1", {"order": "o", "cents": 5}),
    _line("orders.__SFX__.refund.s2", {"order": "o"}),
    _line("orders.__SFX__.note.s1", {"text": "a note"}),
    _line("orders.__SFX__.note.s2", {"text": "a note that is too long"}),
    _line("orders.__SFX__.shape.s1", [1, 2]),
    _line("tie.1", {"b": 1}),
    _line("tie.2", {"a": 1}),
    _line("nobody.listens", {"x": 1}),
]


@pytest.mark.parametrize("policy", ["off", "tiebreak", "enforce"])
def test_schema_verdicts_match_the_core(spark: SparkSession, policy: str) -> None:
    definitions = _definitions()
    converter = Converter(definitions, schema=policy)  # type: ignore[arg-type]
    stage = compile_stage(spark, compile_catalog(definitions, schema=policy))
    frame = spark.createDataFrame([(line,) for line in RECORDS], "record string")
    rows = {row["record"]: row for row in stage.convert(frame).collect()}
    verdicts = []
    for line in RECORDS:
        row = rows[line]
        want = converter.convert(NativeMessage.from_line(line)).to_json()
        if row["outcome"] == "event":
            assert "cloudevent" in want, (line, want)
            got_type = json.loads(row["event"])["type"]
            assert got_type == want["cloudevent"]["type"], line
            verdicts.append(got_type)
        else:
            dead = json.loads(row["deadletter"])
            assert row["outcome"] == want["reason"], (line, dead)
            assert dead.get("detail") == want.get("detail"), line
            assert dead.get("match") == want.get("match"), line
            verdicts.append(row["outcome"])
    invalid = verdicts.count("invalid-data")
    assert invalid == (4 if policy == "enforce" else 0), verdicts
    # the tie: tiebreak and enforce pick by the Avro schema, off by declaration order
    expected_tie = "com.example.tie.b" if policy != "off" else "com.example.tie.a"
    assert verdicts[RECORDS.index(_line("tie.1", {"b": 1}))] == expected_tie
