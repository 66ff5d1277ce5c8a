"""Every accepted spelling (notes 1.10 / 1.12) normalizes to the rc4 model."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.definitions import read_document
from gateway.definitions.model import Catalog, MessageDefinition, Property
from gateway.protocols import AMQP, HTTP, KAFKA, MQTT5, MQTT311, NATS


def _doc(message: dict[str, Any], group: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"messagegroups": {"g": {**(group or {}), "messages": {"m": message}}}}


def _read(message: dict[str, Any], group: dict[str, Any] | None = None) -> Catalog:
    return read_document(_doc(message, group), file="doc.json")


def _one(message: dict[str, Any], group: dict[str, Any] | None = None) -> MessageDefinition:
    catalog = _read(message, group)
    assert catalog.errors == [], [str(p) for p in catalog.errors]
    found = catalog.message("/messagegroups/g/messages/m")
    assert found is not None
    return found


# What a message with an envelope or a protocol must declare (both REQUIRED by rc2), for
# tests about something else.
META = {"envelopemetadata": {"type": {"value": "t"}, "source": {"value": "/s"}}}
OPTS = {"protocoloptions": {"topic": {"value": "t"}}}


def _options(m: MessageDefinition) -> dict[tuple[str, str | None], Property]:
    return {(c.field, c.name): c.prop for c in m.protocol_options}


# -- envelope side ------------------------------------------------------------------------------


@pytest.mark.parametrize("spelling", ["CloudEvents/1.0", "cloudevents/1.0", " CloudEvents/1 "])
def test_envelope_names(spelling: str) -> None:
    assert _one({"envelope": spelling, **META}).envelope == "CloudEvents/1.0"


def test_envelope_without_version_is_read_as_1_0_and_refused() -> None:
    # rc2: <NAME>/<VERSION> (issue 35 item 9); still read, so its metadata is checked
    catalog = _read({"envelope": "CLOUDEVENTS", **META})
    assert [p.message for p in catalog.errors] == [
        "envelope 'CLOUDEVENTS' names no version (<NAME>/<VERSION>)"]
    message = catalog.message("/messagegroups/g/messages/m")
    assert message is not None and message.envelope == "CloudEvents/1.0"


def test_legacy_format_is_envelope() -> None:
    m = _one({"format": "CloudEvents/1.0", "metadata": {"type": {"value": "t"}}})
    assert m.envelope == "CloudEvents/1.0"
    assert m.envelope_metadata["type"].value == "t"


@pytest.mark.parametrize("key", ["envelopemetadata", "metadata"])
def test_attributes_wrapper_is_unwrapped(key: str) -> None:
    m = _one({"envelope": "CloudEvents/1.0",
              key: {"attributes": {"type": {"value": "t"}, "source": {"value": "/s"}}}})
    assert set(m.envelope_metadata) == {"type", "source"}
    assert m.envelope_metadata["source"].provenance is not None
    assert m.envelope_metadata["source"].provenance.path.endswith(f".{key}.attributes.source")


def test_extension_named_attributes_is_not_unwrapped_when_it_is_a_declaration() -> None:
    m = _one({"envelope": "CloudEvents/1.0", "envelopemetadata": {"attributes": {"value": "x"}}})
    assert m.envelope_metadata["attributes"].value == "x"


def test_scalar_attribute_means_value() -> None:
    m = _one({"envelope": "CloudEvents/1.0", "envelopemetadata": {"type": "t", "x": "5"}})
    assert m.envelope_metadata["type"] == Property(
        type="string", value="t", has_value=True, required=True,
        provenance=m.envelope_metadata["type"].provenance)


def test_envelopeoptions_declarations_become_metadata_with_warning() -> None:
    catalog = _read({"envelope": "CloudEvents/1.0",
                     "envelopeoptions": {"mode": "binary",
                                         "type": {"type": "uritemplate", "value": "{t}"}}})
    m = catalog.message("/messagegroups/g/messages/m")
    assert m is not None
    assert m.envelope_metadata["type"].value == "{t}"
    assert m.envelope_options == {"mode": "binary"}
    warning = [p for p in catalog.warnings if "under envelopeoptions" in p.message]
    assert len(warning) == 1
    assert warning[0].path == '$.messagegroups.g.messages.m.envelopeoptions'
    assert "move them into envelopemetadata" in warning[0].fix


def test_explicit_envelopemetadata_wins_over_envelopeoptions_declaration() -> None:
    m = _one({"envelope": "CloudEvents/1.0",
              "envelopemetadata": {"type": {"value": "explicit"}},
              "envelopeoptions": {"type": {"value": "other", "required": True}}})
    assert m.envelope_metadata["type"].value == "explicit"


@pytest.mark.parametrize(("name", "expected"), [
    ("source", "uritemplate"), ("subject", "uritemplate"), ("dataschema", "uritemplate"),
    ("time", "timestamp"), ("id", "string"), ("type", "string"), ("specversion", "string"),
    ("datacontenttype", "string"), ("myextension", "string"),
])
def test_cloudevents_type_defaults(name: str, expected: str) -> None:
    m = _one({"envelope": "CloudEvents/1.0", "envelopemetadata": {name: {}}})
    assert m.envelope_metadata[name].type == expected


def test_cloudevents_id_type_source_are_implicitly_required() -> None:
    m = _one({"envelope": "CloudEvents/1.0",
              "envelopemetadata": {"id": {}, "type": {}, "source": {}, "subject": {}}})
    assert [m.envelope_metadata[n].required for n in ("id", "type", "source", "subject")] == [
        True, True, True, False]


@pytest.mark.parametrize(("written", "read"), [("datetime", "timestamp"), ("var", "any"),
                                               ("STRING", "string")])
def test_older_type_names(written: str, read: str) -> None:
    m = _one({"envelope": "CloudEvents/1.0", "envelopemetadata": {"x": {"type": written}}})
    assert m.envelope_metadata["x"].type == read


def test_legacy_time_sentinel_is_rewritten() -> None:
    m = _one({"envelope": "CloudEvents/1.0",
              "envelopemetadata": {"time": {"value": "01-01-0000T00:00:00Z"}}})
    assert m.envelope_metadata["time"].value == "0000-01-01T00:00:00Z"


# -- message attributes ---------------------------------------------------------------------------


@pytest.mark.parametrize(("key", "field"), [
    ("schemaformat", "dataschemaformat"), ("schemaurl", "dataschemauri"),
    ("dataschemaurl", "dataschemauri"),
])
def test_schema_link_spellings(key: str, field: str) -> None:
    m = _one({"envelope": "CloudEvents/1.0", **META, key: "x/y",
              "dataschemaformat": "JsonSchema/draft-07"} if field == "dataschemauri" else
             {"envelope": "CloudEvents/1.0", **META, key: "x/y"})
    assert getattr(m, field) == "x/y"


def test_legacy_inline_schema_spelling() -> None:
    assert _one({"schema": {"type": "object"}, "dataschemaformat": "JsonSchema/draft-07"}
                ).dataschema == {"type": "object"}


def test_older_spellings_are_reported_once_per_document_with_a_count() -> None:
    doc = {"messagegroups": {"g": {"messages": {
        "a": {"format": "CloudEvents/1.0", "schemaurl": "/s"},
        "b": {"format": "CloudEvents/1.0", "schemaurl": "/s"},
    }}}}
    catalog = read_document(doc, file="doc.json")
    notes = [p for p in catalog.warnings if "'schemaurl' read as 'dataschemauri'" in p.message]
    assert len(notes) == 1
    assert "2 places" in notes[0].message
    assert notes[0].path == "$.messagegroups.g.messages.a.schemaurl"
    assert notes[0].fix.startswith("write 'dataschemauri'")


def test_near_miss_attribute_names_are_warned_about() -> None:
    catalog = _read({"envelope": "CloudEvents/1.0", "schemaformatr": "Avro/1.11.0"})
    typo = [p for p in catalog.warnings if "schemaformatr" in p.message]
    assert "did you mean 'schemaformat'?" in typo[0].message


def test_deprecated_object_and_boolean() -> None:
    assert _one({"envelope": "CloudEvents/1.0", **META, "deprecated": {}}).deprecated is True
    assert _one({"envelope": "CloudEvents/1.0", **META, "deprecated": True}).deprecated is True
    assert _one({"envelope": "CloudEvents/1.0", **META}).deprecated is False


def test_legacy_containers_and_ids() -> None:
    doc = {"definitionGroups": {"g": {"id": "g", "format": "CloudEvents/1.0",
                                      "definitions": {"m": {"id": "m"}}}}}
    catalog = read_document(doc)
    m = catalog.message("/messagegroups/g/messages/m")
    assert m is not None
    assert m.envelope == "CloudEvents/1.0"  # from the group's legacy `format`
    assert catalog.groups["g"].envelope == "CloudEvents/1.0"


def test_document_view_versions_are_dug_out() -> None:
    doc = {"messagegroups": {"g": {"messages": {"m": {
        "messageid": "m",
        "meta": {"defaultversionid": "2"},
        "versions": {
            "1": {"envelope": "CloudEvents/1.0", "envelopemetadata": {"type": {"value": "v1"}}},
            "2": {"envelope": "CloudEvents/1.0", "envelopemetadata": {"type": {"value": "v2"}}},
        },
    }}}}}
    m = read_document(doc).message("/messagegroups/g/messages/m")
    assert m is not None
    assert m.envelope_metadata["type"].value == "v2"
    assert m.field_provenance["$.envelopemetadata"].path == (
        '$.messagegroups.g.messages.m.versions["2"].envelopemetadata')


def test_document_view_without_pointer_picks_the_newest_version() -> None:
    doc = {"messagegroups": {"g": {"messages": {"m": {"versions": {
        "a": {"createdat": "2025-01-01T00:00:00Z", "protocol": "MQTT/5.0"},
        "b": {"createdat": "2024-01-01T00:00:00Z", "protocol": "KAFKA"},
    }}}}}}
    m = read_document(doc).message("/messagegroups/g/messages/m")
    assert m is not None and m.protocol == MQTT5


# -- protocol names ------------------------------------------------------------------------------


@pytest.mark.parametrize(("written", "read"), [
    ("MQTT", MQTT5), ("mqtt/5.0", MQTT5), ("MQTT/3.1.1", MQTT311), ("Kafka", KAFKA),
    ("KAFKA/3.5", KAFKA), ("amqp", AMQP), ("HTTP/1.1", HTTP), ("http/2", HTTP),
    ("NATS/1.0.0", NATS), ("None", None),
])
def test_protocol_names(written: str, read: str | None) -> None:
    catalog = _read({"protocol": written, "protocoloptions": {}})
    found = catalog.message("/messagegroups/g/messages/m")
    assert found is not None and found.protocol == read


def test_binding_and_message_of_spec_0_5() -> None:
    m = _one({"binding": "MQTT/5.0", "message": {"topic_name": {"value": "a/{b}"}}})
    assert m.protocol == MQTT5
    assert _options(m)[("topic_name", None)].value == "a/{b}"


def test_group_protocol_is_the_default_of_its_messages() -> None:
    m = _one({"protocoloptions": {"topic": "t"}}, group={"protocol": "KAFKA"})
    assert m.protocol == KAFKA
    assert _options(m)[("topic", None)].value == "t"


# -- protocol options ------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["protocoloptions", "protocolmetadata"])
def test_protocoloptions_spellings(key: str) -> None:
    m = _one({"protocol": "MQTT/5.0", key: {"topic_name": "a"}})
    assert _options(m)[("topic_name", None)].value == "a"


@pytest.mark.parametrize("key", ["topic_name", "topic-name", "topic"])
def test_mqtt_topic_spellings(key: str) -> None:
    m = _one({"protocol": "MQTT/5.0", "protocoloptions": {key: "a/{b}"}})
    assert m.raw_protocol_options == {"topic_name": {"value": "a/{b}"}}


def test_mqtt_dash_and_indicator_spellings() -> None:
    m = _one({"protocol": "MQTT/5.0", "protocoloptions": {
        "user-properties": [{"name": "k", "value": "v"}],
        "payload_format_indicator": 1,
        "response-topic": "r",
        "message-expiry-interval": 10,
    }})
    assert set(m.raw_protocol_options) == {"user_properties", "payload_format", "response_topic",
                                           "message_expiry_interval"}
    assert _options(m)[("user_properties", "k")].value == "v"


def test_mqtt_nested_properties_declarations() -> None:
    m = _one({"protocol": "MQTT/5.0", "protocoloptions": {"properties": {
        "topic": {"type": "uritemplate", "value": "c/{id}"},
        "qos": {"type": "integer", "value": 1},
        "retain": {"type": "boolean", "value": False},
    }}})
    options = _options(m)
    assert options[("topic_name", None)].value == "c/{id}"
    assert options[("qos", None)].value == 1
    where = options[("qos", None)].provenance
    assert where is not None
    assert where.path.endswith(".protocoloptions.properties.qos")


def test_nested_options_object_is_flattened() -> None:
    m = _one({"protocol": "KAFKA", "protocoloptions": {"options": {"topic": "t", "key": "{k}"}}})
    assert set(m.raw_protocol_options) == {"topic", "key"}


def test_top_level_option_wins_over_nested_duplicate() -> None:
    catalog = _read({"protocol": "KAFKA",
                     "protocoloptions": {"topic": "top", "options": {"topic": "nested"}}})
    m = catalog.message("/messagegroups/g/messages/m")
    assert m is not None
    assert _options(m)[("topic", None)].value == "top"
    assert any("more than once" in p.message for p in catalog.warnings)


def test_scalar_and_declaration_forms_are_equivalent() -> None:
    a = _options(_one({"protocol": "MQTT/5.0", "protocoloptions": {"qos": 1}}))[("qos", None)]
    b = _options(_one({"protocol": "MQTT/5.0", "protocoloptions": {"qos": {"value": 1}}}))[
        ("qos", None)]
    assert (a.type, a.value, a.has_value, a.required) == (b.type, b.value, b.has_value,
                                                          b.required) == ("integer", 1, True, False)


@pytest.mark.parametrize(("written", "read"), [
    ("application_properties", "application-properties"),
    ("message_annotations", "message-annotations"),
    ("delivery_annotations", "delivery-annotations"),
])
def test_amqp_underscore_sections(written: str, read: str) -> None:
    m = _one({"protocol": "AMQP/1.0", "protocoloptions": {written: {"x": {"value": "y"}}}})
    assert _options(m)[(read, "x")].value == "y"


def test_amqp_underscore_members_of_fixed_sections() -> None:
    m = _one({"protocol": "AMQP", "protocoloptions": {
        "properties": {"message_id": {"required": True}, "reply_to": "r/{q}"},
        "header": {"ttl": 1000, "delivery_count": 0},
        "application_properties": {"my_prop": {"value": "kept"}},
    }})
    options = _options(m)
    assert options[("properties", "message-id")].required is True
    assert options[("properties", "reply-to")].value == "r/{q}"
    assert options[("properties", "reply-to")].type == "uritemplate"
    assert options[("header", "ttl")].type == "integer"
    assert options[("header", "delivery-count")].value == 0
    assert options[("application-properties", "my_prop")].value == "kept"  # user names kept


def test_amqp_open_section_value_types_are_inferred() -> None:
    m = _one({"protocol": "AMQP", "protocoloptions": {
        "application-properties": {"n": 5, "b": True, "s": "x", "t": {"type": "string"}}}})
    options = _options(m)
    assert [options[("application-properties", k)].type for k in "nbst"] == [
        "integer", "boolean", "string", "string"]


@pytest.mark.parametrize("key", ["reply", "reply-to", "reply_to"])
def test_nats_reply_spellings(key: str) -> None:
    catalog = _read({"protocol": "NATS", "protocoloptions": {"subject": "a.b", key: "r"}})
    m = catalog.message("/messagegroups/g/messages/m")
    assert m is not None
    assert _options(m)[("reply-to", None)].value == "r"
    old_spelling = [p for p in catalog.warnings if "read as 'reply-to'" in p.message]
    assert bool(old_spelling) == (key == "reply_to")  # `reply` is the model's own name


def test_kafka_headers_as_map_array_and_schema_wrapper() -> None:
    as_map = _one({"protocol": "KAFKA", "protocoloptions": {
        "headers": {"action": {"name": "action", "value": "go"}, "plain": "v"}}})
    assert _options(as_map)[("headers", "action")].value == "go"
    assert _options(as_map)[("headers", "plain")].value == "v"
    as_list = _one({"protocol": "KAFKA", "protocoloptions": {
        "headers": [{"name": "action", "value": "go"}]}})
    assert _options(as_list)[("headers", "action")].value == "go"
    wrapped = _one({"protocol": "KAFKA", "protocoloptions": {"headers": {
        "type": "object", "properties": {"correlationId": {"type": "string"}}}}})
    assert set(wrapped.raw_protocol_options["headers"]) == {"correlationId"}  # type: ignore[arg-type]


def test_http_query_map_or_array_and_headers_list_or_map() -> None:
    array = _one({"protocol": "HTTP", "protocoloptions": {
        "query": [{"name": "foo", "value": "bar"}], "headers": [{"name": "A", "value": "1"}]}})
    mapping = _one({"protocol": "HTTP", "protocoloptions": {
        "query": {"foo": "bar"}, "headers": {"A": "1"}}})
    for m in (array, mapping):
        options = _options(m)
        assert options[("query", "foo")].value == "bar"
        assert options[("headers", "A")].value == "1"


def test_repeated_list_names_are_kept_in_order() -> None:
    m = _one({"protocol": "MQTT/5.0", "protocoloptions": {"user_properties": [
        {"name": "k", "value": "1"}, {"name": "k", "value": "2"}]}})
    assert [c.prop.value for c in m.protocol_options] == ["1", "2"]


def test_unknown_option_is_kept_raw_but_not_a_constraint() -> None:
    catalog = _read({"protocol": "MQTT/5.0", "protocoloptions": {"topicname": "a"}})
    m = catalog.message("/messagegroups/g/messages/m")
    assert m is not None
    assert m.raw_protocol_options == {"topicname": "a"}
    assert m.protocol_options == ()
