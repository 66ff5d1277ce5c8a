"""The Python stage: the core converter over Arrow batches (a vectorized UDF).

It is an Arrow UDF over the record column that sees only the records the compiled path
routed away (records SQL cannot judge exactly, CloudEvents, ties that need the policy or
JSON Schema, render failures, and every dead letter, whose explanation ranks definitions
with `difflib`); the other rows reach it as nulls. It runs
`gateway.convert.Converter` unchanged, so its outcomes are `xrgw match`'s by construction.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]  # no stubs

from gateway.cloudevents.jsonformat import event_to_json
from gateway.convert import Converter
from gateway.definitions.model import MessageDefinition
from gateway.json.text import utf8_json
from gateway.json.values import JSON, as_text
from gateway.record import NativeMessage, RecordError

_CONVERTERS: dict[str, Converter] = {}  # per Python worker: build the matcher once


def _dumps(value: Any) -> str:
    return utf8_json(value, separators=(",", ":"))


def convert_line(converter: Converter, line: str, explain: bool) -> dict[str, Any]:
    """One outcome row (as a dict of the outcome schema) for one record line."""
    try:
        record = NativeMessage.from_line(line)
    except RecordError as exc:
        document: dict[str, JSON] = {"match": None, "reason": "invalid-record",
                                     "detail": str(exc)}
        try:
            document["record"] = json.loads(line)
        except ValueError:
            document["record"] = line
        return {"record": line, "outcome": "invalid-record", "match": None, "context": None,
                "ce": None, "event": None, "deadletter": _dumps(document), "nearest": None,
                "path": "python"}
    conversion = converter.convert(record, explain=explain)
    result = conversion.to_json()
    definition = conversion.match.definition
    row: dict[str, Any] = {
        "record": line,
        "match": definition.xid if definition is not None else None,
        "context": list(conversion.match.context.items()),
        "path": "python",
        "ce": None, "event": None, "deadletter": None, "nearest": None,
    }
    if conversion.event is not None:
        event = event_to_json(conversion.event)
        row["outcome"] = "event"
        row["ce"] = {k: _dumps(v) if k == "data" else v for k, v in event.items()}
        row["event"] = _dumps(event)
        row["nearest"] = row["match"]
        return row
    result["record"] = record.to_json()
    row["outcome"] = conversion.reason
    row["deadletter"] = _dumps(result)
    nearest = row["match"]
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
    null check, so the compiled path never waits on Python for its own rows."""
    ce_fields = {f.name: f.type for f in result.field("ce").type}
    names = [f.name for f in result]

    def fit(name: str, value: Any) -> Any:
        column = ce_fields[name]
        if pa.types.is_string(column):
            # a typed value in the canonical string form (`5` -> "5")
            return value if isinstance(value, str) else as_text(value)
        if isinstance(value, str):
            # a CloudEvent's text, in a column every definition types: the declared type
            # (checked by the matcher) converts it exactly
            return typed_value(column, value)
        return value

    def stage(records: pa.Array) -> pa.Array:
        if records.null_count == len(records):
            return pa.nulls(len(records), result)
        converter = _CONVERTERS.get(token)
        if converter is None:
            converter = Converter(definitions, ambiguity=ambiguity,  # type: ignore[arg-type]
                                  validate_schema=validate_schema,
                                  schema=schema)  # type: ignore[arg-type]
            _CONVERTERS[token] = converter
        rows: list[dict[str, Any] | None] = []
        for line in records.to_pylist():
            if line is None:
                rows.append(None)
                continue
            row = convert_line(converter, line, explain)
            if row["ce"] is not None:
                row["ce"] = {k: fit(k, v) for k, v in row["ce"].items() if k in ce_fields}
            rows.append({name: row[name] for name in names})
        return pa.array(rows, type=result)

    return stage
