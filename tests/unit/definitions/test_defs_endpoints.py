"""Endpoint spellings and endpoint rules."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.definitions import read_document
from gateway.definitions.model import Catalog, Endpoint
from gateway.protocols import AMQP, KAFKA, MQTT311

GROUPS = {"messagegroups": {"g": {"messages": {"m": {
    "envelope": "CloudEvents/1.0",
    "envelopemetadata": {"type": {"value": "t"}, "source": {"value": "/s"}}}}}}}
E = "$.endpoints.e"


def _read(endpoint: dict[str, Any]) -> Catalog:
    return read_document({"endpoints": {"e": endpoint}, **GROUPS}, file="ep.json")


def _endpoint(endpoint: dict[str, Any]) -> Endpoint:
    catalog = _read(endpoint)
    assert catalog.errors == [], [str(p) for p in catalog.errors]
    return catalog.endpoints["e"]


@pytest.mark.parametrize(("usage", "read"), [
    ("consumer", ("consumer",)), (["producer"], ("producer",)),
    (["subscriber", "consumer"], ("subscriber", "consumer")), ("Producer", ("producer",)),
])
def test_usage_string_or_array(usage: Any, read: tuple[str, ...]) -> None:
    assert _endpoint({"usage": usage, "protocol": "MQTT/5.0"}).usage == read


def test_unknown_usage_is_a_warning_and_dropped() -> None:
    catalog = _read({"usage": ["consumer", "reader"]})
    assert catalog.endpoints["e"].usage == ("consumer",)
    (warning,) = [p for p in catalog.warnings if "usage" in p.message]
    assert warning.path == f"{E}.usage[1]"
    assert warning.message == "unknown usage 'reader' is ignored"


@pytest.mark.parametrize(("usage", "protocol", "needle"), [
    (["producer", "consumer"], "MQTT", "combines roles"),
    (["subscriber", "consumer"], "KAFKA", "not allowed for KAFKA"),
])
def test_usage_combinations(usage: list[str], protocol: str, needle: str) -> None:
    catalog = _read({"usage": usage, "protocol": protocol})
    assert [p.path for p in catalog.warnings if needle in p.message] == [f"{E}.usage"]


def test_addresses_are_objects_with_uri() -> None:
    endpoint = _endpoint({"protocol": "KAFKA", "protocoloptions": {"endpoints": [
        "SSL://k:9093", {"url": "kafka://k2:9092"},
        {"bootstrap.servers": ["a:9092"], "security.protocol": "SSL"}]}})
    assert endpoint.protocol_options["endpoints"] == [
        {"uri": "SSL://k:9093"}, {"uri": "kafka://k2:9092"},
        {"bootstrap.servers": ["a:9092"], "security.protocol": "SSL"}]


def test_legacy_config_object() -> None:
    catalog = _read({"usage": "producer", "format": "CloudEvents/1.0", "config": {
        "protocol": "MQTT/3.1.1", "strict": False, "endpoints": ["mqtt://h:1883"],
        "options": {"topic": "t/{x}", "clean-session": True, "will-topic": "w"},
        "deployed": False}})
    endpoint = catalog.endpoints["e"]
    assert endpoint.protocol == MQTT311
    assert endpoint.envelope == "CloudEvents/1.0"
    assert endpoint.deployed is False
    assert endpoint.protocol_options == {"endpoints": [{"uri": "mqtt://h:1883"}],
                                         "deployed": False, "topic": "t/{x}",
                                         "cleansession": True, "willtopic": "w"}
    assert endpoint.field_provenance["$.protocoloptions.topic"].path == (
        f"{E}.config.options.topic")
    assert catalog.errors == []


def test_top_level_deployed_and_endpoints_move_into_protocoloptions() -> None:
    catalog = _read({"protocol": "HTTP", "deployed": False,
                     "endpoints": [{"uri": "https://h/events"}]})
    endpoint = catalog.endpoints["e"]
    assert endpoint.deployed is False
    assert endpoint.protocol_options["endpoints"] == [{"uri": "https://h/events"}]
    notes = {p.message for p in catalog.warnings}
    assert "older or non-spec spelling 'deployed' read as 'protocoloptions.deployed'" in notes


def test_nested_options_are_flattened() -> None:
    endpoint = _endpoint({"protocol": "KAFKA",
                          "protocoloptions": {"deployed": False,
                                              "options": {"topic": "t", "key": "{k}"}}})
    assert endpoint.protocol_options == {"deployed": False, "topic": "t", "key": "{k}"}


@pytest.mark.parametrize(("protocol", "written", "read"), [
    ("AMQP", "linkproperties", "link-properties"), ("AMQP", "link_properties", "link-properties"),
    ("AMQP", "distribution_mode", "distribution-mode"), ("AMQP", "address", "node"),
    ("KAFKA", "consumer-group", "consumergroup"), ("MQTT/3.1.1", "clean-session", "cleansession"),
    ("MQTT", "will-message", "willmessage"), ("NATS", "queue_group", "queuegroup"),
])
def test_endpoint_option_spellings(protocol: str, written: str, read: str) -> None:
    endpoint = _endpoint({"protocol": protocol, "protocoloptions": {written: "x"}})
    assert list(endpoint.protocol_options) == [read]


def test_unknown_endpoint_option_suggests_a_name() -> None:
    catalog = _read({"protocol": "MQTT/5.0", "protocoloptions": {"topik": "t"}})
    (warning,) = catalog.warnings
    assert warning.message == "unknown MQTT/5.0 endpoint option 'topik'; did you mean 'topic'?"
    assert warning.path == f"{E}.protocoloptions.topik"


@pytest.mark.parametrize(("protocol", "options"), [
    ("NATS", {"stream": "ORDERS", "durable": "xrgw"}),
    ("KAFKA", {"topic": "t", "linger_ms": 0}),
])
def test_an_option_the_adapter_reads_is_not_called_ignored(
        protocol: str, options: dict[str, Any]) -> None:
    # Not in the spec's list, but `xrgw run` passes it to the adapter, which reads it.
    assert _read({"protocol": protocol, "protocoloptions": options}).warnings == []


def test_a_name_neither_spec_nor_adapter_knows_is_still_warned_of() -> None:
    (warning,) = _read({"protocol": "NATS", "protocoloptions": {"strem": "ORDERS"}}).warnings
    assert warning.message.startswith("unknown NATS endpoint option 'strem'")
    assert "(until then it is ignored)" in warning.fix


def test_endpoint_option_templates_are_level_1() -> None:
    catalog = _read({"protocol": "HTTP", "protocoloptions": {
        "headers": [{"name": "Authorization", "value": "Bearer {+token}"}]}})
    (error,) = catalog.errors
    assert error.path == f"{E}.protocoloptions.headers[0].value"
    assert "level 2-4" in error.message


def test_endpoint_qos_range() -> None:
    (error,) = _read({"protocol": "MQTT/5.0", "protocoloptions": {"qos": 5}}).errors
    assert error.message == "endpoint option 'qos': 5 is not 0, 1 or 2"


def test_deployed_must_be_boolean() -> None:
    catalog = _read({"protocol": "MQTT/5.0", "protocoloptions": {"deployed": "no"}})
    assert catalog.endpoints["e"].deployed is True
    assert any("'deployed' must be true or false" in p.message for p in catalog.warnings)


def test_messagegroup_references() -> None:
    catalog = _read({"protocol": "AMQP", "messagegroups": [
        "#/messagegroups/g", "/messagegroups/missing", "https://other.example/messagegroups/x",
        "/messagegroups/g/messages/m"]})
    endpoint = catalog.endpoints["e"]
    assert endpoint.protocol == AMQP
    assert endpoint.messagegroups == ("/messagegroups/g", "/messagegroups/missing",
                                      "https://other.example/messagegroups/x",
                                      "/messagegroups/g/messages/m")
    warnings = {p.path: p.message for p in catalog.warnings}
    assert warnings == {
        f"{E}.messagegroups[1]": "message group '/messagegroups/missing' is not defined in the "
                                 "loaded documents",
        f"{E}.messagegroups[3]": "'/messagegroups/g/messages/m' is not a message group reference",
    }
    assert [m.xid for m in catalog.messages_for_endpoint("e")] == ["/messagegroups/g/messages/m"]


def test_legacy_definition_groups_reference() -> None:
    doc = {"endpoints": {"e": {"protocol": "HTTP",
                               "definitionGroups": ["#/definitionGroups/g"]}},
           "definitionGroups": {"g": {"definitions": {"m": {"format": "CloudEvents/1.0"}}}}}
    catalog = read_document(doc)
    assert catalog.endpoints["e"].messagegroups == ("/messagegroups/g",)
    assert len(catalog.messages_for_endpoint("e")) == 1


def test_will_message_reference_is_an_xid() -> None:
    endpoint = _endpoint({"protocol": "MQTT/5.0", "protocoloptions": {
        "willmessage": "#/messagegroups/g/messages/m"}})
    assert endpoint.protocol_options["willmessage"] == "/messagegroups/g/messages/m"


def test_inline_messages_use_endpoint_defaults() -> None:
    endpoint = _endpoint({"protocol": "KAFKA", "envelope": "CloudEvents/1.0", "messages": {
        "x": {"protocoloptions": {"topic": "t"}, "envelopemetadata": {"type": "x"}}}})
    (m,) = endpoint.messages
    assert (m.protocol, m.envelope, m.group_id) == (KAFKA, "CloudEvents/1.0", "e")
    assert m.xid == "/endpoints/e/messages/x"


def test_malformed_endpoint_parts_are_errors() -> None:
    catalog = _read({"usage": 5, "protocoloptions": {"endpoints": "h"}, "messagegroups": "g",
                     "config": [], "protocol": 7})
    assert sorted(p.path for p in catalog.errors) == [
        f"{E}.config", f"{E}.messagegroups", f"{E}.protocol",
        f"{E}.protocoloptions.endpoints", f"{E}.usage"]
