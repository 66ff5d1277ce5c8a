"""`read_document` never raises: any JSON-like input yields a catalog plus problems."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.definitions import read_document
from gateway.definitions.model import Catalog

_SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
ANY_JSON = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner,
                                                                 max_size=4),
    max_leaves=30,
)

# Catalog-shaped documents: the reader's own vocabulary in random places, so the fuzzing
# reaches deep code paths (references, merging, options per protocol, endpoints).
_KEYS = [
    "messagegroups", "definitionGroups", "endpoints", "messages", "definitions", "versions",
    "meta", "xref", "uri", "basemessage", "basemessageuri", "basemessageurl", "envelope",
    "format", "envelopemetadata", "metadata", "attributes", "envelopeoptions", "protocol",
    "binding", "message", "protocoloptions", "protocolmetadata", "options", "properties",
    "topic", "topic_name", "qos", "retain", "user_properties", "user-properties", "headers",
    "query", "key", "key_base64", "header", "application_properties", "subject", "reply",
    "type", "value", "required", "name", "usage", "config", "deployed", "url",
    "defaultversionid", "dataschema", "dataschemauri", "time", "source", "id", "specversion",
    "g", "m", "1",
]
_VALUES = st.sampled_from([
    "MQTT", "MQTT/3.1.1", "AMQP/1.0", "KAFKA", "NATS", "HTTP", "None", "CloudEvents/1.0",
    "/messagegroups/g/messages/m", "#/messagegroups/g/messages/m", "/messagegroups/g",
    "/messagegroups/g/messages/m/versions/1", "https://x.example/messagegroups/g",
    "a/{b}", "{+x}", "{", "0000-01-01T00:00:00Z", "consumer", "1", "",
]) | _SCALARS
CATALOG_JSON = st.recursive(
    _VALUES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(_KEYS), inner,
                                                                 max_size=5),
    max_leaves=40,
)


def _check(catalog: Catalog, file: str) -> None:
    assert isinstance(catalog, Catalog)
    for problem in catalog.problems:
        assert problem.severity in ("error", "warning")
        assert problem.path.startswith("$")
        assert problem.message
    for message in catalog.messages():
        assert message.xid.startswith(("/messagegroups/", "/endpoints/"))
        assert message.provenance.file == file


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ANY_JSON)
def test_read_document_never_raises_on_arbitrary_json(doc: Any) -> None:
    _check(read_document(doc, file="fuzz.json"), "fuzz.json")


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(["messagegroups", "definitionGroups", "endpoints"]),
                       st.dictionaries(st.sampled_from(["g", "h", "e"]), CATALOG_JSON,
                                       max_size=3), max_size=3))
def test_read_document_never_raises_on_catalog_shaped_input(doc: Any) -> None:
    before = copy.deepcopy(doc)
    _check(read_document(doc, file="fuzz.json"), "fuzz.json")
    assert doc == before  # the caller's document is never edited


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(["m", "n", "o"]),
                       st.dictionaries(st.sampled_from(_KEYS), CATALOG_JSON, max_size=6),
                       max_size=3))
def test_read_document_never_raises_on_message_shaped_input(messages: Any) -> None:
    _check(read_document({"messagegroups": {"g": {"messages": messages}}}, file="f"), "f")


def test_non_json_python_values_are_coerced() -> None:
    catalog = read_document({"messagegroups": {"g": {"messages": {"m": {
        "envelope": "CloudEvents/1.0", "envelopemetadata": {"type": {"value": ("a", "b")}},
        1: {2, 3}, "x": object()}}}}})
    m = catalog.message("/messagegroups/g/messages/m")
    assert m is not None
    assert m.envelope_metadata["type"].value == ["a", "b"]


def test_deep_chains_are_cut_off_not_crashing() -> None:
    messages = {f"m{i}": {"basemessage": f"/messagegroups/g/messages/m{i + 1}"}
                for i in range(200)}
    messages["m200"] = {"envelope": "CloudEvents/1.0"}
    catalog = read_document({"messagegroups": {"g": {"messages": messages}}})
    assert any("deeper than" in p.message for p in catalog.errors)
