"""MUST/REQUIRED rules of message definitions rc2 that `xrgw validate` used to pass, and the
2023 format's protocol definitions that it used to misread."""

from __future__ import annotations

from typing import Any

from gateway.definitions import read_document
from gateway.protocols import KAFKA

META = {"type": {"value": "t"}, "source": {"value": "/s"}}


def _errors(message: dict[str, Any], group: dict[str, Any] | None = None) -> list[str]:
    doc = {"messagegroups": {"g": {**(group or {}), "messages": {"m": message}}}}
    return [f"{p.path}: {p.message}" for p in read_document(doc, "doc.json").errors]


def test_protocol_without_protocoloptions_is_an_error():
    found = _errors({"protocol": "MQTT/5.0"})
    assert found == ["$.messagegroups.g.messages.m.protocol: a message with protocol "
                     "'MQTT/5.0' must declare protocoloptions"]
    assert _errors({"protocol": "MQTT/5.0", "protocoloptions": {"topic_name": "a"}}) == []


def test_envelope_without_envelopemetadata_is_an_error():
    found = _errors({"envelope": "CloudEvents/1.0"})
    assert found == ["$.messagegroups.g.messages.m.envelope: a message with an envelope "
                     "must declare envelopemetadata"]
    assert _errors({"envelope": "CloudEvents/1.0", "envelopemetadata": META}) == []


def test_inherited_protocol_or_envelope_without_their_metadata_is_a_warning():
    doc = {"messagegroups": {"g": {"envelope": "CloudEvents/1.0", "protocol": "KAFKA",
                                   "messages": {"m": {}}}}}
    catalog = read_document(doc, "doc.json")
    assert catalog.errors == []
    texts = [p.message for p in catalog.warnings]
    assert "a message with an envelope must declare envelopemetadata" in texts
    assert "a message with protocol 'KAFKA' must declare protocoloptions" in texts


def test_schema_reference_without_format_is_an_error():
    for key, value in (("dataschemauri", "https://example.com/s.json"),
                       ("dataschema", {"type": "object"})):
        found = _errors({"envelope": "CloudEvents/1.0", "envelopemetadata": META, key: value})
        assert found == [f"$.messagegroups.g.messages.m.{key}: a schema reference needs "
                         "'dataschemaformat' (how to read the schema)"], key
        assert _errors({"envelope": "CloudEvents/1.0", "envelopemetadata": META, key: value,
                        "dataschemaformat": "JsonSchema/draft-07"}) == []


def test_schema_format_is_taken_from_the_referenced_schema_of_the_same_document():
    doc = {"messagegroups": {"g": {"messages": {"m": {
        "envelope": "CloudEvents/1.0", "envelopemetadata": META,
        "dataschemauri": "#/schemagroups/sg/schemas/s"}}}},
        "schemagroups": {"sg": {"schemas": {"s": {
            "format": "JsonSchema/draft-07",
            "versions": {"1": {"format": "JsonSchema/draft-07", "schema": {}}}}}}}}
    catalog = read_document(doc, "doc.json")
    assert catalog.errors == []
    message = catalog.message("/messagegroups/g/messages/m")
    assert message is not None and message.dataschemaformat == "JsonSchema/draft-07"


def test_message_protocol_differing_from_its_group_is_an_error():
    found = _errors({"protocol": "KAFKA", "protocoloptions": {"topic": "t"}},
                    group={"protocol": "MQTT/5.0"})
    assert found == ["$.messagegroups.g.messages.m.protocol: message protocol 'KAFKA' "
                     "differs from its group's 'MQTT/5.0'"]


def test_http_header_name_must_be_a_token():
    found = _errors({"protocol": "HTTP", "protocoloptions": {
        "path": "/x", "headers": [{"name": "Content Type", "value": "text/plain"}]}})
    assert any("'Content Type' is not an HTTP header name" in f for f in found), found
    assert _errors({"protocol": "HTTP", "protocoloptions": {
        "path": "/x", "headers": [{"name": "Content-Type", "value": "text/plain"}]}}) == []


def test_2023_protocol_definition_reads_format_as_protocol_and_metadata_as_options():
    doc = {"definitionGroups": {"g": {"format": "Kafka/0.11", "definitions": {
        "k": {"format": "Kafka/0.11", "metadata": {"topic": {"value": "mytopic"}}}}}}}
    catalog = read_document(doc, "old.cereg")
    assert catalog.errors == []
    message = catalog.message("/messagegroups/g/messages/k")
    assert message is not None
    assert message.protocol == KAFKA and message.envelope is None
    assert [(c.field, c.prop.value) for c in message.protocol_options] == [("topic", "mytopic")]
    assert message.envelope_metadata == {}
    assert catalog.groups["g"].protocol == KAFKA and catalog.groups["g"].envelope is None


def test_2023_cloudevents_format_is_still_an_envelope():
    doc = {"definitionGroups": {"g": {"format": "CloudEvents/1.0", "definitions": {
        "c": {"format": "CloudEvents/1.0", "metadata": {"type": {"value": "t"},
                                                        "source": {"value": "/s"}}}}}}}
    catalog = read_document(doc, "old.cereg")
    message = catalog.message("/messagegroups/g/messages/c")
    assert message is not None and message.envelope == "CloudEvents/1.0"
    assert message.envelope_metadata["type"].value == "t"
