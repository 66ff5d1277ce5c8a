"""`xrgw lint` (`gateway.matching.lint`): which pairs are compared, and the witness each
reported overlap carries (the example record with typed values, the example CloudEvent).

Definitions are hand-built (`defs.py`); every expected example is written out literally.
"""

from __future__ import annotations

from typing import Any

import pytest

from gateway.definitions import read_document
from gateway.definitions.model import Property
from gateway.matching.compiled import Check
from gateway.matching.lint import OVERLAP_FIX, Overlap, _unify_text, find_overlaps, overlap_problem

from .defs import define, opt, prop


def xid(mid: str) -> str:
    return f"/messagegroups/g/messages/{mid}"


def pairs(overlaps: list[Overlap]) -> list[tuple[str, str]]:
    return [(o.first.rsplit("/", 1)[1], o.second.rsplit("/", 1)[1]) for o in overlaps]


def check(value: Any = None, type: str = "string", required: bool = False) -> Check:
    return Check("f", Property(type=type, value=value, has_value=value is not None,
                               required=required), None)


def tpl(text: str) -> Check:
    return check(text, type="uritemplate")


TYPE_ONLY = check(type="integer")
REQUIRED = check(required=True)


@pytest.mark.parametrize(("a", "b", "expected"), [
    # Nothing to satisfy: no value unless one side requires the field.
    (None, None, None),
    (TYPE_ONLY, None, None),
    (None, TYPE_ONLY, None),
    (TYPE_ONLY, TYPE_ONLY, None),
    (REQUIRED, None, "x1"),
    (None, REQUIRED, "x1"),
    (TYPE_ONLY, REQUIRED, "1"),  # the other definition's type decides the sample
    (REQUIRED, TYPE_ONLY, "1"),
    (check(type="symbol", required=True), None, "x1"),
    # A required field of a type `x1` does not conform to gets a sample of that type.
    (check(type="integer", required=True), None, "1"),
    (None, check(type="boolean", required=True), "true"),
    (check(type="number", required=True), REQUIRED, "1"),
    (check(type="uri", required=True), None, "urn:x1"),
    (check(type="timestamp", required=True), TYPE_ONLY, "1970-01-01T00:00:00Z"),
    (check(type="datetime", required=True), None, "1970-01-01T00:00:00Z"),
    (check(type="duration", required=True), check(type="boolean"), "PT1S"),
    # A constant beats a template; the first definition's constant beats the second's.
    (check("c1"), check("c2"), "c1"),
    (None, check("c2"), "c2"),
    (TYPE_ONLY, check("c2"), "c2"),
    (tpl("{x}"), check(5, type="integer"), "5"),
    (check(-7, type="integer"), tpl("{x}"), "-7"),
    (check(True, type="boolean"), None, "true"),
    (check(False, type="boolean"), None, "false"),
    (check(True, type="boolean"), check(False, type="boolean"), "true"),
    (check(False, type="boolean"), check(True, type="boolean"), "false"),
    # One template: its placeholders get the sample value.
    (tpl("a/{x}"), None, "a/x1"),
    (TYPE_ONLY, tpl("a/{x}"), "a/x1"),
    (REQUIRED, tpl("{x}-{y}"), "x1-x1"),
    # Two `/`-segmented templates of the same length: segment by segment, a literal
    # segment beats a placeholder one; otherwise the first template's segment.
    (tpl("/s/{x}/desk"), tpl("/s/1/{y}"), "/s/1/desk"),
    (tpl("/s/1/{y}"), tpl("/s/{x}/desk"), "/s/1/desk"),
    (tpl("/p/{x}"), tpl("/q/{y}"), "/p/x1"),
    (tpl("/{x}"), tpl("/{y}.json"), "/x1"),
    (tpl("/{y}.json"), tpl("/{x}"), "/x1.json"),
    # Segmented, different lengths: the first template.
    (tpl("a/{x}"), tpl("{y}/b/c"), "a/x1"),
    (tpl("{y}/b/c"), tpl("a/{x}"), "x1/b/c"),
    # Otherwise the template with more literal text.
    (tpl("{y}"), tpl("a/{x}"), "a/x1"),
    (tpl("a/{x}"), tpl("{y}"), "a/x1"),
    (tpl("{x}"), tpl("{y}.json"), "x1.json"),
    (tpl("{y}.json"), tpl("{x}"), "x1.json"),
])
def test_unify_text_builds_a_value_both_checks_accept(
    a: Check | None, b: Check | None, expected: str | None
) -> None:
    assert _unify_text(a, b) == expected


def test_mqtt_witness_types_integer_and_boolean_fields_from_either_definition() -> None:
    a = define("a", "MQTT/5.0", [
        opt("payload_format", type="integer"),  # type only: no example value
        opt("topic_name", "a/{x}", type="uritemplate"),
        opt("qos", type="integer"),
        opt("message_expiry_interval", 60, type="integer"),  # only in a
        opt("user_properties", "{v}", name="k", type="uritemplate"),
    ])
    b = define("b", "MQTT/3.1.1", [
        opt("topic_name", "{y}/b", type="uritemplate"),
        opt("qos", 1, type="integer"),
        opt("retain", False, type="boolean"),  # only in b
    ])
    [overlap] = find_overlaps([a, b])
    assert overlap.to_json() == {
        "first": xid("a"),
        "second": xid("b"),
        "example": {
            "protocol": "MQTT/5.0",  # a mixed MQTT pair is tried as 5.0
            "topic_name": "a/b",
            "qos": 1,
            "message_expiry_interval": 60,
            "user_properties": [{"name": "k", "value": "x1"}],
            "retain": False,
        },
    }
    assert overlap.event is None


def test_amqp_witness_types_section_members_and_keeps_string_constants_text() -> None:
    a = define("a", "AMQP/1.0", [
        opt("header", 5, name="priority", type="integer"),
        opt("header", True, name="durable", type="boolean"),
        opt("properties", "{s}", name="subject", type="uritemplate"),
        opt("application-properties", -7, name="delta", type="integer"),
        opt("application-properties", "123", name="code"),
        opt("application-properties", "true", name="note"),
    ])
    b = define("b", "AMQP/1.0", [
        opt("properties", "orders", name="subject"),
        opt("application-properties", False, name="urgent", type="boolean"),
    ])
    assert [o.to_json() for o in find_overlaps([a, b])] == [{
        "first": xid("a"),
        "second": xid("b"),
        "example": {
            "protocol": "AMQP/1.0",
            "header": {"priority": 5, "durable": True},
            "properties": {"subject": "orders"},
            "application-properties": {"delta": -7, "code": "123", "note": "true",
                                       "urgent": False},
        },
    }]


def test_http_witness_query_values_stay_text_and_headers_are_pairs() -> None:
    a = define("a", "HTTP", [
        opt("method", "POST"),
        opt("path", "/orders/{id}", type="uritemplate"),
        opt("query", 5, name="page", type="integer"),
        opt("headers", "{t}", name="X-Tenant", type="uritemplate"),
    ])
    b = define("b", "HTTP", [
        opt("path", "/{kind}/42", type="uritemplate"),
        opt("headers", "v1", name="X-Version"),
    ])
    [overlap] = find_overlaps([a, b])
    assert overlap.example == {
        "protocol": "HTTP",
        "method": "POST",
        "path": "/orders/42",
        "query": {"page": "5"},  # the query is a string map: no typed value
        "headers": [{"name": "X-Tenant", "value": "x1"}, {"name": "X-Version", "value": "v1"}],
    }


def test_a_request_and_a_response_of_one_path_do_not_overlap() -> None:
    """An HTTP request (a method) and a response (a status) can share a path, but no
    message is both: the example that would hold both fields witnesses nothing. Two
    requests of that path do overlap (the pair is not skipped for being HTTP), and so do
    two responses."""
    request = define("request", "HTTP", [opt("method", "POST"),
                                         opt("path", "/orders/{id}", type="uritemplate")])
    response = define("response", "HTTP", [opt("status", 201, type="integer"),
                                           opt("path", "/orders/{id}", type="uritemplate")])
    other_request = define("other-request", "HTTP", [opt("path", "/orders/{n}",
                                                         type="uritemplate")])
    other_response = define("other-response", "HTTP", [
        opt("status", 201, type="integer"), opt("path", "/orders/7")])
    assert find_overlaps([request, response]) == []
    assert pairs(find_overlaps([request, other_request])) == [("request", "other-request")]
    assert pairs(find_overlaps([response, other_response])) == [
        ("response", "other-response")]


def test_integer_field_with_a_non_numeric_constant_is_no_overlap() -> None:
    # An ill-typed constant (the validator reports it) stays text in the example; lint
    # must not turn it into a number, nor crash, and no definition accepts it.
    a = define("a", "AMQP/1.0", [opt("header", "X9", name="priority", type="integer")])
    b = define("b", "AMQP/1.0", [opt("header", "X9", name="priority", type="integer")])
    assert find_overlaps([a, b]) == []


def test_cloudevents_only_pair_gets_an_example_event_and_an_empty_record() -> None:
    a = define("a", envelope={
        "type": prop("com.example.created"),
        "subject": prop("{s}", type="uritemplate"),
    })
    b = define("b", envelope={
        "source": prop("/shop/{id}", type="uritemplate"),
        "subject": prop("order-1"),
        "dataschema": prop(required=True),
    })
    [overlap] = find_overlaps([a, b])
    assert overlap.to_json() == {
        "first": xid("a"),
        "second": xid("b"),
        "example": {},
        "cloudevent": {
            "specversion": "1.0",
            "id": "lint-example",
            "source": "/shop/x1",
            "type": "com.example.created",
            "subject": "order-1",
            "dataschema": "x1",
        },
    }


def test_example_event_fills_source_and_type_when_no_definition_constrains_them() -> None:
    a = define("a", envelope={"subject": prop("{s}", type="uritemplate")})
    b = define("b", envelope={"subject": prop("{t}", type="uritemplate")})
    [overlap] = find_overlaps([a, b])
    assert overlap.event == {"specversion": "1.0", "id": "lint-example",
                             "source": "x1", "type": "x1", "subject": "x1"}


def test_only_pairs_of_one_family_or_both_cloudevents_only_are_compared() -> None:
    m1 = define("m1", "MQTT/5.0", [opt("topic_name", "t/{x}", type="uritemplate")])
    amqp = define("amqp", "AMQP/1.0", [opt("properties", "t", name="subject")])
    m2 = define("m2", "MQTT/3.1.1", [opt("topic_name", "t/1", type="uritemplate")])
    ce1 = define("ce1", envelope={"type": prop("t")})
    plain = define("plain")  # no protocol, not a CloudEvent: nothing to compare
    ce2 = define("ce2", envelope={"type": prop("{x}", type="uritemplate")})
    found = find_overlaps([m1, amqp, m2, ce1, plain, ce2])
    assert pairs(found) == [("m1", "m2"), ("ce1", "ce2")]
    assert found[0].event is None
    assert found[1].event is not None and found[1].event["type"] == "t"
    assert find_overlaps([plain, define("plain2")]) == []


def test_a_pair_without_a_common_message_does_not_stop_the_search() -> None:
    # `{p}/{p}` needs both segments equal: the example 1/2 fails it (first of the pair)...
    a = define("a", "MQTT/5.0", [opt("topic_name", "{p}/{p}", type="uritemplate")])
    b = define("b", "MQTT/5.0", [opt("topic_name", "1/2", type="uritemplate")])
    c = define("c", "MQTT/5.0", [opt("topic_name", "{q}/{r}", type="uritemplate")])
    assert pairs(find_overlaps([a, b, c])) == [("a", "c"), ("b", "c")]
    # ... and when it is the second of the pair.
    d = define("d", "MQTT/5.0", [opt("topic_name", "{q}/2", type="uritemplate")])
    assert pairs(find_overlaps([b, a, d])) == [("b", "d")]


def test_required_typed_fields_without_a_value_get_a_sample_of_their_type() -> None:
    # Regression: both definitions accept {topic_name: t, qos: 1, retain: true}, but the
    # example used to carry qos "x1" and retain "x1", which neither accepts: no overlap.
    a = define("a", "MQTT/5.0", [
        opt("topic_name", "t"),
        opt("qos", type="integer", required=True),
        opt("retain", type="boolean", required=True),
    ])
    b = define("b", "MQTT/5.0", [opt("topic_name", "t"), opt("qos", type="integer")])
    [overlap] = find_overlaps([a, b])
    assert overlap.example == {"protocol": "MQTT/5.0", "topic_name": "t", "qos": 1,
                               "retain": True}


def test_required_typed_cloudevent_attributes_get_a_sample_of_their_type() -> None:
    a = define("a", envelope={
        "type": prop("t"),
        "time": prop(type="timestamp", required=True),
        "count": prop(type="integer", required=True),
        "ref": prop(type="uri", required=True),
    })
    b = define("b", envelope={"type": prop("t"), "count": prop(type="integer")})
    [overlap] = find_overlaps([a, b])
    assert overlap.event == {"specversion": "1.0", "id": "lint-example", "source": "x1",
                             "type": "t", "time": "1970-01-01T00:00:00Z", "count": "1",
                             "ref": "urn:x1"}


def test_an_overlap_is_reported_at_its_first_definition_with_the_fix() -> None:
    meta = {"type": {"value": "x"}, "source": {"value": "/s"}}
    catalog = read_document({"messagegroups": {"g": {"envelope": "CloudEvents/1.0",
                                                     "messages": {
        "a": {"protocol": "KAFKA", "protocoloptions": {"topic": "t"}, "envelopemetadata": meta},
        "b": {"protocol": "KAFKA", "protocoloptions": {"topic": "{t}"},
              "envelopemetadata": meta}}}}}, "catalog.json")
    overlap = Overlap(xid("a"), xid("b"), {}, None)
    problem = overlap_problem(catalog, overlap, strict=False)
    assert (problem.severity, problem.file, problem.path, problem.fix) == (
        "warning", "catalog.json", "$.messagegroups.g.messages.a", OVERLAP_FIX)
    assert problem.message == f"{xid('a')} and {xid('b')} can match the same message"
    assert overlap_problem(catalog, overlap, strict=True).severity == "error"
    # A definition the catalog does not hold (any more): no place to point at.
    gone = overlap_problem(catalog, Overlap(xid("gone"), xid("b"), {}, None), strict=False)
    assert (gone.file, gone.path) == ("", "")
