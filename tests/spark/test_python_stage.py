"""The Python stage over one Arrow batch, row for row against the core converter.

No JVM: the stage is the body of the Arrow UDF (`gateway.spark.fallback.python_stage`),
called here as Spark's Python worker calls it. Its batch -- nulls for rows the compiled
path settled, lines that are no record, events, dead letters -- must give, per row, what
converting that line alone gives: the event's columns and text, or the dead letter with
the conversion's whole JSON form and the record.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]  # no stubs
import pytest
from pyspark.sql.pandas.types import to_arrow_type

from gateway.cloudevents.jsonformat import event_to_json
from gateway.convert import Converter
from gateway.definitions import load_catalog
from gateway.definitions.model import MessageDefinition
from gateway.record import NativeMessage, RecordError
from gateway.spark import compile_catalog, fallback
from gateway.spark.fallback import python_stage
from gateway.spark.outcome import outcome_type

EXAMPLES = Path(__file__).resolve().parents[2] / "config" / "examples"
RECEIVED = "2026-01-01T00:00:00Z"


def _payment(kind: str, offset: int, body: object = None) -> str:
    """A Kafka record line of the payments example: its identity (topic, partition,
    offset) and receive time fix the event's id and time, so two conversions agree."""
    record: dict[str, object] = {
        "protocol": "KAFKA", "topic": "payments", "partition": 3, "offset": offset,
        "key": f"acc-{offset}", "received_at": RECEIVED,
        "headers": [{"name": "kind", "value": kind}, {"name": "region", "value": "eu"}]}
    if body is not None:
        record["data"] = body
    return json.dumps(record)


def _lines() -> list[str | None]:
    paid = {"amount": 19.99, "currency": "EUR"}
    return [
        _payment("authorized", 1, paid),
        None,  # settled by the compiled path
        _payment("no-such-kind", 2, paid),  # no definition takes it
        "{not json",
        json.dumps({"protocol": "KAFKA", "topic": 5}),  # JSON, but no record
        _payment("authorized", 3),  # matched, no body: its definition's rule decides
        None,
        *(_payment("authorized", 10 + n, {**paid, "amount": n}) for n in range(6)),
    ]


@pytest.fixture(autouse=True)
def settled(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The stage's heap settings, recorded instead of applied: in a Python worker they
    are the daemon's (`gateway/heap.py`); in this test process they would freeze every
    test's objects."""
    calls: list[str] = []
    monkeypatch.setattr(fallback, "settle_heap", lambda: calls.append("settle_heap"))
    return calls


@pytest.fixture(scope="module")
def definitions() -> list[MessageDefinition]:
    catalog = load_catalog([str(EXAMPLES / "kafka-payments.xreg.json")])
    assert not catalog.errors, catalog.errors
    return list(catalog.messages())


def _expected(converter: Converter, line: str) -> dict[str, Any]:
    """The row of `line` converted alone (the stage's columns, `ce` before typing)."""
    try:
        record = NativeMessage.from_line(line)
    except RecordError as exc:
        return {"outcome": "invalid-record", "match": None, "context": None, "ce": None,
                "event": None, "nearest": None, "path": "python",
                "deadletter": {"match": None, "reason": "invalid-record", "detail": str(exc),
                               "record": _loads_or_text(line)}}
    conversion = converter.convert(record)
    definition = conversion.match.definition
    match = None if definition is None else definition.xid
    row: dict[str, Any] = {"match": match, "context": list(conversion.match.context.items()),
                           "path": "python"}
    if conversion.event is not None:
        event = event_to_json(conversion.event)
        return {**row, "outcome": "event", "deadletter": None, "nearest": match,
                "event": event, "ce": {k: json.dumps(v) if k == "data" else v
                                       for k, v in event.items()}}
    nearest = match or (conversion.explain[0].definition if conversion.explain else None)
    return {**row, "outcome": conversion.reason, "ce": None, "event": None,
            "nearest": nearest,
            "deadletter": {**conversion.to_json(), "record": record.to_json()}}


def _loads_or_text(line: str) -> object:
    try:
        return json.loads(line)
    except ValueError:
        return line


def _comparable(row: dict[str, Any]) -> dict[str, Any]:
    """A stage row with its JSON texts read back (the byte form is the binding's
    business) and the `ce` columns the event does not fill dropped."""
    out = dict(row)
    out["context"] = None if row["context"] is None else [tuple(p) for p in row["context"]]
    for name in ("event", "deadletter"):
        if row[name] is not None:
            out[name] = json.loads(row[name])
    if row["ce"] is not None:
        out["ce"] = {k: json.loads(v) if k == "data" else v
                     for k, v in row["ce"].items() if v is not None}
    return out


def test_a_batch_gives_each_row_what_its_line_gives_alone(
        definitions: list[MessageDefinition]) -> None:
    schema = outcome_type(compile_catalog(definitions))
    result = to_arrow_type(type(schema)([f for f in schema.fields if f.name != "record"]))
    stage = python_stage(definitions, "test-python-stage", ambiguity="first",
                         validate_schema=False, explain=True, result=result)
    lines = _lines()
    rows = stage(pa.array(lines, type=pa.string())).to_pylist()
    assert len(rows) == len(lines)
    converter = Converter(definitions)
    outcomes = []
    for line, row in zip(lines, rows, strict=True):
        if line is None:
            assert row is None
            continue
        expected = _expected(converter, line)
        if expected["ce"] is not None:
            expected["ce"] = {k: v for k, v in expected["ce"].items() if v is not None}
            if "data" in expected["ce"]:
                expected["ce"]["data"] = json.loads(expected["ce"]["data"])
        assert _comparable(row) == expected, line
        outcomes.append(row["outcome"])
    assert outcomes.count("event") == 8
    assert outcomes.count("invalid-record") == 2
    assert outcomes.count("unmatched") == 1
    assert len(outcomes) == 11


def test_a_batch_of_settled_rows_is_all_nulls(definitions: list[MessageDefinition]) -> None:
    schema = outcome_type(compile_catalog(definitions))
    result = to_arrow_type(type(schema)([f for f in schema.fields if f.name != "record"]))
    stage = python_stage(definitions, "test-python-stage-nulls", ambiguity="first",
                         validate_schema=False, explain=True, result=result)
    assert stage(pa.array([None, None], type=pa.string())).to_pylist() == [None, None]


def test_a_worker_settles_its_heap_once_when_it_builds_the_converter(
        definitions: list[MessageDefinition], settled: list[str]) -> None:
    """A batch's records survive the collector's young scans (all are alive until the
    batch returns), so a worker takes the daemon's settings once the catalog is built:
    the catalog out of the scans, the young generation wider. Not per batch: each
    settling is a full collection."""
    schema = outcome_type(compile_catalog(definitions))
    result = to_arrow_type(type(schema)([f for f in schema.fields if f.name != "record"]))
    stage = python_stage(definitions, "test-python-stage-heap", ambiguity="first",
                         validate_schema=False, explain=True, result=result)
    assert stage(pa.array([None], type=pa.string())).to_pylist() == [None]
    assert settled == []  # nothing to convert: no converter, nothing to settle
    batch = pa.array([_payment("authorized", 1, {"amount": 1})], type=pa.string())
    for _ in range(3):
        assert stage(batch).to_pylist()[0]["outcome"] == "event"
    assert settled == ["settle_heap"]
