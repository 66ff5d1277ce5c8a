"""The generated envelope renderers (gateway.envelope.fastrender), generated afresh for
each test (renderers and identity readers are kept per shape and protocol once made):
what each shape of template renders for records of every protocol, called directly (so a
renderer that gives up, leaving the event to `render_checked`, is seen), against literal
events and against `render_checked`, the step-by-step reference."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from gateway.cloudevents.event import CloudEvent
from gateway.envelope import fastrender, ids, render
from gateway.envelope.render import EnvelopeTemplate, RenderError
from gateway.protocols import accessors
from gateway.record import NativeMessage

from .defs import define, opt, prop

NOW = datetime(2026, 11, 21, 9, 0, tzinfo=UTC)
RECEIVED = "2026-11-21T08:00:00Z"
TRACEPARENT = "00-" + "a" * 32 + "-" + "b" * 16 + "-01"


@pytest.fixture(autouse=True)
def fresh_renderers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fastrender, "_COMPILED", {})
    accessors.ACCESSORS.clear()  # type: ignore[attr-defined]  # a cache: refilled on use
    monkeypatch.setattr(render, "_LAST_TIME", [(None, datetime.min)])
    monkeypatch.setitem(render._HELPERS, "LAST_TIME", render._LAST_TIME)
    render._accepts.cache_clear()


def _uuid5(name: str) -> str:
    return str(uuid.uuid5(ids.ID_NAMESPACE, name))


def _fast(template: EnvelopeTemplate, record: NativeMessage,
          context: dict[str, Any]) -> CloudEvent | None:
    """The generated renderer of the template's shape for the record's protocol."""
    assert template._consts is not None, "the template renders with render_checked only"
    made = template._renderer(record.protocol)
    return made(record, context, NOW, template._consts)


def _same(fast: CloudEvent | RenderError | None, checked: CloudEvent | RenderError) -> None:
    assert isinstance(fast, CloudEvent) and isinstance(checked, CloudEvent)
    a, b = dict(fast.get_attributes()), dict(checked.get_attributes())
    assert list(a) == list(b)
    if a["id"] != b["id"]:
        assert uuid.UUID(a["id"]).version == uuid.UUID(b["id"]).version == 4
        a["id"] = b["id"]
    assert a == b
    assert (fast.get_data(), fast.has_data) == (checked.get_data(), checked.has_data)


def _attrs(event: CloudEvent | None) -> dict[str, Any]:
    assert isinstance(event, CloudEvent)
    return dict(event.get_attributes())


# -- literal events -------------------------------------------------------------------------


def test_a_kafka_record_with_identity_content_type_and_trace_context() -> None:
    d = define("k", "KAFKA", [opt("topic", "t")],
               {"type": prop("com.example.{kind}"), "source": prop("/stores/{store}"),
                "subject": prop("{desk}"), "region": prop("{region}")})
    record = NativeMessage("KAFKA", {
        "topic": "t", "partition": 1, "offset": 5,
        "headers": [{"name": "Content-Type", "value": "text/plain; charset=utf-8"},
                    {"name": "TRACEPARENT", "value": TRACEPARENT},
                    {"name": "traceparent", "value": "ignored: the first one counts"},
                    {"name": "tracestate", "value": "v=1"}, "not an entry",
                    {"name": 7, "value": "not a name"}]},
        payload=b"hello", received_at=RECEIVED)
    context = {"kind": "sale", "store": "12", "desk": "d3", "region": "eu"}
    event = _fast(EnvelopeTemplate(d), record, context)
    assert _attrs(event) == {
        "specversion": "1.0", "type": "com.example.sale", "source": "/stores/12",
        "subject": "d3", "region": "eu", "id": _uuid5("kafka:t/1/5"),
        "time": datetime(2026, 11, 21, 8, 0, tzinfo=UTC),
        "datacontenttype": "text/plain; charset=utf-8", "traceparent": TRACEPARENT,
        "tracestate": "v=1"}
    assert event is not None and event.get_data() == b"hello"
    assert list(_attrs(event)) == ["specversion", "type", "source", "subject", "region", "id",
                                   "time", "datacontenttype", "traceparent", "tracestate"]


def test_an_mqtt5_record_with_json_data_and_its_own_content_type_field() -> None:
    d = define("m", "MQTT/5.0", [opt("topic_name", "t")],
               {"type": prop("t"), "source": prop("{src}")})
    template = EnvelopeTemplate(d)
    record = NativeMessage("MQTT/5.0", {
        "topic_name": "a/b", "correlation_data": "c1", "content_type": "application/json",
        "user_properties": [{"name": "traceparent", "value": TRACEPARENT},
                            {"name": "TraceState", "value": "other case: not it"}]},
        data={"v": 1}, raw=b'{"v":1}')
    event = _fast(template, record, {"src": "/s"})
    assert _attrs(event) == {
        "specversion": "1.0", "type": "t", "source": "/s", "id": _uuid5("mqtt:a/b/c1"),
        "time": NOW, "datacontenttype": "application/json", "traceparent": TRACEPARENT}
    assert event is not None and event.get_data() == {"v": 1} and event.raw == b'{"v":1}'
    # a content type field that is not text is no content type: JSON data gets its own
    odd = NativeMessage("MQTT/5.0", {"topic_name": "a/b", "content_type": 5}, data=[1])
    assert _attrs(_fast(template, odd, {"src": "/s"}))["datacontenttype"] == "application/json"


def test_an_amqp_record_reads_its_sections() -> None:
    d = define("a", "AMQP/1.0", [opt("properties", "s", name="subject")],
               {"type": prop("t"), "source": prop("/s"), "n": prop("{n}")})
    record = NativeMessage("AMQP/1.0", {
        "properties": {"message-id": "m-1", "content-type": "text/csv"},
        "application-properties": {"traceparent": TRACEPARENT, "tracestate": "s=2"}},
        payload=b"a,b", received_at=RECEIVED)
    event = _fast(EnvelopeTemplate(d), record, {"n": 3})  # not text: formatted
    assert _attrs(event) == {
        "specversion": "1.0", "type": "t", "source": "/s", "n": "3", "id": _uuid5("amqp:m-1"),
        "time": datetime(2026, 11, 21, 8, 0, tzinfo=UTC), "datacontenttype": "text/csv",
        "traceparent": TRACEPARENT, "tracestate": "s=2"}


def test_an_http_record_reads_headers_ignoring_case() -> None:
    d = define("h", "HTTP", [opt("path", "/p")],
               {"type": prop("t"), "source": prop("/s")}, datacontenttype="application/xml")
    record = NativeMessage("HTTP", {"path": "/p", "headers": [
        {"name": "Idempotency-Key", "value": "k-9"}, {"name": "X", "value": "y"},
        {"name": "TraceParent", "value": "not a traceparent"}]})
    event = _fast(EnvelopeTemplate(d), record, {})
    assert _attrs(event) == {"specversion": "1.0", "type": "t", "source": "/s",
                             "id": _uuid5("http:k-9"), "time": NOW,
                             "datacontenttype": "application/xml"}
    assert event is not None and not event.has_data


def test_nats_and_mqtt311_records() -> None:
    d = define("n", "NATS", [opt("subject", "a")], {"type": prop("t"), "source": prop("/s")},
               dataschemauri="http://h/schema")
    nats = NativeMessage("NATS", {"subject": "a", "stream": "S", "sequence": 4,
                                  "headers": [{"name": "content-type", "value": "text/csv"}]},
                         data={"v": 1})
    assert _attrs(_fast(EnvelopeTemplate(d), nats, {})) == {
        "specversion": "1.0", "type": "t", "source": "/s", "id": _uuid5("nats:S/4"),
        "time": NOW, "datacontenttype": "text/csv", "dataschema": "http://h/schema"}
    m = define("m3", "MQTT/3.1.1", [opt("topic_name", "t")],
               {"type": prop("t"), "source": prop("/s")})
    plain = NativeMessage("MQTT/3.1.1", {"topic_name": "t"}, data={"v": 1})
    attrs = _attrs(_fast(EnvelopeTemplate(m), plain, {}))
    assert uuid.UUID(attrs.pop("id")).version == 4
    assert attrs == {"specversion": "1.0", "type": "t", "source": "/s", "time": NOW,
                     "datacontenttype": "application/json"}
    no_body = _attrs(_fast(EnvelopeTemplate(m), NativeMessage("MQTT/3.1.1", {}), {}))
    assert "datacontenttype" not in no_body


def test_declared_id_time_content_type_and_trace_context_are_kept() -> None:
    d = define("dc", "KAFKA", [opt("topic", "t")], {
        "type": prop("t"), "source": prop("/s"), "id": prop("{id}"),
        "time": prop("2026-01-02T03:04:05Z", type="timestamp"),
        "datacontenttype": prop("application/json"), "traceparent": prop("{tp}"),
        "dataschema": prop("http://h/s1")}, dataschemauri="http://other/schema")
    record = NativeMessage("KAFKA", {"topic": "t", "partition": 0, "offset": 1, "headers": [
        {"name": "content-type", "value": "text/plain"},
        {"name": "traceparent", "value": TRACEPARENT}]}, data={"v": 1},
        received_at=RECEIVED)
    event = _fast(EnvelopeTemplate(d), record,
                  {"id": "my-id", "tp": "declared"})
    assert _attrs(event) == {
        "specversion": "1.0", "type": "t", "source": "/s",
        "time": datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        "datacontenttype": "application/json", "dataschema": "http://h/s1", "id": "my-id",
        "traceparent": "declared"}


def test_the_receive_time_of_a_burst_is_parsed_once() -> None:
    d = define("rt", "KAFKA", [opt("topic", "t")], {"type": prop("t"), "source": prop("/s")})
    template = EnvelopeTemplate(d)
    first = NativeMessage("KAFKA", {}, received_at="2026-11-21T08:00:00.5Z")
    assert _attrs(_fast(template, first, {}))["time"] == datetime(
        2026, 11, 21, 8, 0, 0, 500000, tzinfo=UTC)
    assert render._LAST_TIME[0][0] == "2026-11-21T08:00:00.5Z"
    render._LAST_TIME[0] = ("2026-11-21T08:00:00.5Z", NOW)  # what the next one reads
    assert _attrs(_fast(template, first, {}))["time"] == NOW
    other = NativeMessage("KAFKA", {}, received_at="bad")
    assert _attrs(_fast(template, other, {}))["time"] == NOW  # unparsable: now


# -- what the generated code leaves to render_checked ----------------------------------------


@pytest.mark.parametrize(("envelope", "context"), [
    ({"subject": prop("{a}")}, {}),                        # missing placeholder
    ({"subject": prop("x-{a}")}, {}),
    ({"subject": prop("{a}")}, {"a": ""}),                 # subject must be non-empty
    ({"subject": prop("{a}")}, {"a": "a\x00b"}),           # control character
    ({"type": prop("{a}")}, {"a": ""}),
    ({"myext": prop("{a}")}, {"a": "a\x85b"}),
    ({"source": prop("{a}")}, {"a": "a b"}),               # a URI-reference: no space
    ({"source": prop("{a}")}, {"a": ""}),
])
def test_values_that_break_a_rule_are_left_to_render_checked(envelope: dict[str, Any],
                                                             context: dict[str, str]) -> None:
    d = define("rc", "KAFKA", [opt("topic", "t")],
               {"type": prop("t"), "source": prop("/s"), **envelope})
    template = EnvelopeTemplate(d)
    record = NativeMessage("KAFKA", {})
    assert _fast(template, record, context) is None
    assert isinstance(template.render(record, context, NOW), RenderError)


@pytest.mark.parametrize(("protocol", "fields"), [
    ("KAFKA", {"headers": [{"name": "content-type", "value": "not a media type"}]}),
    ("HTTP", {"headers": [{"name": "Content-Type", "value": "a/b\x00"}]}),
    ("MQTT/5.0", {"content_type": "nonsense"}),
    ("AMQP/1.0", {"properties": {"content-type": "nonsense"}}),
])
def test_a_native_content_type_that_is_no_media_type_is_left_to_render_checked(
        protocol: str, fields: dict[str, Any]) -> None:
    d = define("ct", protocol, [], {"type": prop("t"), "source": prop("/s")})
    template = EnvelopeTemplate(d)
    record = NativeMessage(protocol, fields)
    assert _fast(template, record, {}) is None
    error = template.render(record, {}, NOW)
    assert isinstance(error, RenderError) and error.reason == "invalid-envelope"


@pytest.mark.parametrize(("name", "value"), [
    ("subject", "a b"), ("subject", "é"), ("type", "x y"), ("myext", ""), ("myext", "a b"),
    ("source", "/a/b?c=d"), ("id", "a b"), ("myext", "é")
])
def test_values_that_keep_the_rules_render_in_the_generated_code(name: str, value: str) -> None:
    envelope = {"type": prop("t"), "source": prop("/s"), name: prop("{a}")}
    template = EnvelopeTemplate(define("ok", "KAFKA", [], envelope))
    record = NativeMessage("KAFKA", {})
    event = _fast(template, record, {"a": value})
    assert _attrs(event)[name] == value
    _same(event, template.render_checked(record, {"a": value}, NOW))


# -- every shape and protocol agrees with render_checked -------------------------------------

ENVELOPES: list[dict[str, Any]] = [
    {},
    {"subject": prop("{a}"), "myext": prop("x-{b}")},
    {"id": prop("{a}"), "time": prop("{b}")},
    {"id": prop("fixed"), "datacontenttype": prop("text/plain"), "traceparent": prop("t")},
    {"source": prop("/s/{a}"), "dataschema": prop("http://h/s")},
]
EXTRAS: list[dict[str, Any]] = [{}, {"datacontenttype": "application/avro"},
                                {"dataschemauri": "http://h/schema"}]


def _records(protocol: str) -> list[NativeMessage]:
    meta = [("TraceParent", TRACEPARENT), ("tracestate", "k=v"), ("content-type", "text/x")]
    if protocol == "MQTT/5.0":
        fields: dict[str, Any] = {"user_properties": [{"name": k, "value": v} for k, v in meta],
                                  "content_type": "text/y", "topic_name": "t",
                                  "correlation_data": "c"}
    elif protocol == "AMQP/1.0":
        fields = {"application-properties": dict(meta),
                  "properties": {"content-type": "text/y", "message-id": "m"}}
    elif protocol == "MQTT/3.1.1":
        fields = {"topic_name": "t"}
    else:
        fields = {"headers": [{"name": k, "value": v} for k, v in meta],
                  "topic": "t", "partition": 0, "offset": 1, "stream": "S", "sequence": 2}
    return [NativeMessage(protocol, fields, data={"v": 1}, received_at=RECEIVED),
            NativeMessage(protocol, {}, payload=b"x", received_at="2026-11-21T10:00:00+01:00"),
            NativeMessage(protocol, {})]


@pytest.mark.parametrize("protocol", ["KAFKA", "NATS", "HTTP", "AMQP/1.0", "MQTT/5.0",
                                      "MQTT/3.1.1"])
def test_every_shape_renders_as_render_checked_does(protocol: str) -> None:
    for envelope in ENVELOPES:
        for extra in EXTRAS:
            d = define("s", protocol, [], {"type": prop("t"), "source": prop("/s"), **envelope},
                       **extra)
            template = EnvelopeTemplate(d)
            for record in _records(protocol):
                context = {"a": "va", "b": "2026-11-21T07:00:00Z"}
                _same(_fast(template, record, context),
                      template.render_checked(record, context, NOW))
