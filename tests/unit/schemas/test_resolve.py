"""Schema references -> schema documents, in every spelling the loader accepts."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from gateway.definitions import load_catalog, read_document
from gateway.definitions.schema_refs import split_type
from gateway.schemas.fetch import SchemaFetcher

ORDERS = Path(__file__).resolve().parents[2] / "data" / "schemas" / "orders.xreg.json"


def _schemas() -> dict[str, object]:
    catalog = load_catalog(ORDERS)
    assert catalog.errors == []
    return {m.message_id: m.schema for m in catalog.messages()}


def test_resource_reference_takes_the_default_version() -> None:
    found = _schemas()["placed"]
    assert found is not None and found.document is not None  # type: ignore[attr-defined]
    doc = found.document  # type: ignore[attr-defined]
    assert doc.location == "/schemagroups/orders/schemas/order"
    assert doc.content["required"] == ["amount", "sku"]  # version 2, meta.defaultversionid


def test_version_reference_in_the_2023_spelling() -> None:
    doc = _schemas()["placed-v1"].document  # type: ignore[attr-defined]
    assert doc.location == "/schemagroups/orders/schemas/order/versions/1"
    assert doc.content["required"] == ["amount"]


def test_xid_with_a_type_selector_and_avro_text() -> None:
    doc = _schemas()["refund"].document  # type: ignore[attr-defined]
    assert doc.type_name == "com.example.Refund"
    assert doc.content["name"] == "Refund"  # the JSON string was parsed
    assert doc.format == "Avro/1.11"  # the schema resource's format


def test_relative_file_reference_next_to_the_document() -> None:
    doc = _schemas()["note"].document  # type: ignore[attr-defined]
    assert doc.location == str(ORDERS.parent / "note.schema.json")
    assert doc.content["required"] == ["text"]


def test_missing_schema_and_missing_file_say_why() -> None:
    catalog = read_document({
        "messagegroups": {"g": {"messages": {
            "a": {"dataschemaformat": "JsonSchema/draft-07",
                  "dataschemauri": "#/schemagroups/g/schemas/nope"},
            "b": {"dataschemaformat": "JsonSchema/draft-07", "dataschemauri": "nope.json"}}}},
        "schemagroups": {"g": {"schemas": {"yes": {"versions": {"1": {
            "format": "JsonSchema/draft-07", "schema": {}}}}}}},
    }, "/tmp/x.xreg.json")
    by_id = {m.message_id: m.schema for m in catalog.messages()}
    assert by_id["a"] is not None and by_id["a"].error is not None
    assert "not in the loaded documents" in by_id["a"].error
    assert "/schemagroups/g/schemas/yes" in by_id["a"].fix
    assert by_id["b"] is not None and "cannot be read" in (by_id["b"].error or "")


def test_a_file_reference_with_a_nul_byte_is_a_problem_not_a_crash() -> None:
    # Found by the definitions fuzz test: `Path.read_bytes` raises ValueError, not OSError.
    catalog = read_document({"messagegroups": {"g": {"messages": {
        "a": {"dataschemaformat": "JsonSchema/draft-07", "dataschemauri": "\x00"}}}}},
        "/tmp/x.xreg.json")
    schema = next(iter(catalog.messages())).schema
    assert schema is not None and "cannot be read" in (schema.error or "")


def test_schemabase64_and_schemaurl_inside_the_registry() -> None:
    encoded = base64.b64encode(json.dumps({"type": "string"}).encode()).decode()
    catalog = read_document({
        "messagegroups": {"g": {"messages": {
            "a": {"dataschemauri": "/schemagroups/g/schemas/alias"}}}},
        "schemagroups": {"g": {"schemas": {
            "alias": {"versions": {"1": {"format": "JsonSchema/draft-07",
                                         "schemaurl": "#/schemagroups/g/schemas/b64"}}},
            "b64": {"versions": {"1": {"format": "JsonSchema/draft-07",
                                       "schemabase64": encoded}}}}}},
    })
    (message,) = catalog.messages()
    assert message.schema is not None and message.schema.document is not None
    assert message.schema.document.content == json.dumps({"type": "string"}).encode()
    assert message.dataschemaformat == "JsonSchema/draft-07"


@pytest.mark.parametrize(("ref", "expected"), [
    ("#/schemagroups/g/schemas/s", ("#/schemagroups/g/schemas/s", None)),
    ("/schemagroups/g/schemas/s/versions/v1.0:messages/STATEDeath",
     ("/schemagroups/g/schemas/s/versions/v1.0", "messages/STATEDeath")),
    ("order.avsc#com.example.Order", ("order.avsc", "com.example.Order")),
    ("https://r.example/schemagroups/g/schemas/s#Order",
     ("https://r.example/schemagroups/g/schemas/s", "Order")),
    ("https://r.example/doc#/schemagroups/g", ("https://r.example/doc#/schemagroups/g", None)),
])
def test_type_selectors(ref: str, expected: tuple[str, str | None]) -> None:
    assert split_type(ref) == expected


class _Registry(BaseHTTPRequestHandler):
    body = b'{"type": "object", "required": ["id"]}'
    up = True
    hits = 0

    def do_GET(self) -> None:
        type(self).hits += 1
        if not type(self).up:
            self.send_error(503)
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(type(self).body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def registry() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), _Registry)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Registry.up, _Registry.hits = True, 0
    yield f"http://127.0.0.1:{server.server_port}/schemagroups/g/schemas/s"
    server.shutdown()


def test_url_schemas_are_fetched_once_per_load_and_kept_when_unreachable(registry: str
                                                                         ) -> None:
    catalog = read_document({"messagegroups": {"g": {"messages": {"a": {
        "dataschemaformat": "JsonSchema/draft-07", "dataschemauri": registry}}}}})
    (message,) = catalog.messages()
    assert message.schema is not None and message.schema.remote == registry
    assert _Registry.hits == 0  # loading the catalog does not touch the network
    fetcher = SchemaFetcher(timeout=2)
    first = fetcher.materialize(message.schema)
    fetcher.materialize(message.schema)
    assert _Registry.hits == 1  # once per load
    assert first.document is not None and first.document.content == json.loads(_Registry.body)
    _Registry.up = False
    fetcher.next_generation()  # the registry poll's reload
    kept = fetcher.materialize(message.schema)
    assert _Registry.hits == 2
    assert kept.document is not None and kept.document.content == first.document.content
    fresh = SchemaFetcher(timeout=2).materialize(message.schema)  # no working copy
    assert fresh.document is None and "cannot be fetched" in (fresh.error or "")


def test_the_registry_poll_sees_a_changed_schema(registry: str) -> None:
    fetcher = SchemaFetcher(timeout=2)
    fetcher.fetch(registry)
    assert not fetcher.changed([registry])
    before = _Registry.body
    try:
        _Registry.body = b'{"type": "object"}'
        assert fetcher.changed([registry])
        _Registry.up = False
        assert not fetcher.changed([registry])  # unreachable: keep what works
    finally:
        _Registry.body = before
