"""Native rendering (gateway.envelope.native.render_native): a target definition's
protocoloptions filled from an event or a context, values typed and placed where the
protocol keeps them, the event's body and content type carried over, the protocol's
rendered defaults added; and the errors a definition or a missing value gives."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from gateway.cloudevents.event import CloudEvent
from gateway.definitions.model import OptionConstraint
from gateway.envelope.native import context_names, render_native
from gateway.envelope.render import RenderError
from gateway.record import NativeMessage

from .defs import define, opt, prop

XID = "/messagegroups/g/messages/{}"


def _event(data: Any = None, *, has_data: bool | None = None, **extra: Any) -> CloudEvent:
    attrs = {"specversion": "1.0", "id": "e-1", "type": "com.example.sale",
             "source": "/stores/12", **extra}
    return CloudEvent(attrs, data, has_data=has_data)


def _ok(result: NativeMessage | RenderError) -> NativeMessage:
    assert not isinstance(result, RenderError), result
    return result


# -- errors -------------------------------------------------------------------------------


def test_a_definition_without_a_protocol_is_a_no_protocol_error() -> None:
    error = render_native(define("np"), _event())
    assert error == RenderError(
        "no-protocol",
        "/messagegroups/g/messages/np declares no protocol; "
        "it cannot be rendered as a native message")


def test_a_template_that_does_not_parse_is_an_invalid_definition_error() -> None:
    error = render_native(define("bad", "KAFKA", [opt("topic", "orders.{region")]), None,
                          {"region": "eu"})
    assert error == RenderError(
        "invalid-definition",
        "/messagegroups/g/messages/bad: unbalanced brace in template 'orders.{region'")


@pytest.mark.parametrize(("option", "where"), [
    (opt("topic", "orders.{region}"), "topic"),
    (opt("user_properties", "{region}", name="zone"), "user_properties[zone]"),
])
def test_a_missing_placeholder_names_the_option_and_the_placeholder(option: Any,
                                                                    where: str) -> None:
    error = render_native(define("mc", "MQTT/5.0", [option]), None, {"other": "x"})
    assert error == RenderError(
        "missing-context",
        f"/messagegroups/g/messages/mc: protocoloptions.{where}: placeholder {{region}} "
        "has no value in the event or context")


# -- option values ------------------------------------------------------------------------


def test_options_without_a_value_are_skipped_and_the_rest_still_render() -> None:
    target = define("sk", "KAFKA", [
        opt("key", "ignored", has_value=False),   # declared, no value
        OptionConstraint("partition", None, prop(None, has_value=True)),  # a null value
        opt("topic", "orders"),
    ])
    assert _ok(render_native(target)) == NativeMessage("KAFKA", {"topic": "orders"})


@pytest.mark.parametrize(("typ", "text", "expected"), [
    ("integer", "7", 7),
    ("integer", "-3", -3),
    ("integer", "seven", "seven"),      # not a number: the text as it is
    ("boolean", "true", True),
    ("boolean", "false", False),
    ("boolean", "yes", "yes"),          # not a boolean: the text as it is
    ("boolean", "TRUE", "TRUE"),
    ("string", "7", "7"),
    ("string", "true", "true"),
    ("uritemplate", "false", "false"),
])
def test_templated_values_are_typed_by_the_options_type(typ: str, text: str,
                                                        expected: Any) -> None:
    target = define("ty", "AMQP/1.0", [opt("application-properties", "{v}", name="v", type=typ)])
    fields = _ok(render_native(target, None, {"v": text})).fields
    value = fields["application-properties"]["v"]  # type: ignore[index]
    assert value == expected and type(value) is type(expected)


def test_constant_values_are_placed_as_declared() -> None:
    target = define("cv", "AMQP/1.0", [
        opt("header", 5, name="priority", type="integer"),
        opt("properties", "fixed", name="subject"),
    ])
    assert _ok(render_native(target)).fields == {
        "header": {"priority": 5}, "properties": {"subject": "fixed"}}


def test_values_land_where_the_protocol_keeps_them() -> None:
    # AMQP sections keep typed members; HTTP query values are text; list fields and
    # Kafka's header map become {name, value} pairs of text.
    amqp = define("am", "AMQP/1.0", [
        opt("header", "{n}", name="priority", type="integer"),
        opt("custom", "{n}", name="member", type="integer"),   # no such field: a section
    ])
    assert _ok(render_native(amqp, None, {"n": "4"})).fields == {
        "header": {"priority": 4}, "custom": {"member": 4}}
    http = define("ht", "HTTP", [
        opt("path", "/orders/{n}"),
        opt("query", "{n}", name="page", type="integer"),
        opt("query", "{flag}", name="full", type="boolean"),
        opt("headers", "{n}", name="X-Count", type="integer"),
    ])
    assert _ok(render_native(http, None, {"n": "4", "flag": "true"})).fields == {
        "path": "/orders/4", "query": {"page": "4", "full": "true"},
        "headers": [{"name": "X-Count", "value": "4"}], "method": "POST"}
    kafka = define("kh", "KAFKA", [
        opt("topic", "t"), opt("headers", "{n}", name="a", type="integer"),
        opt("headers", "{flag}", name="b", type="boolean"),
    ])
    assert _ok(render_native(kafka, None, {"n": "4", "flag": "false"})).fields == {
        "topic": "t", "headers": [{"name": "a", "value": "4"}, {"name": "b", "value": "false"}]}


def test_http_gets_the_default_method_unless_the_definition_gives_one() -> None:
    assert _ok(render_native(define("h1", "HTTP", [opt("path", "/x")]))) == NativeMessage(
        "HTTP", {"path": "/x", "method": "POST"})
    assert _ok(render_native(define("h2", "HTTP", [opt("method", "PUT")]))).fields == {
        "method": "PUT"}
    assert _ok(render_native(define("k", "KAFKA", [opt("topic", "t")]))).fields == {
        "topic": "t"}


def test_an_unknown_protocol_renders_its_options_without_defaults_or_content_type() -> None:
    target = define("un", "FOO", [opt("where", "{x}"), opt("section", "v", name="member")])
    record = _ok(render_native(target, _event({"a": 1}, datacontenttype="application/json"),
                               {"x": "here"}))
    assert record == NativeMessage("FOO", {"where": "here", "section": {"member": "v"}},
                                   data={"a": 1})


# -- the context: explicit, captured from the envelope, the event's attributes ------------


def test_placeholders_are_captured_from_the_events_attributes_by_envelope_templates() -> None:
    target = define("cap", "KAFKA", [opt("topic", "store.{storeid}"), opt("key", "{type}")],
                    {"type": prop("com.example.sale"),
                     "source": prop("/stores/{storeid}", type="uritemplate")})
    record = _ok(render_native(target, _event()))
    assert record.fields == {"topic": "store.12", "key": "com.example.sale"}


def test_an_explicit_context_wins_over_captures_and_attributes() -> None:
    target = define("ex", "KAFKA", [opt("topic", "store.{storeid}"), opt("key", "{type}")],
                    {"source": prop("/stores/{storeid}", type="uritemplate")})
    record = _ok(render_native(target, _event(), {"storeid": "99", "type": "override"}))
    assert record.fields == {"topic": "store.99", "key": "override"}


def test_a_capture_wins_over_an_attribute_of_the_same_name() -> None:
    target = define("cw", "KAFKA", [opt("topic", "{subject}")],
                    {"source": prop("/stores/{subject}", type="uritemplate")})
    record = _ok(render_native(target, _event(subject="desk-3")))
    assert record.fields == {"topic": "12"}


def test_envelope_metadata_that_is_not_a_template_captures_nothing() -> None:
    # A constant (also a non-text one) is skipped; an attribute the event lacks too.
    target = define("nt", "KAFKA", [opt("topic", "{seq}.{storeid}")],
                    {"seq": prop(5, type="integer"), "subject": prop("{other}"),
                     "source": prop("/stores/{storeid}", type="uritemplate")})
    record = _ok(render_native(target, _event(seq=5)))
    assert record.fields == {"topic": "5.12"}
    missing = render_native(define("nt2", "KAFKA", [opt("topic", "{other}")],
                                   {"subject": prop("{other}")}), _event())
    assert isinstance(missing, RenderError) and missing.reason == "missing-context"


def test_an_envelope_template_that_does_not_parse_or_match_captures_nothing() -> None:
    target = define("nm", "KAFKA", [opt("topic", "{storeid}")],
                    {"type": prop("{broken"), "subject": prop("/desks/{storeid}"),
                     "source": prop("/stores/{storeid}", type="uritemplate")})
    record = _ok(render_native(target, _event(subject="elsewhere")))
    assert record.fields == {"topic": "12"}


def test_timestamps_and_other_attribute_values_fill_placeholders_as_text() -> None:
    target = define("ts", "AMQP/1.0", [
        opt("properties", "{time}", name="subject"),
        opt("application-properties", "{count}|{flag}", name="v"),
    ])
    event = _event(time=datetime(2026, 11, 21, 9, 0, tzinfo=UTC), count=3, flag=True)
    assert _ok(render_native(target, event)).fields == {
        "properties": {"subject": "2026-11-21T09:00:00Z"},
        "application-properties": {"v": "3|true"}}


def test_without_an_event_or_context_only_constants_render() -> None:
    assert _ok(render_native(define("c", "NATS", [opt("subject", "a.b")]))) == NativeMessage(
        "NATS", {"subject": "a.b"})


# -- the body and its content type ---------------------------------------------------------


@pytest.mark.parametrize(("event", "fields", "body"), [
    # JSON data: data, and application/json when the event names no content type
    (_event({"a": 1}), {"headers": [{"name": "content-type", "value": "application/json"}]},
     {"data": {"a": 1}}),
    (_event([1, 2], datacontenttype="application/vnd.sale+json"),
     {"headers": [{"name": "content-type", "value": "application/vnd.sale+json"}]},
     {"data": [1, 2]}),
    # text of a JSON content type (or of none) is JSON data
    (_event("hi"), {"headers": [{"name": "content-type", "value": "application/json"}]},
     {"data": "hi"}),
    (_event("hi", datacontenttype="Application/JSON; charset=utf-8"),
     {"headers": [{"name": "content-type", "value": "Application/JSON; charset=utf-8"}]},
     {"data": "hi"}),
    (_event("hi", datacontenttype="application/cloudevents+json"),
     {"headers": [{"name": "content-type", "value": "application/cloudevents+json"}]},
     {"data": "hi"}),
    # text of another content type is a payload of its UTF-8 bytes
    (_event("hé", datacontenttype="text/plain"),
     {"headers": [{"name": "content-type", "value": "text/plain"}]},
     {"payload": "hé".encode()}),
    (_event("x", datacontenttype="application/jsonx"),
     {"headers": [{"name": "content-type", "value": "application/jsonx"}]},
     {"payload": b"x"}),
    (_event("x", datacontenttype="text/plain; note=+json"),
     {"headers": [{"name": "content-type", "value": "text/plain; note=+json"}]},
     {"payload": b"x"}),
    # bytes are a payload; without a content type none is invented
    (_event(b"\x00\x01"), {}, {"payload": b"\x00\x01"}),
    (CloudEvent.trusted({"specversion": "1.0", "id": "e-1", "type": "t", "source": "/s",
                         "datacontenttype": "application/octet-stream"}, bytearray(b"ab")),
     {"headers": [{"name": "content-type", "value": "application/octet-stream"}]},
     {"payload": b"ab"}),
    # no data: no body, the declared content type still carried
    (_event(), {}, {}),
    (_event(datacontenttype="text/plain"),
     {"headers": [{"name": "content-type", "value": "text/plain"}]}, {}),
])
def test_the_events_body_and_content_type_are_carried(event: CloudEvent, fields: Any,
                                                       body: Any) -> None:
    record = _ok(render_native(define("b", "KAFKA", [opt("topic", "t")]), event))
    assert record == NativeMessage("KAFKA", {"topic": "t", **fields}, **body)
    assert type(record.payload) is (bytes if "payload" in body else type(None))


def test_the_content_type_goes_where_the_protocol_carries_it() -> None:
    event = _event({"a": 1})
    mqtt = _ok(render_native(define("m", "MQTT/5.0", [opt("topic_name", "t")]), event))
    assert mqtt.fields == {"topic_name": "t", "content_type": "application/json"}
    amqp = _ok(render_native(define("a", "AMQP/1.0", [opt("properties", "s", name="subject")]),
                             event))
    assert amqp.fields == {"properties": {"subject": "s", "content-type": "application/json"}}
    http = _ok(render_native(define("h", "HTTP", [opt("path", "/p")]), event))
    assert http.fields == {"path": "/p", "method": "POST",
                           "headers": [{"name": "content-type", "value": "application/json"}]}
    mqtt3 = _ok(render_native(define("m3", "MQTT/3.1.1", [opt("topic_name", "t")]), event))
    assert mqtt3 == NativeMessage("MQTT/3.1.1", {"topic_name": "t"}, data={"a": 1})


def test_a_content_type_the_definition_sets_is_kept() -> None:
    target = define("ct", "MQTT/5.0", [opt("topic_name", "t"), opt("content_type", "text/csv")])
    record = _ok(render_native(target, _event({"a": 1})))
    assert record.fields == {"topic_name": "t", "content_type": "text/csv"}


# -- context_names --------------------------------------------------------------------------


def test_context_names_are_the_placeholders_of_every_parsable_option() -> None:
    target = define("cn", "KAFKA", [
        opt("topic", "{broken"), opt("key", "{region}-{id}"), opt("partition", 3),
        opt("headers", "{tenant}", name="t"), opt("headers", "plain", name="p"),
    ])
    assert context_names(target) == {"region", "id", "tenant"}
    assert context_names(define("none", "KAFKA", [opt("topic", "t")])) == set()
