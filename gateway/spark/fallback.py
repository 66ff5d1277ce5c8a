"""The Python stage: the core converter over Arrow batches (a vectorized UDF).

It is an Arrow UDF over the record column that sees only the records the compiled path
routed away (records SQL cannot judge exactly, CloudEvents, ties that need the policy or
JSON Schema, render failures, and every dead letter, whose explanation ranks definitions
with `difflib`); the other rows reach it as nulls. It runs
`gateway.convert.Converter` unchanged, so its outcomes are `xrgw match`'s by construction.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]  # no stubs

from gateway.cloudevents.jsonformat import event_to_json
from gateway.convert import Conversion, Converter
from gateway.definitions.model import MessageDefinition
from gateway.heap import settle_heap
from gateway.json.body import loads_text
from gateway.json.text import compact_text
from gateway.json.values import JSON, as_text
from gateway.record import NativeMessage, RecordError

_CONVERTERS: dict[str, Converter] = {}  # per Python worker: build the matcher once


def invalid_row(line: str, exc: RecordError) -> dict[str, Any]:
    """The outcome row of a line that is not a native message record."""
    document: dict[str, JSON] = {"match": None, "reason": "invalid-record",
                                 "detail": str(exc)}
    try:
        document["record"] = loads_text(line)
    except ValueError:
        document["record"] = line
    return {"record": line, "outcome": "invalid-record", "match": None, "context": None,
            "ce": None, "event": None, "deadletter": compact_text(document), "nearest": None,
            "path": "python"}


def outcome_row(line: str, record: NativeMessage, conversion: Conversion,
                fitters: Mapping[str, Callable[[Any], Any]] | None,
                context: bool = True) -> dict[str, Any]:
    """The outcome row of `record` (read from `line`) converted as `conversion`, with
    the `ce` columns only where `fitters` (per column, how a value goes in) says there
    are some, and the context's entries only where `context` says the stage makes that
    column. An event's JSON form is made once, for the `ce` columns and the event's
    text; the conversion's whole JSON form (the event again, the context as an object)
    only for a dead letter, which carries it."""
    definition = conversion.match.definition
    match = definition.xid if definition is not None else None
    row: dict[str, Any] = {
        "record": line,
        "match": match,
        "context": list(conversion.match.context.items()) if context else None,
        "path": "python",
        "ce": None, "event": None, "deadletter": None, "nearest": None,
    }
    if conversion.event is not None:
        event = event_to_json(conversion.event)
        row["outcome"] = "event"
        if fitters is not None:
            row["ce"] = {k: fit(compact_text(v) if k == "data" else v) for k, v in event.items()
                         if (fit := fitters.get(k)) is not None}
        row["event"] = compact_text(event)
        row["nearest"] = match
        return row
    result = conversion.to_json()
    result["record"] = record.to_json()
    row["outcome"] = conversion.reason
    row["deadletter"] = compact_text(result)
    nearest = match
    if nearest is None and conversion.explain:
        nearest = conversion.explain[0].definition
    if nearest is None and conversion.match.tied:
        nearest = conversion.match.tied[0].xid
    row["nearest"] = nearest
    return row


def typed_value(column: pa.DataType, text: str) -> Any:
    """A CloudEvent attribute's text as the value of a typed extension column."""
    if pa.types.is_boolean(column):
        return {"true": True, "false": False}.get(text)
    if pa.types.is_integer(column):
        try:
            return int(text)
        except ValueError:
            return None
    return text


def python_stage(
    definitions: Sequence[MessageDefinition], token: str, *, ambiguity: str,
    validate_schema: bool, explain: bool, result: pa.StructType, schema: str | None = None,
) -> Callable[[pa.Array], pa.Array]:
    """The vectorized UDF body: records in (null where the compiled path settled the
    row), outcome structs out (null for those rows). A batch without work costs one
    null check, so the compiled path never waits on Python for its own rows.

    The records of an Arrow batch are converted together (`Converter.convert_batch`:
    one dispatch loop, one clock reading for those without a receive time, as the
    daemon converts what it read together), and each `ce` column's kind is looked up
    once per stage, not per value."""
    names = [f.name for f in result]
    # The `ce` struct's columns, when the stage makes it (a job whose sinks read only the
    # event's text does not).
    fitters = ({f.name: _fitter(f.type) for f in result.field("ce").type}
               if "ce" in names else None)
    context = "context" in names

    def stage(records: pa.Array) -> pa.Array:
        if records.null_count == len(records):
            return pa.nulls(len(records), result)
        converter = _CONVERTERS.get(token)
        if converter is None:
            converter = Converter(definitions, ambiguity=ambiguity,  # type: ignore[arg-type]
                                  validate_schema=validate_schema,
                                  schema=schema)  # type: ignore[arg-type]
            _CONVERTERS[token] = converter
            # A batch's records, conversions and rows (thousands, all alive until the
            # batch is returned) survive the collector's young scans, and each full scan
            # walks them and the compiled catalog: 35 us per record against 25 with the
            # daemon's setting (`gateway/heap.py`; 20,000 records of `bench_spark.py`,
            # 1,000 definitions, in one process). Set it once per Python worker.
            settle_heap()
        lines: list[str | None] = records.to_pylist()
        rows: list[dict[str, Any] | None] = [None] * len(lines)
        where: list[int] = []
        parsed: list[NativeMessage] = []
        for index, line in enumerate(lines):
            if line is None:
                continue
            try:
                parsed.append(NativeMessage.from_line(line))
            except RecordError as exc:
                rows[index] = invalid_row(line, exc)
                continue
            where.append(index)
        converted = converter.convert_batch(parsed, explain=explain, split=False)
        for index, record, (conversion,) in zip(where, parsed, converted, strict=True):
            line = lines[index]
            assert line is not None
            rows[index] = outcome_row(line, record, conversion, fitters, context)
        # pyarrow reads a struct's fields from each dict by name: the columns the stage
        # does not make are keys it never reads.
        return pa.array(rows, type=result)

    return stage


def _fitter(column: pa.DataType) -> Callable[[Any], Any]:
    """How a CloudEvent attribute's value goes into its `ce` column of type `column`."""
    if pa.types.is_string(column):
        # a typed value in the canonical string form (`5` -> "5")
        return lambda value: value if isinstance(value, str) else as_text(value)

    def typed(value: Any) -> Any:
        if isinstance(value, str):
            # a CloudEvent's text, in a column every definition types: the declared type
            # (checked by the matcher) converts it exactly
            return typed_value(column, value)
        return value

    return typed
