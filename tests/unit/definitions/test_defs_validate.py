"""One test per validation rule: each problem names file, JSON path, what and how to fix."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.definitions import read_document
from gateway.spec.problems import Problem

FILE = "defs.xreg.json"
M = "$.messagegroups.g.messages.m"


def _problems(message: dict[str, Any], group: dict[str, Any] | None = None) -> list[Problem]:
    doc = {"messagegroups": {"g": {**(group or {}), "messages": {"m": message}}}}
    return read_document(doc, file=FILE).problems


def _only(problems: list[Problem], severity: str, needle: str) -> Problem:
    found = [p for p in problems if p.severity == severity and needle in p.message]
    assert len(found) == 1, [str(p) for p in problems]
    assert found[0].file == FILE
    return found[0]


def _mqtt(options: dict[str, Any]) -> list[Problem]:
    return _problems({"protocol": "MQTT/5.0", "protocoloptions": options})


def _ce(metadata: dict[str, Any], **extra: Any) -> list[Problem]:
    return _problems({"envelope": "CloudEvents/1.0", "envelopemetadata": metadata, **extra})


# -- option names ---------------------------------------------------------------------------------


def test_unknown_option_suggests_the_closest_name() -> None:
    p = _only(_mqtt({"topicname": "a"}), "warning", "topicname")
    assert p.message == "unknown MQTT/5.0 option 'topicname'; did you mean 'topic_name'?"
    assert p.path == f"{M}.protocoloptions.topicname"
    assert p.fix.startswith("rename it to 'topic_name'")


def test_unknown_option_without_a_close_name_lists_the_valid_ones() -> None:
    p = _only(_problems({"protocol": "NATS", "protocoloptions": {"zzz": 1}}), "warning", "zzz")
    assert p.message == "unknown NATS option 'zzz'"
    assert "headers, reply-to, subject" in p.fix


def test_mqtt5_only_option_under_mqtt311() -> None:
    p = _only(_problems({"protocol": "MQTT/3.1.1",
                         "protocoloptions": {"user_properties": []}}), "warning", "MQTT/5.0")
    assert p.message == "option 'user_properties' exists only in MQTT/5.0 (ignored)"
    assert p.path == f"{M}.protocoloptions.user_properties"


def test_unknown_amqp_fixed_member() -> None:
    problems = _problems({"protocol": "AMQP/1.0",
                          "protocoloptions": {"properties": {"subjekt": "x"}}})
    p = _only(problems, "warning", "subjekt")
    assert p.message == "unknown AMQP properties member 'subjekt'; did you mean 'subject'?"
    assert p.path == f"{M}.protocoloptions.properties.subjekt"


def test_unknown_protocol_and_options_without_protocol() -> None:
    p = _only(_problems({"protocol": "MQTX"}), "warning", "unknown protocol")
    assert p.message == "unknown protocol 'MQTX'; its protocoloptions are not checked"
    assert p.path == f"{M}.protocol"
    q = _only(_problems({"envelope": "CloudEvents/1.0", "protocoloptions": {"topic": "t"}}),
              "warning", "without a protocol")
    assert q.path == f"{M}.protocoloptions" and "set \"protocol\"" in q.fix


# -- value types and ranges -----------------------------------------------------------------------


@pytest.mark.parametrize(("options", "path", "message", "fix"), [
    ({"qos": "1"}, "qos", "MQTT/5.0 option 'qos': value '1' is not an integer", "give an integer"),
    ({"qos": 3}, "qos", "MQTT/5.0 option 'qos': value 3 is outside 0..2",
     "between 0 and 2"),
    ({"retain": "yes"}, "retain", "MQTT/5.0 option 'retain': value 'yes' is not a boolean",
     "give a boolean"),
    ({"payload_format": 2}, "payload_format", "value 2 is outside 0..1", "between 0 and 1"),
    ({"message_expiry_interval": -1}, "message_expiry_interval", "outside 0..4294967295",
     "between 0"),
    ({"correlation_data": "not base64!"}, "correlation_data", "is not base64-encoded binary",
     "give a binary value"),
])
def test_mqtt_value_types(options: dict[str, Any], path: str, message: str, fix: str) -> None:
    p = _only(_mqtt(options), "error", message)
    assert p.path == f"{M}.protocoloptions.{path}"
    assert fix in p.fix


def test_kafka_partition_must_be_a_non_negative_integer() -> None:
    problems = _problems({"protocol": "KAFKA", "protocoloptions": {"partition": -1}})
    assert _only(problems, "error", "partition").message == (
        "KAFKA option 'partition': value -1 is outside 0..2147483647")
    problems = _problems({"protocol": "KAFKA", "protocoloptions": {"partition": "0"}})
    assert "is not an integer" in _only(problems, "error", "partition").message


@pytest.mark.parametrize(("section", "member", "value", "message"), [
    ("header", "priority", 300, "AMQP/1.0 header 'priority': value 300 is outside 0..255"),
    ("header", "durable", "true", "AMQP/1.0 header 'durable': value 'true' is not a boolean"),
    ("header", "ttl", 1.5, "AMQP/1.0 header 'ttl': value 1.5 is not an integer"),
    ("properties", "group-sequence", "1",
     "AMQP/1.0 properties 'group-sequence': value '1' is not an integer"),
    ("properties", "absolute-expiry-time", "tomorrow", "is not an RFC 3339 timestamp"),
    ("properties", "content-type", "application/jsön", "is not a symbol (ASCII characters only)"),
])
def test_amqp_member_types(section: str, member: str, value: Any, message: str) -> None:
    problems = _problems({"protocol": "AMQP/1.0",
                          "protocoloptions": {section: {member: {"value": value}}}})
    p = _only(problems, "error", message)
    assert p.path == f"{M}.protocoloptions.{section}.{member}" or p.path == (
        f'{M}.protocoloptions.{section}["{member}"]')


def test_amqp_message_id_accepts_any_type() -> None:
    problems = _problems({"protocol": "AMQP/1.0",
                          "protocoloptions": {"properties": {"message-id": {"value": 7}}}})
    assert [p for p in problems if p.is_error] == []


def test_declared_type_contradicting_the_protocol_is_a_warning() -> None:
    problems = _mqtt({"qos": {"type": "string"}})
    p = _only(problems, "warning", "declared as")
    assert p.message == ("MQTT/5.0 option 'qos' is declared as 'string' but the protocol "
                         "defines it as 'integer'")
    assert p.fix == 'declare "type": "integer" or leave type out'


def test_unknown_type_name_suggests_a_known_one() -> None:
    # an error since issue 35 item 13: a misspelt type constrains nothing
    p = _only(_ce({"subject": {"type": "strng"}}), "error", "unknown type")
    assert p.message == (
        "CloudEvents attribute 'subject': unknown type 'strng'; did you mean 'string'?")
    assert p.path == f"{M}.envelopemetadata.subject"


def test_http_method_and_status_format() -> None:
    problems = _problems({"protocol": "HTTP", "protocoloptions": {"method": "PO ST"}})
    assert _only(problems, "error", "method").message == (
        "HTTP option 'method': 'PO ST' is not an HTTP method")
    problems = _problems({"protocol": "HTTP", "protocoloptions": {"status": "2000"}})
    p = _only(problems, "error", "status")
    assert "three-digit" in p.fix


def test_required_must_be_boolean_and_type_a_string() -> None:
    problems = _ce({"subject": {"required": "yes", "type": 5}})
    required = _only(problems, "error", "'required' must be true or false")
    assert required.path == f"{M}.envelopemetadata.subject.required"
    typ = _only(problems, "error", "'type' must be a string")
    assert typ.path == f"{M}.envelopemetadata.subject.type"


# -- mutual exclusions -------------------------------------------------------------------------


def test_kafka_key_and_key_base64_are_exclusive() -> None:
    problems = _problems({"protocol": "KAFKA",
                          "protocoloptions": {"key": "k", "key_base64": "aw=="}})
    p = _only(problems, "error", "mutually exclusive")
    assert p.message == "KAFKA options 'key' and 'key_base64' are mutually exclusive"
    assert p.path == f"{M}.protocoloptions.key_base64"
    assert "keep only one" in p.fix


def test_http_method_and_status_are_exclusive() -> None:
    problems = _problems({"protocol": "HTTP",
                          "protocoloptions": {"method": "POST", "status": "200"}})
    p = _only(problems, "error", "mutually exclusive")
    assert p.message == "HTTP options 'method' and 'status' are mutually exclusive"
    assert p.path == f"{M}.protocoloptions.status"


def test_dataschema_and_dataschemauri_are_exclusive() -> None:
    problems = _problems({"envelope": "CloudEvents/1.0",
                          "dataschemaformat": "JsonSchema/draft-07",
                          "dataschema": {"type": "object"}, "dataschemauri": "https://x/s"})
    p = _only(problems, "error", "mutually exclusive")
    assert p.path == f"{M}.dataschema"
    assert "not both" in p.fix


# -- template syntax ---------------------------------------------------------------------------


@pytest.mark.parametrize("template", ["a/{+b}", "a/{b*}", "{#frag}", "{a,b}", "{x:3}", "a/{b",
                                      "a/{}", "{a-b}"])
def test_template_syntax_is_level_1_only(template: str) -> None:
    p = _only(_mqtt({"topic_name": template}), "error", "MQTT/5.0 option 'topic_name'")
    assert p.path == f"{M}.protocoloptions.topic_name"
    assert "level-1" in p.fix


def test_templates_checked_in_every_string_value() -> None:
    problems = _problems({
        "envelope": "CloudEvents/1.0",
        "envelopemetadata": {"source": {"value": "/{+tenant}"}, "subject": "{a*}"},
        "protocol": "MQTT/5.0",
        "protocoloptions": {"user_properties": [{"name": "k", "value": "{k:2}"}]},
    })
    paths = sorted(p.path for p in problems if p.is_error)
    assert paths == [f"{M}.envelopemetadata.source", f"{M}.envelopemetadata.subject",
                     f"{M}.protocoloptions.user_properties[0]"]


def test_integer_fields_do_not_take_templates() -> None:
    p = _only(_mqtt({"qos": "{qos}"}), "error", "qos")
    assert "holds a placeholder" in p.message


# -- CloudEvents envelope -------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["type", "id", "source"])
def test_type_id_source_never_optional(name: str) -> None:
    p = _only(_ce({name: {"required": False}}), "error", "must not be declared required")
    assert p.message == (f"CloudEvents attribute '{name}' is always required and must not be "
                         "declared required: false")
    assert p.path == f"{M}.envelopemetadata.{name}"
    assert p.fix == 'remove "required": false'


def test_specversion_value_and_type() -> None:
    p = _only(_ce({"specversion": {"value": "2.0"}}), "error", "specversion")
    assert p.message == ("CloudEvents attribute 'specversion' must have the value \"1.0\", "
                         "not '2.0'")
    q = _only(_ce({"specversion": {"type": "integer", "value": "1.0"}}), "error", "specversion")
    assert "must be of type string" in q.message
    assert [p for p in _ce({"specversion": {"type": "string", "value": "1.0"}}) if p.is_error] == []


@pytest.mark.parametrize(("name", "better"), [("myAttr", "myattr"), ("my-attr", "myattr"),
                                              ("my_attr", "myattr")])
def test_attribute_names_lower_case_alphanumeric(name: str, better: str) -> None:
    p = _only(_ce({name: {"value": "x"}}), "error", "lower-case")
    assert p.path == f'{M}.envelopemetadata.{name}' or p.path == (
        f'{M}.envelopemetadata["{name}"]')
    assert p.fix == f"rename it to '{better}'"


@pytest.mark.parametrize("value", ["0000-01-01T00:00:00Z", "2024-05-01T10:00:00Z",
                                   "2024-05-01T10:00:00.123+02:00"])
def test_time_accepts_rfc3339_and_the_sentinel(value: str) -> None:
    assert [p for p in _ce({"time": {"value": value}}) if p.is_error or "time" in p.message] == []


@pytest.mark.parametrize("value", ["yesterday", "2024-05-01", "2024-05-01 10:00:00Z", 1714557600])
def test_time_rejects_other_values(value: Any) -> None:
    p = _only(_ce({"time": {"value": value}}), "error", "'time'")
    assert "neither an RFC 3339 timestamp nor the 0000-01-01T00:00:00Z" in p.message
    assert p.path == f"{M}.envelopemetadata.time"


def test_templated_time_is_a_warning() -> None:
    p = _only(_ce({"time": {"type": "timestamp", "value": "{received}"}}), "warning", "template")
    assert p.path == f"{M}.envelopemetadata.time"
    assert "uritemplate" in p.fix


def test_id_with_a_value_is_a_warning() -> None:
    p = _only(_ce({"id": {"value": "fixed"}}), "warning", "'id'")
    assert "should not declare a value" in p.message


def test_dataschema_must_equal_dataschemauri() -> None:
    problems = _ce({"dataschema": {"value": "https://a/s1"}}, dataschemauri="https://a/s2",
                   dataschemaformat="JsonSchema/draft-07")
    p = _only(problems, "error", "dataschema")
    assert p.path == f"{M}.envelopemetadata.dataschema"


def test_extension_attribute_values_are_strings_by_default() -> None:
    p = _only(_ce({"count": {"value": 3}}), "error", "count")
    assert p.message == "CloudEvents attribute 'count': value 3 is not a string"
    assert [p for p in _ce({"count": {"type": "integer", "value": 3}}) if p.is_error] == []


def test_envelope_rules_need_an_envelope() -> None:
    p = _only(_problems({"envelopemetadata": {"type": "t"}}), "warning", "without an envelope")
    assert p.path == f"{M}.envelopemetadata"
    q = _only(_problems({"envelope": "SOAP/1.2"}), "warning", "unknown envelope")
    assert q.message == "unknown envelope 'SOAP/1.2'; its metadata is not checked"


# -- structure -----------------------------------------------------------------------------------


def test_group_consistency_error() -> None:
    # "every message of a group uses the group's protocol" is a MUST: an error.
    p = _only(_problems({"protocol": "KAFKA", "protocoloptions": {"topic": "t"}},
                        group={"protocol": "MQTT/5.0"}), "error", "differs")
    assert p.message == "message protocol 'KAFKA' differs from its group's 'MQTT/5.0'"
    assert p.path == f"{M}.protocol"


@pytest.mark.parametrize(("options", "path", "needle"), [
    ({"user_properties": [{"value": "x"}]}, "user_properties[0]", "string 'name'"),
    ({"user_properties": "x"}, "user_properties", "must be an array"),
])
def test_malformed_collections(options: dict[str, Any], path: str, needle: str) -> None:
    p = _only(_mqtt(options), "error", needle)
    assert p.path == f"{M}.protocoloptions.{path}"


def test_malformed_sections_and_objects() -> None:
    problems = _problems({"protocol": "AMQP", "protocoloptions": {"properties": "x"}})
    assert _only(problems, "error", "must be an object").path == (
        f"{M}.protocoloptions.properties")
    problems = _problems({"protocol": "AMQP", "protocoloptions": []})
    assert _only(problems, "error", "protocoloptions must be an object").path == (
        f"{M}.protocoloptions")
    problems = _problems({"envelope": "CloudEvents/1.0", "envelopemetadata": [1]})
    assert _only(problems, "error", "envelopemetadata must be").path == f"{M}.envelopemetadata"


def test_non_object_document_group_and_message() -> None:
    assert [p.message for p in read_document([1, 2], file=FILE).errors] == [
        "a catalog document must be a JSON object"]
    problems = read_document({"messagegroups": {"g": 1}}, file=FILE).errors
    assert [(p.path, p.message) for p in problems] == [
        ("$.messagegroups.g", "'g' must be an object")]
    problems = read_document({"messagegroups": {"g": {"messages": {"m": "x"}}}}, file=FILE).errors
    assert [p.path for p in problems] == [M]
