"""The public entry points of `gateway.definitions`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import gateway.definitions as definitions
from gateway.definitions import load_catalog, load_catalog_strict, read_document
from gateway.spec.problems import DefinitionsError


def test_public_names() -> None:
    assert definitions.__all__ == ["load_catalog", "load_catalog_strict", "read_document"]


def test_read_document_defaults_to_memory_file() -> None:
    catalog = read_document({"messagegroups": {"g": {"messages": {"m": {"envelope": 5}}}}})
    (error,) = catalog.errors
    assert error.file == "<memory>"
    assert error.path == "$.messagegroups.g.messages.m.envelope"
    assert catalog.sources == ["<memory>"]


def test_order_is_global_declaration_order(tmp_path: Path) -> None:
    first = tmp_path / "1.json"
    second = tmp_path / "2.json"
    first.write_text(json.dumps({"messagegroups": {"a": {"messages": {"x": {}, "y": {}}}}}))
    second.write_text(json.dumps({
        "endpoints": {"e": {"messages": {"z": {}}}},
        "messagegroups": {"b": {"messages": {"w": {}}}},
    }))
    catalog = load_catalog([first, second])
    assert {m.message_id: m.order for m in catalog.messages()} == {"x": 0, "y": 1, "z": 2, "w": 3}


def test_problems_of_a_base_are_reported_once_not_per_overlay() -> None:
    messages = {"base": {"envelope": "CloudEvents/1.0", "envelopemetadata": {"time": "never"}}}
    messages |= {f"o{i}": {"basemessage": "/messagegroups/g/messages/base"} for i in range(3)}
    catalog = read_document({"messagegroups": {"g": {"messages": messages}}})
    assert len(catalog.errors) == 1


def test_strict_returns_the_catalog_when_only_warnings(tmp_path: Path) -> None:
    path = tmp_path / "w.json"
    path.write_text(json.dumps({"messagegroups": {"g": {"messages": {
        "m": {"protocol": "MQTT/5.0", "protocoloptions": {"topicname": "t"}}}}}}))
    catalog = load_catalog_strict([path])
    assert catalog.warnings and not catalog.errors
    path.write_text(json.dumps({"messagegroups": {"g": {"messages": {
        "m": {"protocol": "MQTT/5.0", "protocoloptions": {"qos": 7}}}}}}))
    with pytest.raises(DefinitionsError, match=r"outside 0\.\.2"):
        load_catalog_strict(str(path))
