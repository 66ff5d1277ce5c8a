"""The protocol profiles (`gateway/protocols/`): each protocol's facts, the invariants a
new profile must keep, and the behaviour the core derives from them."""

from __future__ import annotations

import pytest

from gateway.deadletter.format import deadletter_metadata, deadletter_record, original_record
from gateway.envelope.ids import native_identity
from gateway.json.values import JSON
from gateway.protocols import (
    AMQP,
    DEFINITION_FIELDS,
    HTTP,
    KAFKA,
    MQTT5,
    MQTT311,
    MQTT_FAMILY,
    NATS,
    PROFILES,
    PROTOCOLS,
    RECORD_FIELDS,
    FieldAccess,
    FieldRef,
    Ordering,
    ProtocolProfile,
    add_metadata,
    address_fields,
    family,
    family_members,
    field_access,
    find_profile,
    normalize_protocol,
    percent_decoded,
    profile,
    set_content_type,
    token_separator,
    widest_protocol,
)
from gateway.record import NativeMessage

# -- invariants every profile keeps (a new protocol's too) ----------------------------------


@pytest.mark.parametrize("prof", PROFILES, ids=lambda p: p.name)
def test_a_profile_names_only_fields_its_records_have(prof: ProtocolProfile) -> None:
    fields = prof.record_fields
    refs = [prof.address, prof.content_type,
            *(part.ref for part in (prof.identity.parts if prof.identity else ())),
            *prof.ordering.source_key]
    for ref in refs:
        assert ref is None or ref.field in fields, ref
    assert set(prof.percent_encoded) <= set(fields)
    if prof.metadata is not None:
        expected = "pairs" if prof.metadata.shape == "pairs" else "object"
        assert fields[prof.metadata.field] == expected
    for option, record_field in prof.endpoint.output_fields:
        assert option in prof.endpoint.options and record_field in fields


@pytest.mark.parametrize("prof", PROFILES, ids=lambda p: p.name)
def test_a_profile_has_consistent_uri_schemes(prof: ProtocolProfile) -> None:
    uris = prof.endpoint.uris
    assert uris.schemes and all(s == s.lower() for s in uris.schemes)
    assert set(uris.tls) <= set(uris.schemes)
    assert not set(uris.unsupported) & set(uris.schemes)
    assert uris.example.partition("://")[0] in uris.schemes


@pytest.mark.parametrize("prof", PROFILES, ids=lambda p: p.name)
def test_a_profile_is_found_by_its_name_and_spellings(prof: ProtocolProfile) -> None:
    assert find_profile(prof.name) is prof is profile(prof.name)
    assert normalize_protocol(prof.name.lower()) == prof.name
    for spelled in prof.spelling.families:
        version = prof.spelling.versions[0] if prof.spelling.versions else "9"
        assert normalize_protocol(f"{spelled}/{version}".lower()) == prof.name


def test_the_tables_are_the_profiles() -> None:
    assert PROTOCOLS == (MQTT5, MQTT311, AMQP, KAFKA, NATS, HTTP)
    assert {p.name: p.definitions.fields for p in PROFILES} == DEFINITION_FIELDS
    assert {p.name: dict(p.record_fields) for p in PROFILES} == RECORD_FIELDS


def test_family_members_agree_on_their_address() -> None:
    for prof in PROFILES:
        assert {m.address for m in family_members(prof.family)} == {prof.address}


def test_an_unknown_protocol_has_no_profile() -> None:
    assert find_profile("BUNNYMQ/0.9.1") is None and find_profile(None) is None
    with pytest.raises(ValueError, match="unknown protocol 'X'"):
        profile("X")
    assert family("X") == "X" and family(None) is None


# -- each protocol's facts -------------------------------------------------------------------


@pytest.mark.parametrize(("protocol", "fam", "address", "ordering"), [
    (MQTT5, MQTT_FAMILY, FieldRef("topic_name"),
     Ordering((FieldRef("topic_name"),))),
    (MQTT311, MQTT_FAMILY, FieldRef("topic_name"),
     Ordering((FieldRef("topic_name"),))),
    (AMQP, AMQP, FieldRef("properties", "subject"),
     Ordering((FieldRef("properties", "group-id"),
                           FieldRef("properties", "subject")))),
    (KAFKA, KAFKA, FieldRef("topic"),
     Ordering((FieldRef("key"),))),
    (NATS, NATS, FieldRef("subject"), Ordering((FieldRef("subject"),))),
    (HTTP, HTTP, FieldRef("path"), Ordering()),
])
def test_family_address_and_ordering(protocol: str, fam: str, address: FieldRef,
                                     ordering: Ordering) -> None:
    prof = profile(protocol)
    assert (prof.family, prof.address, prof.ordering) == (fam, address, ordering)
    assert address_fields()[fam] == address


@pytest.mark.parametrize(("protocol", "metadata", "content_type", "binary", "batches"), [
    (MQTT5, ("user_properties", "pairs", False), FieldRef("content_type"), True, False),
    (MQTT311, None, None, False, False),
    (AMQP, ("application-properties", "section", False), FieldRef("properties",
                                                                  "content-type"), True, False),
    (KAFKA, ("headers", "pairs", True), FieldRef("headers", "content-type"), True, False),
    (NATS, ("headers", "pairs", True), FieldRef("headers", "content-type"), True, False),
    (HTTP, ("headers", "pairs", True), FieldRef("headers", "content-type"), True, True),
])
def test_metadata_content_type_and_modes(protocol: str, metadata: tuple[str, str, bool] | None,
                                         content_type: FieldRef | None, binary: bool,
                                         batches: bool) -> None:
    prof = profile(protocol)
    place = prof.metadata
    assert (None if place is None else (place.field, place.shape, place.ignore_case)) == metadata
    assert prof.content_type == content_type
    assert (prof.binary_mode, prof.batches) == (binary, batches)


@pytest.mark.parametrize(("protocol", "version", "options", "subscriber_consumer"), [
    (MQTT5, "5.0", 13, True), (MQTT311, "3.1.1", 7, True), (AMQP, "1.0", 13, True),
    (KAFKA, "", 10, False), (NATS, "", 3, True), (HTTP, "", 8, False),
])
def test_versions_and_endpoint_rules(protocol: str, version: str, options: int,
                                     subscriber_consumer: bool) -> None:
    prof = profile(protocol)
    assert prof.version == version
    assert len(prof.endpoint.options) == options
    assert prof.endpoint.subscriber_consumer is subscriber_consumer


def test_definition_rules() -> None:
    assert profile(MQTT5).definitions.ranges[("qos", None)] == (0, 2)
    assert profile(MQTT311).definitions.ranges == {("qos", None): (0, 2)}
    assert profile(AMQP).definitions.ranges[("header", "priority")] == (0, 255)
    assert profile(KAFKA).definitions.ranges[("partition", None)] == (0, 2**31 - 1)
    assert [(e.first, e.second) for e in profile(KAFKA).definitions.exclusive] == [
        ("key", "key_base64")]
    assert [(e.first, e.second) for e in profile(HTTP).definitions.exclusive] == [
        ("method", "status")]
    assert profile(MQTT311).definitions.renames["topic"] == "topic_name"
    assert profile(NATS).definitions.quiet_renames == {"reply"}
    assert profile(MQTT5).definitions.nested == ("properties",)
    assert profile(AMQP).endpoint.aliases == {"address": "node"}
    assert profile(MQTT5).endpoint.option_ranges == {"qos": (0, 2)}
    method = profile(HTTP).definition_field("method")
    assert method is not None and method.value_format is not None
    assert profile(HTTP).percent_encoded == ("path", "query")
    assert profile(HTTP).rendered_defaults == {"method": "POST"}


# -- field access ------------------------------------------------------------------------------


@pytest.mark.parametrize(("protocol", "field", "name", "access"), [
    (MQTT5, "topic_name", None, FieldAccess("scalar", "topic_name")),
    (MQTT5, "user_properties", "a", FieldAccess("pairs", "user_properties", "a")),
    (AMQP, "application-properties", "a", FieldAccess("section", "application-properties",
                                                      "a")),
    (KAFKA, "headers", "a", FieldAccess("pairs", "headers", "a")),  # a map in definitions
    (NATS, "headers", "a", FieldAccess("pairs", "headers", "a")),
    (HTTP, "headers", "A", FieldAccess("pairs", "headers", "A", case_insensitive=True)),
    (HTTP, "path", None, FieldAccess("scalar", "path", percent_encoded=True)),
    (HTTP, "query", "q", FieldAccess("section", "query", "q", percent_encoded=True)),
    (HTTP, "method", None, FieldAccess("scalar", "method")),
])
def test_field_access(protocol: str, field: str, name: str | None,
                      access: FieldAccess) -> None:
    assert field_access(protocol, field, name) == access


@pytest.mark.parametrize(("protocol", "field", "decoded", "separator"), [
    (HTTP, "path", True, "/"), (HTTP, "query", True, "/"), (HTTP, "headers", False, "/"),
    (NATS, "subject", False, "."), (NATS, "reply-to", False, "/"),
    (MQTT5, "topic_name", False, "/"), (KAFKA, "topic", False, "/"), ("X", "path", False, "/"),
])
def test_percent_decoding_and_token_separators(protocol: str, field: str, decoded: bool,
                                               separator: str) -> None:
    assert percent_decoded(protocol, field) is decoded
    assert token_separator(protocol, field) == separator


def test_http_header_names_must_be_tokens() -> None:
    spec = profile(HTTP).definition_field("headers")
    assert spec is not None and spec.name_format is not None
    assert spec.name_format.noun == "an HTTP header name"
    # elsewhere only AMQP's open maps name their entries with AMQP symbols (rc2: "The
    # names of the properties MUST be of type symbol")
    named = {(p.name, s.name): s.name_format.noun for p in PROFILES if p.name != HTTP
             for s in p.definitions.fields if s.name_format is not None}
    assert named == {(AMQP, section): "an AMQP symbol" for section in (
        "application-properties", "message-annotations", "delivery-annotations", "footer")}


def test_widest_protocol_of_a_family() -> None:
    assert widest_protocol([MQTT311, MQTT5]) == MQTT5
    assert widest_protocol([MQTT5, MQTT311]) == MQTT5
    assert widest_protocol([KAFKA, KAFKA]) == KAFKA


# -- what the core derives ---------------------------------------------------------------------


@pytest.mark.parametrize(("record", "identity"), [
    (NativeMessage(KAFKA, {"topic": "t", "partition": 0, "offset": 7}), "kafka:t/0/7"),
    (NativeMessage(KAFKA, {"topic": "t", "partition": 0}), None),
    (NativeMessage(AMQP, {"properties": {"message-id": 5}}), "amqp:5"),
    (NativeMessage(NATS, {"stream": "S", "sequence": 3}), "nats:S/3"),
    (NativeMessage(NATS, {"subject": "s"}), None),
    (NativeMessage(MQTT5, {"correlation_data": "c"}), "mqtt:/c"),
    (NativeMessage(MQTT5, {"topic_name": "a", "correlation_data": ""}), None),
    (NativeMessage(MQTT311, {"topic_name": "a"}), None),
    (NativeMessage(HTTP, {"headers": [{"name": "Idempotency-Key", "value": "k"}]}), "http:k"),
    (NativeMessage(HTTP, {"headers": [{"name": "idempotency-key", "value": ""}]}), None),
])
def test_native_identity(record: NativeMessage, identity: str | None) -> None:
    assert native_identity(record) == identity


@pytest.mark.parametrize(("record", "content_type"), [
    (NativeMessage(MQTT5, {"content_type": "text/plain"}), "text/plain"),
    (NativeMessage(AMQP, {"properties": {"content-type": "text/plain"}}), "text/plain"),
    (NativeMessage(KAFKA, {"headers": [{"name": "Content-Type", "value": "a/b"}]}), "a/b"),
    (NativeMessage(HTTP, {"headers": [{"name": "content-type", "value": "a/b"}]}), "a/b"),
    (NativeMessage(MQTT311, {"topic_name": "t"}), None),
])
def test_content_type(record: NativeMessage, content_type: str | None) -> None:
    assert record.content_type == content_type


def test_metadata_lookup_rules() -> None:
    headers: list[JSON] = [{"name": "TraceParent", "value": 5}]
    assert NativeMessage(NATS, {"headers": headers}).metadata("traceparent") == "5"
    props: list[JSON] = [{"name": "TraceParent", "value": "x"}, {"name": "n", "value": 5}]
    user = NativeMessage(MQTT5, {"user_properties": props})
    assert user.metadata("traceparent") is None  # user property names are exact
    assert user.metadata("TraceParent") == "x"
    assert user.metadata("n") is None  # only string values count
    amqp = NativeMessage(AMQP, {"application-properties": {"a": "x", "n": 5}})
    assert (amqp.metadata("a"), amqp.metadata("n")) == ("x", None)
    assert NativeMessage(MQTT311, {}).metadata("a") is None


def test_add_metadata_keeps_what_is_there_and_copies() -> None:
    shared: list[JSON] = [{"name": "Content-Type", "value": "a/b"}]
    fields: dict[str, JSON] = {"headers": shared}
    place = profile(KAFKA).metadata
    assert place is not None
    add_metadata(fields, place, {"content-type": "x/y", "k": "v"}, ignore_case=True)
    assert fields["headers"] == [{"name": "Content-Type", "value": "a/b"},
                                 {"name": "k", "value": "v"}]
    assert shared == [{"name": "Content-Type", "value": "a/b"}]  # the record's own list
    add_metadata(fields, place, {"content-type": "x/y"})  # exact names: a new entry
    assert len(fields["headers"]) == 3  # type: ignore[arg-type]


@pytest.mark.parametrize(("protocol", "fields"), [
    (MQTT5, {"content_type": "a/b"}),
    (AMQP, {"properties": {"content-type": "a/b"}}),
    (HTTP, {"headers": [{"name": "content-type", "value": "a/b"}]}),
    (MQTT311, {}),
])
def test_set_content_type(protocol: str, fields: dict[str, JSON]) -> None:
    out: dict[str, JSON] = {}
    set_content_type(out, profile(protocol), "a/b")
    set_content_type(out, profile(protocol), "c/d")  # the first one stays
    assert out == fields


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_dead_letters_round_trip_over_every_protocol(protocol: str) -> None:
    original = NativeMessage(KAFKA, {"topic": "t", "headers": [
        {"name": "content-type", "value": "text/plain"}]}, payload=b"x")
    dead = deadletter_record(original, protocol=protocol, reason="unmatched")
    assert original_record(dead) == original
    if profile(protocol).metadata is not None:
        assert deadletter_metadata(dead)["xrgw-reason"] == "unmatched"
        assert dead.content_type == "text/plain"
        assert dead.payload == b"x"
    else:  # no metadata (MQTT 3.1.1): a JSON document
        assert isinstance(dead.data, dict) and dead.data["deadletter"]["xrgw-reason"] == (
            "unmatched")
