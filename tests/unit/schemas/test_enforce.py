"""The route's `schema` policy in the conversion, and what `validate` refuses under it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway.config import load_config
from gateway.convert import Converter
from gateway.deadletter import reasons
from gateway.definitions import load_catalog, read_document
from gateway.policies.schema import SchemaPolicy
from gateway.record import NativeMessage

DATA = Path(__file__).resolve().parents[2] / "data" / "schemas"
CATALOG = load_catalog(DATA / "orders.xreg.json")


def _placed(body: object, kind: str = "placed") -> NativeMessage:
    return NativeMessage("NATS", {"subject": f"orders.__SFX__.{kind}.s1"},
                         data=body)  # type: ignore[arg-type]


@pytest.mark.parametrize("policy", ["off", "tiebreak"])
def test_only_enforce_dead_letters(policy: SchemaPolicy) -> None:
    converter = Converter(CATALOG.messages(), schema=policy)
    assert converter.convert(_placed({"amount": -3, "sku": "x"})).ok


def test_enforce_dead_letters_with_the_error_path() -> None:
    converter = Converter(CATALOG.messages(), schema="enforce")
    bad = converter.convert(_placed({"amount": -3, "sku": "x"}))
    assert bad.reason == reasons.INVALID_DATA
    assert bad.detail == "$.amount: -3 is less than the minimum of 0"
    assert bad.match.definition is not None
    assert bad.match.definition.message_id == "placed"
    (batched,) = converter.convert_batch([_placed({"amount": -3, "sku": "x"})])
    assert [(c.reason, c.detail) for c in batched] == [(bad.reason, bad.detail)]
    assert converter.convert(_placed({"amount": 3, "sku": "x"})).ok
    # version 1 of the same schema has no minimum and no sku
    assert converter.convert(_placed({"amount": -3}, "v1")).ok
    # Avro and a relative JSON Schema 2020-12 file
    assert converter.convert(_placed({"order": "o", "cents": 5}, "refund")).ok
    assert converter.convert(_placed({"order": "o"}, "refund")).reason == reasons.INVALID_DATA
    assert converter.convert(_placed({"text": "x" * 21}, "note")).detail.startswith("$.text:")
    # a format that cannot be enforced passes unchecked
    assert converter.convert(_placed(["anything"], "shape")).ok


def test_enforce_checks_an_incoming_cloudevents_data() -> None:
    converter = Converter(CATALOG.messages(), schema="enforce")
    record = NativeMessage("NATS", {
        "subject": "orders.__SFX__.placed.s1",
        "headers": [{"name": k, "value": v} for k, v in (
            ("ce-specversion", "1.0"), ("ce-id", "1"), ("ce-type", "com.example.order.placed"),
            ("ce-source", "/stores/s1"), ("Content-Type", "application/json"))]},
        payload=json.dumps({"amount": -1, "sku": "x"}).encode())
    out = converter.convert(record)
    assert out.source_event is not None, out.reason
    assert out.reason == reasons.INVALID_DATA, out.detail
    assert out.detail == "$.amount: -1 is less than the minimum of 0"


def _tied(schema_a: dict[str, object], schema_b: dict[str, object]) -> list[object]:
    group = {"messages": {
        name: {"protocol": "NATS", "protocoloptions": {"subject": "t.{x}"},
               "envelope": "CloudEvents/1.0",
               "envelopemetadata": {"type": {"value": f"com.example.{name}"},
                                    "source": {"value": "/t"}},
               "dataschemaformat": "Avro/1.11",
               "dataschemauri": f"#/schemagroups/g/schemas/{name}"}
        for name in ("a", "b")}}
    catalog = read_document({
        "messagegroups": {"g": group},
        "schemagroups": {"g": {"schemas": {
            "a": {"versions": {"1": {"schema": schema_a}}},
            "b": {"versions": {"1": {"schema": schema_b}}}}}}})
    return list(catalog.messages())


def test_tiebreak_uses_referenced_schemas_of_any_format() -> None:
    defs = _tied({"type": "record", "name": "A", "fields": [{"name": "a", "type": "int"}]},
                 {"type": "record", "name": "B", "fields": [{"name": "b", "type": "int"}]})
    body = NativeMessage("NATS", {"subject": "t.1"}, data={"b": 1})
    picked = Converter(defs, schema="tiebreak").convert(body).match.definition  # type: ignore[arg-type]
    assert picked is not None and picked.message_id == "b"
    first = Converter(defs, schema="off").convert(body).match.definition  # type: ignore[arg-type]
    assert first is not None and first.message_id == "a"  # declaration order


def _config(tmp_path: Path, catalog: dict[str, object], schema: str) -> Path:
    (tmp_path / "defs.xreg.json").write_text(json.dumps(catalog, indent=1))
    config = {"definitions": ["defs.xreg.json"], "deadletter": "log",
              "routes": [{"from": "in", "to": ["out"], "schema": schema}],
              "endpoints": {"in": {"uri": "nats://127.0.0.1:4222"},
                            "out": {"uri": "nats://127.0.0.1:4222"}}}
    path = tmp_path / "gateway.yaml"
    path.write_text(json.dumps(config))
    return path


def _unresolved_catalog() -> dict[str, object]:
    return {
        "endpoints": {
            "in": {"usage": ["consumer"], "protocol": "NATS",
                   "protocoloptions": {"subject": "a.>"}, "messagegroups": ["#/messagegroups/g"]},
            "out": {"usage": ["producer"], "protocol": "NATS",
                    "protocoloptions": {"subject": "b"}}},
        "messagegroups": {"g": {"envelope": "CloudEvents/1.0", "messages": {"m": {
            "protocol": "NATS", "protocoloptions": {"subject": "a.m"},
            "envelopemetadata": {"type": {"value": "t"}, "source": {"value": "/s"}},
            "dataschemaformat": "JsonSchema/draft-07",
            "dataschemauri": "#/schemagroups/g/schemas/missing"}}}},
    }


def test_validate_refuses_an_unresolved_reference_under_enforce(tmp_path: Path) -> None:
    config, problems = load_config(_config(tmp_path, _unresolved_catalog(), "enforce"),
                                   check_environment=False)
    assert config is None
    (error,) = [p for p in problems if p.is_error]
    assert error.file.endswith("defs.xreg.json")
    assert error.path == "$.messagegroups.g.messages.m.dataschemauri"
    assert "not in the loaded documents" in error.message
    assert "schema: enforce" in error.message and error.fix


def test_tiebreak_loads_the_same_definitions(tmp_path: Path) -> None:
    config, problems = load_config(_config(tmp_path, _unresolved_catalog(), "tiebreak"),
                                   check_environment=False)
    assert config is not None, [str(p) for p in problems]
    assert config.routes[0].schema == "tiebreak"


def test_unknown_formats_are_a_warning_under_enforce(tmp_path: Path) -> None:
    catalog = _unresolved_catalog()
    catalog["schemagroups"] = {"g": {"schemas": {"missing": {"versions": {"1": {
        "format": "XSD/1.1", "schema": "<xs:schema/>"}}}}}}
    msg = catalog["messagegroups"]["g"]["messages"]["m"]  # type: ignore[index]
    msg["dataschemaformat"] = "XSD/1.1"
    config, problems = load_config(_config(tmp_path, catalog, "enforce"),
                                   check_environment=False)
    assert config is not None, [str(p) for p in problems]
    assert any("XSD/1.1 cannot be enforced" in p.message for p in problems
               if not p.is_error)


def test_match_cli_takes_the_schema_policy() -> None:
    import subprocess
    import sys

    line = json.dumps({"protocol": "NATS", "subject": "orders.__SFX__.placed.s1",
                       "data": {"amount": -3, "sku": "a"}})
    out = {}
    for policy in ("tiebreak", "enforce"):
        done = subprocess.run(
            [sys.executable, "-m", "gateway.cli", "match", "-d", str(DATA / "orders.xreg.json"),
             "--schema", policy], input=line, capture_output=True, text=True, check=False,
            cwd=Path(__file__).resolve().parents[3])
        out[policy] = json.loads(done.stdout.splitlines()[0])
    assert "cloudevent" in out["tiebreak"]
    assert out["enforce"]["reason"] == "invalid-data"
    assert out["enforce"]["detail"] == "$.amount: -3 is less than the minimum of 0"
