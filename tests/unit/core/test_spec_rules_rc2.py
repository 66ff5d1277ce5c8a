"""Issue 35: fourteen rules of message definitions rc2 (and the 2023 draft) the gateway did
not follow, one test per rule (the item number in each test's name). Matching rules run
through the whole conversion (`xrgw match`'s path); validation rules read the document
as `xrgw validate` does and look at its errors. The decisions taken where the spec is
loose are the README's ("Rules we apply")."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.convert import Converter
from gateway.definitions import read_document
from gateway.definitions.model import Catalog
from gateway.matching.compiled import compile_definition
from gateway.matching.matcher import Matcher
from gateway.record import NativeMessage

META = {"type": {"value": "t"}, "source": {"value": "/s"}}
CE = {"envelope": "CloudEvents/1.0", "envelopemetadata": META}


def _catalog(doc: dict[str, Any]) -> Catalog:
    return read_document(doc, "rules.json")


def _group(**messages: dict[str, Any]) -> dict[str, Any]:
    return {"messagegroups": {"g": {"messages": messages}}}


def _converter(doc: dict[str, Any]) -> Converter:
    catalog = _catalog(doc)
    assert not catalog.errors, catalog.errors
    return Converter(catalog.messages())


def _errors(doc: dict[str, Any]) -> list[str]:
    return [f"{p.path}: {p.message}" for p in _catalog(doc).errors]


def _warnings(doc: dict[str, Any]) -> list[str]:
    return [f"{p.path}: {p.message}" for p in _catalog(doc).warnings]


def _kafka_ce(topic: str, **attributes: str) -> NativeMessage:
    headers = [{"name": "ce_specversion", "value": "1.0"}, {"name": "ce_id", "value": "1"},
               {"name": "ce_source", "value": "/s"}, {"name": "ce_type", "value": "x"}]
    headers += [{"name": f"ce_{k}", "value": v} for k, v in attributes.items()]
    return NativeMessage("KAFKA", {"topic": topic, "headers": headers}, payload=b"hi")


def _typed_ce(**declared: dict[str, Any]) -> Converter:
    """A Kafka CloudEvent definition declaring `declared` attributes (type-only or valued)."""
    return _converter(_group(m={
        "protocol": "KAFKA", "protocoloptions": {"topic": {"value": "t"}},
        "envelope": "CloudEvents/1.0",
        "envelopemetadata": {"type": {"value": "x"}, "source": {"value": "/s"}, **declared}}))


# -- 1. repeated MQTT user properties: any entry consistent with the captured value ------

def _mqtt_user_property_definition(first: str) -> dict[str, Any]:
    options: dict[str, Any] = {"topic_name": {"value": "t/{k}"},
                               "user_properties": [{"name": "k", "value": "{k}"}]}
    if first == "user_properties":
        options = {"user_properties": options["user_properties"],
                   "topic_name": options["topic_name"]}
    return _group(m={"protocol": "MQTT/5.0", "protocoloptions": options, **CE})


@pytest.mark.parametrize("first", ["topic_name", "user_properties"])
def test_item1_repeated_user_property_matches_any_entry_consistent_with_a_capture(first):
    converter = _converter(_mqtt_user_property_definition(first))
    record = NativeMessage("MQTT/5.0", {"topic_name": "t/a", "user_properties": [
        {"name": "k", "value": "b"}, {"name": "k", "value": "a"}]})
    result = converter.convert(record)
    assert result.ok, result.detail
    assert result.match.context == {"k": "a"}
    none = converter.convert(NativeMessage("MQTT/5.0", {"topic_name": "t/a", "user_properties": [
        {"name": "k", "value": "b"}, {"name": "k", "value": "c"}]}))
    assert not none.ok and none.reason == "unmatched"


def test_item1_explain_agrees_with_the_matcher():
    [definition] = _catalog(_mqtt_user_property_definition("user_properties")).messages()
    record = NativeMessage("MQTT/5.0", {"topic_name": "t/a", "user_properties": [
        {"name": "k", "value": "b"}, {"name": "k", "value": "a"}]})
    assert compile_definition(definition).evaluate(record, None) == {"k": "a"}


def test_item1_two_repeated_fields_sharing_a_placeholder_find_the_agreeing_entries():
    # x = [a, b], y = [b]: only k = b satisfies both; the first entry of x must not decide
    converter = _converter(_group(m={"protocol": "MQTT/5.0", "protocoloptions": {
        "topic_name": "t", "user_properties": [{"name": "x", "value": "{k}"},
                                               {"name": "y", "value": "{k}"}]}, **CE}))
    record = NativeMessage("MQTT/5.0", {"topic_name": "t", "user_properties": [
        {"name": "x", "value": "a"}, {"name": "x", "value": "b"}, {"name": "y", "value": "b"}]})
    result = converter.convert(record)
    assert result.ok, result.detail
    assert result.match.context == {"k": "b"}
    [definition] = _catalog(_group(m={"protocol": "MQTT/5.0", "protocoloptions": {
        "topic_name": "t", "user_properties": [{"name": "x", "value": "{k}"},
                                               {"name": "y", "value": "{k}"}]}, **CE}
                                   )).messages()
    assert compile_definition(definition).evaluate(record, None) == {"k": "b"}


def test_item1_a_cloudevent_attribute_sharing_a_placeholder_with_a_repeated_field():
    doc = _group(m={"protocol": "KAFKA", "protocoloptions": {
        "topic": "t", "headers": {"x": {"value": "{k}"}}},
        "envelope": "CloudEvents/1.0",
        "envelopemetadata": {**META, "subject": {"value": "{k}"}}})
    [definition] = _catalog(doc).messages()
    record = NativeMessage("KAFKA", {"topic": "t", "headers": [
        {"name": "x", "value": "a"}, {"name": "x", "value": "b"}]})
    event = {"type": "t", "source": "/s", "subject": "b"}
    assert compile_definition(definition).evaluate(record, event) == {"k": "b"}


# -- 2. a basemessage naming a version inherits that version ------------------------------

def test_item2_basemessage_naming_a_version_inherits_that_version():
    doc = {"messagegroups": {"g": {"messages": {
        "b": {"meta": {"defaultversionid": "2"}, "versions": {
            "1": {"protocol": "KAFKA", "protocoloptions": {"topic": {"value": "v1"}}, **CE},
            "2": {"protocol": "KAFKA", "protocoloptions": {"topic": {"value": "v2"}}, **CE}}},
        "d": {"basemessage": "/messagegroups/g/messages/b/versions/1",
              "envelopemetadata": {"type": {"value": "d"}}},
        "e": {"basemessage": "/messagegroups/g/messages/b",
              "envelopemetadata": {"type": {"value": "e"}}}}}}}
    catalog = _catalog(doc)
    assert catalog.errors == []
    derived = catalog.message("/messagegroups/g/messages/d")
    assert derived is not None
    assert [(c.field, c.prop.value) for c in derived.protocol_options] == [("topic", "v1")]
    default = catalog.message("/messagegroups/g/messages/e")
    assert default is not None
    assert [(c.field, c.prop.value) for c in default.protocol_options] == [("topic", "v2")]


def test_item2_basemessage_naming_a_missing_version_is_dangling():
    doc = {"messagegroups": {"g": {"messages": {
        "b": {"versions": {"1": {"protocol": "KAFKA",
                                 "protocoloptions": {"topic": {"value": "v1"}}, **CE}}},
        "d": {"basemessage": "/messagegroups/g/messages/b/versions/9", **CE}}}}}
    assert any("does not name a loaded message definition" in w for w in _warnings(doc))


# -- 3. the 2023 draft's MQTT/5.0 user-properties: single-key maps -------------------------

DRAFT_MQTT = {"definitionGroups": {"g": {"format": "MQTT/5.0", "definitions": {"m": {
    "format": "MQTT/5.0",
    "metadata": {"qos": {"value": 1}, "retain": {"value": False},
                 "topic-name": {"value": "mytopic"},
                 "user-properties": [{"my-application-property": {
                     "value": "my-application-property-value"}}]}}}}}}


def test_item3_2023_user_properties_as_single_key_maps_load_and_match():
    catalog = _catalog(DRAFT_MQTT)
    assert catalog.errors == []
    [message] = catalog.messages()
    assert [(c.field, c.name, c.prop.value) for c in message.protocol_options
            if c.field == "user_properties"] == [
        ("user_properties", "my-application-property", "my-application-property-value")]
    matcher = Matcher(list(catalog.messages()))
    hit = matcher.match(NativeMessage("MQTT/5.0", {
        "topic_name": "mytopic", "qos": 1, "retain": False, "user_properties": [
            {"name": "my-application-property", "value": "my-application-property-value"}]}))
    assert hit.matched and hit.definition is not None
    assert hit.definition.xid == "/messagegroups/g/messages/m"
    miss = matcher.match(NativeMessage("MQTT/5.0", {
        "topic_name": "mytopic", "qos": 1, "retain": False, "user_properties": [
            {"name": "my-application-property", "value": "other"}]}))
    assert not miss.matched


def test_item3_a_map_with_several_keys_is_still_an_error():
    doc = _group(m={"protocol": "MQTT/5.0", "protocoloptions": {
        "topic_name": "t", "user_properties": [{"a": {"value": "1"}, "b": {"value": "2"}}]},
        **CE})
    assert any("user_properties" in e for e in _errors(doc))


# -- 4. uri is an absolute URI, uri-reference the relative one -----------------------------

def test_item4_uri_type_refuses_text_and_relative_references():
    converter = _typed_ce(subject={"type": "uri"})
    assert not converter.convert(_kafka_ce("t", subject="not a uri")).ok
    assert not converter.convert(_kafka_ce("t", subject="/relative/path")).ok
    assert converter.convert(_kafka_ce("t", subject="urn:example:a")).ok


def test_item4_uri_declared_header_refuses_a_relative_path():
    converter = _converter(_group(m={"protocol": "KAFKA", "protocoloptions": {
        "topic": {"value": "t"}, "headers": {"where": {"type": "uri"}}}, **CE}))
    relative = converter.convert(NativeMessage("KAFKA", {"topic": "t", "headers": [
        {"name": "where", "value": "/relative/path"}]}))
    assert not relative.ok and relative.reason == "unmatched"
    absolute = converter.convert(NativeMessage("KAFKA", {"topic": "t", "headers": [
        {"name": "where", "value": "https://example.com/a"}]}))
    assert absolute.ok, absolute.detail


def test_item4_uri_reference_type_accepts_relative_references():
    converter = _typed_ce(where={"type": "uri-reference"})
    assert converter.convert(_kafka_ce("t", where="/relative/path")).ok
    assert not converter.convert(_kafka_ce("t", where="not a uri ref")).ok


def test_item4_validate_refuses_a_relative_uri_constant():
    doc = _group(m={"protocol": "KAFKA", "protocoloptions": {"topic": {"value": "t"}},
                    "envelope": "CloudEvents/1.0", "envelopemetadata": {
                        **META, "subject": {"type": "uri", "value": "/relative/path"}}})
    assert any("is not an absolute URI" in e for e in _errors(doc))


# -- 5. symbol: alphanumerics and underscore ----------------------------------------------

def test_item5_symbol_is_alphanumerics_and_underscore():
    converter = _typed_ce(kind={"type": "symbol"})
    assert not converter.convert(_kafka_ce("t", kind="a-b")).ok
    assert not converter.convert(_kafka_ce("t", kind="a b")).ok
    assert converter.convert(_kafka_ce("t", kind="a_B9")).ok


def test_item5_validate_refuses_a_symbol_constant_with_other_characters():
    doc = _group(m={"protocol": "KAFKA", "protocoloptions": {"topic": {"value": "t"}},
                    "envelope": "CloudEvents/1.0", "envelopemetadata": {
                        **META, "kind": {"type": "symbol", "value": "a-b"}}})
    assert any("is not a symbol" in e for e in _errors(doc))


def test_item5_protocol_fields_typed_symbol_for_media_types_keep_media_types():
    # The spec's own tables type AMQP content-type and MQTT content_type `symbol` and its
    # AMQP example sets "application/json": those fields keep AMQP's symbol (ASCII).
    doc = _group(m={"protocol": "MQTT/5.0", "protocoloptions": {
        "topic_name": "t", "content_type": {"type": "symbol", "value": "application/json"}},
        **CE})
    converter = _converter(doc)
    result = converter.convert(NativeMessage("MQTT/5.0", {"topic_name": "t",
                                                          "content_type": "application/json"}))
    assert result.ok, result.detail


# -- 6. integer is 32-bit signed; unsigned protocol fields keep their range -----------------

def test_item6_integer_is_32_bit_signed():
    converter = _typed_ce(count={"type": "integer"})
    assert not converter.convert(_kafka_ce("t", count="2147483648")).ok
    assert converter.convert(_kafka_ce("t", count="2147483647")).ok
    assert converter.convert(_kafka_ce("t", count="-2147483648")).ok


def test_item6_kafka_header_declared_integer_is_32_bit():
    converter = _converter(_group(m={"protocol": "KAFKA", "protocoloptions": {
        "topic": {"value": "t"}, "headers": {"n": {"type": "integer"}}}, **CE}))
    big = converter.convert(NativeMessage("KAFKA", {"topic": "t", "headers": [
        {"name": "n", "value": "2147483648"}]}))
    assert not big.ok


def test_item6_validate_refuses_an_integer_constant_beyond_32_bits():
    doc = _group(m={"protocol": "KAFKA", "protocoloptions": {"topic": {"value": "t"}},
                    "envelope": "CloudEvents/1.0", "envelopemetadata": {
                        **META, "count": {"type": "integer", "value": 2147483648}}})
    assert any("32-bit" in e for e in _errors(doc))


def test_item6_protocol_integers_are_checked_against_their_own_range():
    doc = _group(m={"protocol": "KAFKA", "protocoloptions": {
        "topic": "t", "partition": {"value": 2147483648}}, **CE})
    assert _errors(doc) == ["$.messagegroups.g.messages.m.protocoloptions.partition: KAFKA "
                            "option 'partition': value 2147483648 is outside 0..2147483647"]


def test_item6_unsigned_32_bit_protocol_fields_keep_their_range():
    doc = _group(m={"protocol": "MQTT/5.0", "protocoloptions": {
        "topic_name": "t", "message_expiry_interval": {"type": "integer"}}, **CE})
    converter = _converter(doc)
    result = converter.convert(NativeMessage("MQTT/5.0", {
        "topic_name": "t", "message_expiry_interval": 3_000_000_000}))
    assert result.ok, result.detail
    amqp = _group(m={"protocol": "AMQP/1.0", "protocoloptions": {
        "properties": {"subject": "s"}, "header": {"ttl": {"value": 4_294_967_295}}}, **CE})
    assert _errors(amqp) == []


def test_item5_6_amqp_section_members_are_matched_with_their_table_types():
    # The types of AMQP's `properties` and `header` members come from the protocol
    # table, by member name: content-type keeps AMQP's symbol (a media type), ttl its
    # unsigned 32-bit range.
    doc = _group(m={"protocol": "AMQP/1.0", "protocoloptions": {
        "properties": {"subject": "s",
                       "content-type": {"type": "symbol", "value": "application/json"}},
        "header": {"ttl": {"type": "integer"}}}, **CE})
    converter = _converter(doc)
    result = converter.convert(NativeMessage("AMQP/1.0", {
        "properties": {"subject": "s", "content-type": "application/json"},
        "header": {"ttl": 3_000_000_000}}))
    assert result.ok, result.detail


# -- 7. content types that disagree ---------------------------------------------------------

def test_item7_envelope_datacontenttype_must_equal_the_messages():
    doc = _group(m={"protocol": "KAFKA", "protocoloptions": {"topic": "t"},
                    "datacontenttype": "application/xml", "envelope": "CloudEvents/1.0",
                    "envelopemetadata": {**META, "datacontenttype": {
                        "value": "application/json"}}})
    assert any("datacontenttype" in e and "differs" in e for e in _errors(doc)), _errors(doc)
    same = _group(m={"protocol": "KAFKA", "protocoloptions": {"topic": "t"},
                     "datacontenttype": "Application/JSON; Charset=utf-8",
                     "envelope": "CloudEvents/1.0",
                     "envelopemetadata": {**META, "datacontenttype": {
                         "value": "application/json; charset=utf-8"}}})
    assert _errors(same) == []


def test_item7_amqp_content_type_must_equal_datacontenttype():
    doc = _group(m={"protocol": "AMQP/1.0", "protocoloptions": {"properties": {
        "subject": "s", "content-type": {"value": "application/json"}}},
        "datacontenttype": "application/xml", **CE})
    assert any("content-type" in e and "differs" in e for e in _errors(doc)), _errors(doc)


def test_item7_structured_mode_envelope_type_is_not_the_data_type():
    # rc2: in structured mode the message's content type is the envelope's.
    doc = _group(m={"protocol": "KAFKA", "protocoloptions": {
        "topic": "t", "headers": {"content-type": {"value": "application/cloudevents+json"}}},
        "datacontenttype": "application/cloudevents+json", "envelope": "CloudEvents/1.0",
        "envelopemetadata": {**META, "datacontenttype": {"value": "application/json"}}})
    assert _errors(doc) == []


# -- 8. AMQP map names must be symbols -------------------------------------------------------

@pytest.mark.parametrize("section", ["application-properties", "message-annotations"])
def test_item8_amqp_map_names_must_be_symbols(section):
    doc = _group(m={"protocol": "AMQP/1.0", "protocoloptions": {
        "properties": {"subject": "s"}, section: {"prüf zahl": {"value": "1"}}}, **CE})
    assert any("prüf zahl" in e and "symbol" in e for e in _errors(doc)), _errors(doc)
    fine = _group(m={"protocol": "AMQP/1.0", "protocoloptions": {
        "properties": {"subject": "s"},
        section: {"my-application-property": {"value": "1"}, "x-opt-key": {"value": "2"}}},
        **CE})
    assert _errors(fine) == []


# -- 9. <NAME>/<VERSION> and non-empty protocol ----------------------------------------------

def test_item9_envelope_without_version_is_an_error():
    doc = _group(m={"envelope": "CloudEvents", "envelopemetadata": META})
    assert any(".envelope:" in e and "version" in e for e in _errors(doc)), _errors(doc)


def test_item9_group_and_endpoint_envelope_without_version_is_an_error():
    for collection in ("messagegroups", "endpoints"):
        doc = {collection: {"g": {"envelope": "CloudEvents", "messages": {"m": {
            "envelopemetadata": META}}}}}
        assert any(f"{collection}.g.envelope:" in e for e in _errors(doc)), _errors(doc)


def test_item9_dataschemaformat_without_version_is_an_error():
    doc = _group(m={**CE, "dataschemaformat": "JsonSchema",
                    "dataschema": {"type": "object"}})
    assert any(".dataschemaformat:" in e and "version" in e for e in _errors(doc)), _errors(doc)


def test_item9_empty_protocol_is_an_error():
    doc = _group(m={**CE, "protocol": ""})
    assert any(".protocol:" in e and "empty" in e for e in _errors(doc)), _errors(doc)
    group = {"messagegroups": {"g": {"protocol": "", "messages": {"m": CE}}}}
    assert any(".protocol:" in e and "empty" in e for e in _errors(group)), _errors(group)


# -- 10. bare MQTT ----------------------------------------------------------------------------

def test_item10_bare_mqtt_is_refused_in_rc_message_definitions():
    doc = _group(m={"protocol": "MQTT", "protocoloptions": {"topic_name": "t"}, **CE})
    assert any(".protocol:" in e and "MQTT/5.0" in e for e in _errors(doc)), _errors(doc)
    group = {"messagegroups": {"g": {"protocol": "mqtt", "messages": {
        "m": {"protocoloptions": {"topic_name": "t"}, **CE}}}}}
    assert any(".protocol:" in e for e in _errors(group)), _errors(group)


def test_item10_bare_mqtt_in_the_2023_endpoint_config_is_a_warning():
    doc = {"endpoints": {"e": {"usage": "consumer", "format": "CloudEvents/1.0",
                               "config": {"protocol": "MQTT",
                                          "endpoints": ["mqtt://localhost:1883"],
                                          "options": {"topic": "t"}}}}}
    catalog = _catalog(doc)
    assert catalog.errors == []
    assert any("MQTT/5.0" in p.message for p in catalog.warnings), catalog.warnings
    assert catalog.endpoints["e"].protocol == "MQTT/5.0"


# -- 11. a relative basemessage naming a group -------------------------------------------------

def test_item11_basemessage_naming_a_group_is_an_error():
    doc = _group(m={"basemessage": "/messagegroups/g", **CE})
    assert any(".basemessage:" in e for e in _errors(doc)), _errors(doc)


# -- 12. placeholders only in string-like values -----------------------------------------------

def test_item12_placeholder_in_a_timestamp_extension_is_an_error():
    doc = _group(m={"protocol": "KAFKA", "protocoloptions": {"topic": "t"},
                    "envelope": "CloudEvents/1.0", "envelopemetadata": {
                        **META, "when": {"type": "timestamp", "value": "{when}"}}})
    assert any(".envelopemetadata.when:" in e for e in _errors(doc)), _errors(doc)


def test_item12_placeholder_in_a_typed_protocol_value_is_an_error():
    doc = _group(m={"protocol": "AMQP/1.0", "protocoloptions": {"properties": {
        "subject": "s", "creation-time": {"value": "{t}"}}}, **CE})
    assert any("creation-time" in e for e in _errors(doc)), _errors(doc)


def test_item12_cloudevents_time_from_a_placeholder_stays_a_warning():
    # The real-time-sources catalogs map a native field into `time` this way.
    doc = _group(m={"protocol": "KAFKA", "protocoloptions": {"topic": "t"},
                    "envelope": "CloudEvents/1.0", "envelopemetadata": {
                        **META, "time": {"type": "timestamp", "value": "{when}"}}})
    assert _errors(doc) == []
    assert any(".envelopemetadata.time:" in w for w in _warnings(doc))


# -- 13. unknown types --------------------------------------------------------------------------

def test_item13_unknown_type_is_an_error():
    doc = _group(m={"protocol": "KAFKA", "protocoloptions": {"topic": "t"},
                    "envelope": "CloudEvents/1.0", "envelopemetadata": {
                        **META, "ratio": {"type": "float"}}})
    assert any("unknown type 'float'; did you mean 'number'?" in e for e in _errors(doc)), (
        _errors(doc))


# -- 14. 2023: a definition's format is its group's ---------------------------------------------

def test_item14_2023_definition_format_must_equal_its_groups():
    doc = {"definitionGroups": {"g": {"format": "CloudEvents/1.0", "definitions": {
        "a": {"format": "AMQP/1.0", "metadata": {"properties": {"subject": {"value": "s"}}}}}}}}
    assert any(".format:" in e and "AMQP/1.0" in e for e in _errors(doc)), _errors(doc)
    same = {"definitionGroups": {"g": {"format": "CloudEvents/1.0", "definitions": {
        "c": {"format": "cloudevents/1.0", "metadata": META}}}}}
    assert _errors(same) == []


# -- 4, 5 when rendering: a templated attribute is coerced to its declared type -------------

def test_item4_item5_rendered_values_follow_the_declared_types():
    converter = _converter(_group(
        u={"protocol": "KAFKA", "protocoloptions": {"topic": "u/{x}"},
           "envelope": "CloudEvents/1.0",
           "envelopemetadata": {**META, "where": {"type": "uri", "value": "{x}"}}},
        s={"protocol": "KAFKA", "protocoloptions": {"topic": "s/{x}"},
           "envelope": "CloudEvents/1.0",
           "envelopemetadata": {**META, "kind": {"type": "symbol", "value": "{x}"}}}))

    def convert(topic: str) -> tuple[bool, str | None]:
        result = converter.convert(NativeMessage("KAFKA", {"topic": topic}, payload=b"x"))
        return result.ok, result.reason

    assert convert("u/urn:x") == (True, None)
    assert convert("u/a:b^c") == (False, "invalid-envelope")  # `^` is no URI character
    assert convert("s/a_1") == (True, None)
    assert convert("s/a-1") == (False, "invalid-envelope")


def test_item6_an_undeclared_64_bit_amqp_member_value_is_a_number_not_an_error():
    # AMQP application properties may be longs; only a declared integer is 32-bit
    doc = _group(m={"protocol": "AMQP/1.0", "protocoloptions": {
        "properties": {"subject": "s"}, "application-properties": {"big": 5_000_000_000}},
        **CE})
    assert _errors(doc) == []
    converter = _converter(doc)
    result = converter.convert(NativeMessage("AMQP/1.0", {
        "properties": {"subject": "s"}, "application-properties": {"big": 5_000_000_000}}))
    assert result.ok, result.detail
