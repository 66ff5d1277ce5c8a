"""The rules of envelope rendering (gateway.envelope.render), one table each: attribute
values coerced to their declared types, the CloudEvents rules of core attributes, what a
definition's envelope may declare (errors at compile time, with their exact words), and
what `render_checked` fills in: id, time, content type, dataschema, trace context."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from gateway.cloudevents.event import CloudEvent
from gateway.definitions.model import Property
from gateway.envelope import render
from gateway.envelope.render import EnvelopeTemplate, RenderError, coerce
from gateway.record import NativeMessage

from .defs import define, opt, prop

NOW = datetime(2026, 11, 21, 9, 0, tzinfo=UTC)
XID = "/messagegroups/g/messages/"
TRACEPARENT = "00-" + "a" * 32 + "-" + "b" * 16 + "-01"


@pytest.fixture(autouse=True)
def fresh_receive_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(render, "_LAST_TIME", [(None, datetime.min)])
    monkeypatch.setitem(render._HELPERS, "LAST_TIME", render._LAST_TIME)
    render._accepts.cache_clear()


# -- coerce -------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "typ", "value", "expected"), [
    ("n", "integer", 7, 7),
    ("n", "integer", "7", 7),
    ("n", "integer", "-12", -12),
    ("n", "integer", "007", 7),
    ("n", "integer", 2**31 - 1, 2**31 - 1),
    ("n", "integer", "-2147483648", -(2**31)),
    ("b", "boolean", True, True),
    ("b", "boolean", False, False),
    ("b", "boolean", "true", True),
    ("b", "boolean", "false", False),
    ("t", "timestamp", "2026-01-02T03:04:05Z", datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)),
    ("t", "datetime", "2026-01-02T03:04:05+01:00",
     datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone(timedelta(hours=1)))),
    ("s", "string", "é x", "é x"),
    ("s", "string", 5, "5"),
    ("s", "string", True, "true"),
    ("s", "any", None, ""),
    ("s", "uri", "urn:x", "urn:x"),
    ("s", "uri", "http://h/p?q", "http://h/p?q"),
    # core String attributes keep the checked value's text
    ("subject", "integer", "3", "3"),
    ("id", "integer", 42, "42"),
    ("type", "boolean", True, "true"),
    ("source", "timestamp", "2026-01-02T03:04:05+00:00", "2026-01-02T03:04:05Z"),
    ("datacontenttype", "string", "text/plain", "text/plain"),
    ("dataschema", "integer", "3", 3),  # not a String attribute: the integer
])
def test_coerce_gives_the_declared_type(name: str, typ: str, value: Any, expected: Any) -> None:
    result = coerce(name, typ, value)
    assert result == expected and type(result) is type(expected)


@pytest.mark.parametrize(("name", "typ", "value", "message"), [
    ("n", "integer", 2**31, "n: 2147483648 is not a 32-bit integer"),
    ("n", "integer", "-2147483649", "n: '-2147483649' is not a 32-bit integer"),
    ("n", "integer", "4.2", "n: '4.2' is not a 32-bit integer"),
    ("n", "integer", " 7", "n: ' 7' is not a 32-bit integer"),
    ("n", "integer", True, "n: True is not a 32-bit integer"),
    ("n", "integer", None, "n: None is not a 32-bit integer"),
    ("b", "boolean", "True", "b: 'True' is not a boolean (true or false)"),
    ("b", "boolean", 1, "b: 1 is not a boolean (true or false)"),
    ("t", "timestamp", "yesterday", "t: 'yesterday' is not an RFC 3339 timestamp"),
    ("t", "datetime", 5, "t: 5 is not an RFC 3339 timestamp"),
    ("s", "string", "a\x00b", "s: 'a\\x00b' contains control characters"),
    ("s", "string", "a\x7f", "s: 'a\\x7f' contains control characters"),
    ("s", "uri", "a\x9f", "s: 'a\\x9f' contains control characters"),
    ("s", "uri", "/relative", "s: '/relative' is not an absolute URI"),
    ("s", "uri", "http://a b", "s: 'http://a b' is not an absolute URI"),
    ("s", "uri", "1http:x", "s: '1http:x' is not an absolute URI"),
])
def test_coerce_refuses_values_of_another_type(name: str, typ: str, value: Any,
                                               message: str) -> None:
    with pytest.raises(ValueError) as refused:
        coerce(name, typ, value)
    assert str(refused.value) == message


def test_text_without_control_characters_passes_whatever_else_it_holds() -> None:
    assert coerce("s", "string", "a\x80b".replace("\x80", "\xa0")) == "a\xa0b"
    assert coerce("s", "string", "tab\x1f"[:3]) == "tab"


# -- the CloudEvents rules of core attributes ----------------------------------------------


@pytest.mark.parametrize(("name", "value", "problem"), [
    ("id", None, "id: required and must be a non-empty string"),
    ("id", "", "id: required and must be a non-empty string"),
    ("type", 5, "type: required and must be a non-empty string"),
    ("source", "", "source: required and must be a non-empty string"),
    ("source", "a b", "source: 'a b' is not a URI-reference"),
    ("source", "a\x7fb", "source: 'a\\x7fb' is not a URI-reference"),
    ("subject", "", "subject: must be a non-empty string when present"),
    ("subject", 3, "subject: must be a non-empty string when present"),
    ("dataschema", "relative/path", "dataschema: 'relative/path' is not an absolute URI"),
    ("dataschema", 5, "dataschema: 5 is not an absolute URI"),
    ("datacontenttype", "json", "datacontenttype: 'json' is not a media type (type/subtype)"),
    ("datacontenttype", None, "datacontenttype: None is not a media type (type/subtype)"),
    ("id", "a b", None), ("type", "x y", None), ("source", "/s?x#y", None),
    ("subject", "a b", None), ("dataschema", "http://h/s", None),
    ("datacontenttype", "text/plain; charset=utf-8", None),
    ("datacontenttype", "application/vnd.a+json", None), ("myext", "", None),
])
def test_the_rule_of_each_core_attribute(name: str, value: Any, problem: str | None) -> None:
    assert render._check_attribute(name, value) == problem


def test_check_core_reports_the_first_broken_rule_and_requires_id_source_type() -> None:
    assert render._check_core({"id": "1", "source": "/s", "type": "t"}) is None
    assert render._check_core({"id": "1", "type": "t"}) == (
        "source: required and must be a non-empty string")
    assert render._check_core({"id": "1", "source": "/s", "type": "t", "subject": ""}) == (
        "subject: must be a non-empty string when present")
    assert render._check_core({"source": "a b", "type": ""}) == (
        "id: required and must be a non-empty string")
    assert render._check_core({"subject": ""}, ("subject",)) == (
        "subject: must be a non-empty string when present")
    assert render._check_core({}, ("subject", "dataschema")) is None


@pytest.mark.parametrize(("name", "text", "accepted"), [
    ("id", "a b", True), ("id", "", False), ("id", "a\x00", False),
    ("type", "é", True), ("type", "", False),
    ("subject", "x", True), ("subject", "a\x85", False),
    ("source", "/s", True), ("source", "a b", False), ("source", "", False),
    ("dataschema", "http://h", True), ("dataschema", "h", False),
    ("dataschema", "http://a\x9f", False),
    ("datacontenttype", "text/plain", True), ("datacontenttype", "text", False),
    ("datacontenttype", "a/b; x=\x01", False),
    ("myext", "", True), ("myext", "a b", True), ("myext", "a\x1fb", False),
])
def test_accepts_is_each_attributes_rule_for_plain_text(name: str, text: str,
                                                       accepted: bool) -> None:
    assert (render._accepts(name)(text) is not None) is accepted
    assert (render._accepts(name)(text) is not None) == (
        not render._CONTROL.search(text) and render._check_attribute(name, text) is None)


# -- what a definition's envelope may declare ----------------------------------------------


def _template(mid: str, envelope: dict[str, Property], **kw: Any) -> EnvelopeTemplate:
    return EnvelopeTemplate(define(mid, "KAFKA", [opt("topic", "t")], envelope, **kw))


BASE = {"type": prop("t"), "source": prop("/s")}


@pytest.mark.parametrize(("envelope", "message"), [
    ({**BASE, "Bad_Name": prop("x")},
     "envelopemetadata.Bad_Name: 'Bad_Name' is not a CloudEvents attribute name ([a-z0-9]+)"),
    ({**BASE, "data": prop("x")},
     "envelopemetadata.data: 'data' is not a CloudEvents attribute name ([a-z0-9]+)"),
    ({**BASE, "": prop("x")},
     "envelopemetadata.: '' is not a CloudEvents attribute name ([a-z0-9]+)"),
    ({**BASE, "specversion": prop("0.3")},
     "envelopemetadata.specversion: specversion must be \"1.0\", not '0.3'"),
    ({**BASE, "count": prop("many", type="integer")},
     "envelopemetadata.count: count: 'many' is not a 32-bit integer"),
    ({**BASE, "time": prop("{t", type="timestamp")},
     "envelopemetadata.time: unbalanced brace in template '{t'"),
    ({"source": prop("/s")}, "type: required and must be a non-empty string"),
    ({"type": prop("t"), "source": prop("a b")}, "source: 'a b' is not a URI-reference"),
    ({**BASE, "subject": prop("")}, "subject: must be a non-empty string when present"),
    ({**BASE, "subject": prop(required=True), "myext": prop(required=True),
      "id": prop(required=True), "time": prop(required=True)},
     "envelopemetadata declares subject, myext required but gives no value to render"),
])
def test_an_envelope_that_cannot_render_is_an_error_at_compile_time(
        envelope: dict[str, Property], message: str) -> None:
    template = _template("bad", envelope)
    assert template.error == RenderError("invalid-envelope", f"{XID}bad: {message}")
    assert template.render(NativeMessage("KAFKA", {}), {}, NOW) == template.error


def test_a_definition_without_an_envelope_renders_no_cloudevent() -> None:
    template = EnvelopeTemplate(define("native", "KAFKA", [opt("topic", "t")]))
    assert template.error == RenderError(
        "no-envelope",
        f"{XID}native declares no CloudEvents/1.0 envelope; there is no CloudEvent to "
        "render (deliver it natively or add an envelope)")


def test_what_an_envelope_may_declare_without_error() -> None:
    template = _template("fine", {
        **BASE, "specversion": prop("1.0"), "subject": prop(), "myext": prop(required=False),
        "id": prop(required=True), "time": prop(required=True), "flag": prop(False,
                                                                              type="boolean")})
    assert template.error is None
    attrs = _render(template, NativeMessage("KAFKA", {}))
    assert attrs.pop("id") and attrs.pop("time") == NOW
    assert attrs == {"specversion": "1.0", "type": "t", "source": "/s", "flag": False}


# -- render_checked -----------------------------------------------------------------------


def _render(template: EnvelopeTemplate, record: NativeMessage,
            context: dict[str, str] | None = None) -> dict[str, Any]:
    event = template.render_checked(record, context or {}, NOW)
    assert isinstance(event, CloudEvent), event
    fast = template.render(record, context or {}, NOW)
    assert isinstance(fast, CloudEvent)
    attributes = dict(event.get_attributes())
    # The generated renderer gives the same event (a random id aside).
    assert {k: v for k, v in fast.get_attributes().items() if k != "id"} == {
        k: v for k, v in attributes.items() if k != "id"}
    assert fast.get_data() == event.get_data()
    return attributes


@pytest.mark.parametrize(("envelope", "context", "error"), [
    ({"subject": prop("{a}")}, {},
     RenderError("missing-context", "envelopemetadata.subject: placeholder {a} has no value "
                                    "(it is not captured from the message)")),
    ({"myext": prop("x{a}{b}")}, {"a": "1"},
     RenderError("missing-context", "envelopemetadata.myext: placeholder {b} has no value "
                                    "(it is not captured from the message)")),
    ({"myext": prop("{a}")}, {"a": "x\x00"},
     RenderError("invalid-envelope", "myext: 'x\\x00' contains control characters")),
    ({"count": prop("{a}", type="integer")}, {"a": "x"},
     RenderError("invalid-envelope", "count: 'x' is not a 32-bit integer")),
    ({"time": Property(type="", value="{a}", has_value=True)}, {"a": "later"},
     RenderError("invalid-envelope", "time: 'later' is not an RFC 3339 timestamp")),
    ({"subject": prop("{a}")}, {"a": ""},
     RenderError("invalid-envelope", "subject: must be a non-empty string when present")),
    ({"source": prop("/s/{a}")}, {"a": "a b"},
     RenderError("invalid-envelope", "source: '/s/a b' is not a URI-reference")),
    ({"id": prop("{a}")}, {"a": ""},
     RenderError("invalid-envelope", "id: required and must be a non-empty string")),
])
def test_render_checked_errors(envelope: dict[str, Property], context: dict[str, str],
                               error: RenderError) -> None:
    template = _template("e", {**BASE, **envelope})
    assert template.error is None
    record = NativeMessage("KAFKA", {})
    assert template.render_checked(record, context, NOW) == error
    assert template.render(record, context, NOW) == error


def test_typed_templates_are_coerced() -> None:
    template = _template("ty", {**BASE, "count": prop("{n}", type="integer"),
                                "flag": prop("{f}", type="boolean"),
                                "when": prop("{w}", type="timestamp"),
                                "subject": prop("{n}", type="integer")})
    attrs = _render(template, NativeMessage("KAFKA", {}),
                    {"n": "12", "f": "false", "w": "2026-01-02T03:04:05Z"})
    assert (attrs["count"], attrs["flag"], attrs["when"], attrs["subject"]) == (
        12, False, datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC), "12")


def test_the_id_is_declared_or_derived_from_the_native_identity() -> None:
    record = NativeMessage("KAFKA", {"topic": "t", "partition": 2, "offset": 9})
    derived = _render(_template("i1", BASE), record)["id"]
    assert derived == str(uuid.uuid5(uuid.uuid5(uuid.NAMESPACE_URL, "urn:xrgw:cloudevents:id"),
                                     "kafka:t/2/9"))
    assert _render(_template("i2", {**BASE, "id": prop("mine")}), record)["id"] == "mine"
    assert _render(_template("i3", {**BASE, "id": prop("{a}")}), record, {"a": "x"})["id"] == "x"
    random_id = _render(_template("i4", BASE), NativeMessage("KAFKA", {}))["id"]
    assert uuid.UUID(random_id).version == 4


@pytest.mark.parametrize(("received", "time"), [
    ("2026-11-21T08:00:00Z", datetime(2026, 11, 21, 8, 0, tzinfo=UTC)),
    ("2026-11-21T08:00:00.123456Z", datetime(2026, 11, 21, 8, 0, 0, 123456, tzinfo=UTC)),
    ("2026-11-21T10:00:00+02:00", datetime(2026, 11, 21, 8, 0, tzinfo=UTC)),
    ("2026-13-01T00:00:00Z", NOW),   # the canonical form, but month 13: now
    ("nonsense", NOW),
    ("", NOW),
    (None, NOW),
])
def test_the_time_is_the_receive_time(received: str | None, time: datetime) -> None:
    template = _template("tm", BASE)
    for _ in range(2):  # the second time from the remembered parse
        attrs = _render(template, NativeMessage("KAFKA", {}, received_at=received))
        assert attrs["time"] == time


def test_the_time_is_now_when_nothing_else_gives_it() -> None:
    template = _template("tn", BASE)
    before = datetime.now(UTC)
    event = template.render_checked(NativeMessage("KAFKA", {}), {}, None)
    assert isinstance(event, CloudEvent)
    time = event.get_attributes()["time"]
    assert isinstance(time, datetime) and before <= time <= datetime.now(UTC)


def test_the_time_sentinel_and_declared_times() -> None:
    record = NativeMessage("KAFKA", {}, received_at="2026-11-21T08:00:00Z")
    received = datetime(2026, 11, 21, 8, 0, tzinfo=UTC)
    sentinel = {**BASE, "time": prop("0000-01-01T00:00:00Z", type="timestamp")}
    assert _render(_template("s1", sentinel), record)["time"] == received
    untyped = {**BASE, "time": Property(type="", value="2026-01-02T03:04:05Z", has_value=True)}
    assert _render(_template("s2", untyped), record)["time"] == datetime(
        2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    templated = {**BASE, "time": Property(type="", value="{t}", has_value=True)}
    assert _render(_template("s3", templated), record, {"t": "2026-01-02T03:04:05Z"})[
        "time"] == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    bad = _template("s4", templated).render_checked(record, {"t": "soon"}, NOW)
    assert bad == RenderError("invalid-envelope", "time: 'soon' is not an RFC 3339 timestamp")


@pytest.mark.parametrize(("extra", "record", "content_type"), [
    ({}, NativeMessage("KAFKA", {}, data={"v": 1}), "application/json"),
    ({}, NativeMessage("KAFKA", {}, payload=b"x"), None),
    ({}, NativeMessage("KAFKA", {}), None),
    ({"datacontenttype": "text/csv"}, NativeMessage("KAFKA", {}, data=[1]), "text/csv"),
    ({"dataschemaformat": "JsonSchema/draft-07"}, NativeMessage("KAFKA", {}), "application/json"),
    ({"dataschemaformat": "JSONStructure/1"}, NativeMessage("KAFKA", {}), "application/json"),
    ({"dataschemaformat": "Avro/1.11"}, NativeMessage("KAFKA", {}), "application/avro"),
    ({"dataschemaformat": "Protobuf/3"}, NativeMessage("KAFKA", {}), "application/protobuf"),
    ({"dataschemaformat": "XSD/1.1"}, NativeMessage("KAFKA", {}), "application/xml"),
    ({"dataschemaformat": "xml"}, NativeMessage("KAFKA", {}), "application/xml"),
    ({"dataschemaformat": "Custom"}, NativeMessage("KAFKA", {}, payload=b"x"), None),
    ({"datacontenttype": "text/csv"}, NativeMessage(
        "KAFKA", {"headers": [{"name": "Content-Type", "value": "text/plain"}]}), "text/plain"),
])
def test_the_content_type(extra: dict[str, Any], record: NativeMessage,
                          content_type: str | None) -> None:
    attrs = _render(_template("ct", BASE, **extra), record)
    assert attrs.get("datacontenttype") == content_type


def test_a_declared_content_type_wins_and_a_native_one_must_be_a_media_type() -> None:
    record = NativeMessage("KAFKA", {"headers": [{"name": "content-type", "value": "plain"}]})
    declared = _template("d1", {**BASE, "datacontenttype": prop("text/csv")})
    assert _render(declared, record)["datacontenttype"] == "text/csv"
    error = _template("d2", BASE).render_checked(record, {}, NOW)
    assert error == RenderError("invalid-envelope",
                                "datacontenttype: 'plain' is not a media type (type/subtype)")


@pytest.mark.parametrize(("extra", "envelope", "dataschema"), [
    ({"dataschemauri": "http://h/schema"}, {}, "http://h/schema"),
    ({"dataschemauri": "urn:s"}, {}, "urn:s"),
    ({"dataschemauri": "/relative"}, {}, None),
    ({"dataschemauri": "http://h/{v}"}, {}, None),
    ({"dataschemauri": "http://h/schema"}, {"dataschema": prop("http://h/own")},
     "http://h/own"),
    ({}, {}, None),
])
def test_the_dataschema(extra: dict[str, Any], envelope: dict[str, Property],
                        dataschema: str | None) -> None:
    attrs = _render(_template("ds", {**BASE, **envelope}, **extra), NativeMessage("KAFKA", {}))
    assert attrs.get("dataschema") == dataschema


@pytest.mark.parametrize(("entries", "trace"), [
    ([("traceparent", TRACEPARENT), ("tracestate", "a=1")],
     {"traceparent": TRACEPARENT, "tracestate": "a=1"}),
    ([("TraceParent", TRACEPARENT)], {"traceparent": TRACEPARENT}),
    ([("traceparent", TRACEPARENT), ("tracestate", "")], {"traceparent": TRACEPARENT}),
    ([("traceparent", TRACEPARENT.upper()), ("tracestate", "a=1")], {}),
    ([("traceparent", "00-abc"), ("tracestate", "a=1")], {}),
    ([("tracestate", "a=1")], {}),
])
def test_the_trace_context_is_carried_when_well_formed(entries: list[tuple[str, str]],
                                                       trace: dict[str, str]) -> None:
    record = NativeMessage("KAFKA", {"headers": [{"name": n, "value": v} for n, v in entries]})
    attrs = _render(_template("tr", BASE), record)
    assert {k: v for k, v in attrs.items() if k.startswith("trace")} == trace
    declared = _render(_template("td", {**BASE, "traceparent": prop("mine")}), record)
    assert declared["traceparent"] == "mine" and "tracestate" not in declared


def test_the_body_is_the_records() -> None:
    template = _template("body", BASE)
    json_event = template.render_checked(NativeMessage("KAFKA", {}, data=None), {}, NOW)
    assert isinstance(json_event, CloudEvent)
    assert json_event.has_data and json_event.get_data() is None  # a JSON null
    raw = template.render_checked(NativeMessage("KAFKA", {}, payload=b"\x01"), {}, NOW)
    assert isinstance(raw, CloudEvent) and raw.has_data and raw.get_data() == b"\x01"
    empty = template.render_checked(NativeMessage("KAFKA", {}), {}, NOW)
    assert isinstance(empty, CloudEvent) and not empty.has_data


def test_an_attribute_declared_without_a_value_or_with_a_null_one_is_not_rendered() -> None:
    template = _template("nv", {**BASE, "myext": Property(type="string", value=None,
                                                          has_value=True),
                                "other": Property(type="string", value="x", has_value=False)})
    attrs = _render(template, NativeMessage("KAFKA", {}))
    assert "myext" not in attrs and "other" not in attrs


@pytest.mark.parametrize(("protocol", "fields", "trace"), [
    ("MQTT/5.0", {"user_properties": [{"name": "traceparent", "value": TRACEPARENT},
                                      {"name": "tracestate", "value": "a=1"}]},
     {"traceparent": TRACEPARENT, "tracestate": "a=1"}),
    ("MQTT/5.0", {"user_properties": [{"name": "TRACEPARENT", "value": TRACEPARENT}]}, {}),
    ("AMQP/1.0", {"application-properties": {"traceparent": TRACEPARENT,
                                             "tracestate": "a=1"}},
     {"traceparent": TRACEPARENT, "tracestate": "a=1"}),
    ("AMQP/1.0", {"application-properties": {"traceparent": TRACEPARENT,
                                             "TRACESTATE": "a=1"}},
     {"traceparent": TRACEPARENT}),
    # AMQP application properties are typed: only a string is trace context.
    ("AMQP/1.0", {"application-properties": {"traceparent": TRACEPARENT, "tracestate": 5}},
     {"traceparent": TRACEPARENT}),
])
def test_trace_context_names_are_exact_where_the_protocol_compares_them_so(
        protocol: str, fields: dict[str, Any], trace: dict[str, str]) -> None:
    template = EnvelopeTemplate(define("tc", protocol, [], BASE))
    attrs = _render(template, NativeMessage(protocol, fields))
    assert {k: v for k, v in attrs.items() if k.startswith("trace")} == trace


# -- render hands its `now` to render_checked ----------------------------------------------


def test_a_template_without_a_generated_renderer_times_events_with_the_given_now() -> None:
    # A typed (integer) attribute: no generated renderer, render_checked renders.
    template = _template("typed", {**BASE, "n": prop("{n}", type="integer")})
    event = template.render(NativeMessage("KAFKA", {"topic": "t"}), {"n": "7"}, NOW)
    assert isinstance(event, CloudEvent)
    assert event.get_attributes()["n"] == 7
    assert event.get_attributes()["time"] == NOW


def test_when_the_generated_renderer_gives_up_render_checked_gets_the_same_now() -> None:
    template = _template("plain", BASE)
    protocol, _made = template._own
    template._own = (protocol, lambda record, context, now, consts: None)  # gives up
    event = template.render(NativeMessage("KAFKA", {"topic": "t"}), {}, NOW)
    assert isinstance(event, CloudEvent)
    assert event.get_attributes()["time"] == NOW
