"""`EnvelopeTemplate.render` (one pass, a plan decided per definition) gives exactly what
`render_checked` (the step-by-step reference that phrases every error) gives.

Hypothesis draws envelopes of constant, templated and typed attributes (core ones with
rules of their own and extensions), contexts whose values break those rules in every way
the fast path tests for (control characters, whitespace that is not a space, empty
text, missing placeholders), and records with and without a native content type, trace
context, identity and receive time.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.cloudevents.event import CloudEvent
from gateway.definitions.model import MessageDefinition, Property
from gateway.envelope.render import EnvelopeTemplate, RenderError
from gateway.record import NativeMessage

from .defs import define, opt, prop

NOW = datetime(2026, 11, 21, 9, 0, tzinfo=UTC)
NAMES = ["id", "source", "type", "subject", "dataschema", "datacontenttype", "time",
         "traceparent", "myext", "count"]
TEMPLATES = ["{a}", "{b}", "/s/{a}", "{a}-{b}", "x {a}", "http://h/{a}", "{a}/{b}",
             "application/{a}", "{0}"]
CONSTANTS = ["c", "/s", "http://h/s", "application/json", "2026-01-02T03:04:05Z", 7, True]
# Mostly plain text (the fast path); a typed templated attribute sends every message of
# its definition to `render_checked`.
TYPES = ["string", "uritemplate", "any", None] * 4 + ["uri", "integer", "boolean",
                                                      "timestamp"]
VALUES = st.sampled_from(["v", "1", "", "a b", " ", "a\tb", "a\x00b", "a\x85b", "a\u2028b",
                          "a\xa0b", "é", "json", "http://x", "true", "00-" + "a" * 32 + "-"
                          + "b" * 16 + "-01"])


@st.composite
def envelopes(draw: st.DrawFn) -> dict[str, Property]:
    names = draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=4))
    out: dict[str, Property] = {"type": prop("t"), "source": prop("/s")}
    for name in names:
        typ = draw(st.sampled_from(TYPES))
        kind = draw(st.sampled_from(["template"] * 4 + ["constant", "constant", "none"]))
        value: Any = (draw(st.sampled_from(TEMPLATES)) if kind == "template"
                      else draw(st.sampled_from(CONSTANTS)) if kind == "constant" else None)
        # Required without a value is a definition error (every message: the same
        # RenderError); drawn rarely, so most envelopes render.
        required = draw(st.booleans()) if value is not None else draw(
            st.sampled_from([False] * 5 + [True]))
        out[name] = Property(type=typ or "", value=value, has_value=value is not None,
                             required=required)
    return out


@st.composite
def definitions(draw: st.DrawFn) -> MessageDefinition:
    protocol = draw(st.sampled_from(["MQTT/5.0", "KAFKA", "AMQP/1.0", "HTTP", "NATS"]))
    extra = draw(st.sampled_from([{}, {"datacontenttype": "text/plain"},
                                  {"dataschemauri": "http://h/schema"},
                                  {"dataschemaformat": "JsonSchema/draft-07"}]))
    return define("d", protocol, [opt("topic_name", "t")], draw(envelopes()), **extra)


def metadata(protocol: str, entries: list[tuple[str, Any]]) -> dict[str, Any]:
    if protocol == "MQTT/5.0":
        return {"user_properties": [{"name": k, "value": v} for k, v in entries]}
    if protocol == "AMQP/1.0":
        return {"application-properties": dict(entries)}
    return {"headers": [{"name": k, "value": v} for k, v in entries]}


TRACEPARENTS = st.sampled_from(["00-" + "a" * 32 + "-" + "b" * 16 + "-01", "bad", "00-XX", 7])


@st.composite
def records(draw: st.DrawFn, protocol: str) -> NativeMessage:
    # Trace context entries, repeated and in other cases too: the first one of the name
    # counts (ignoring case where the protocol does).
    entries: list[tuple[str, Any]] = draw(st.lists(st.tuples(
        st.sampled_from(["traceparent", "TraceParent", "tracestate", "other",
                         "content-type"]),
        st.one_of(TRACEPARENTS, st.sampled_from(["k=v", "", "text/plain"]))), max_size=4))
    content_type = draw(st.sampled_from([None, "application/json", "text/plain; x=y",
                                         "not a media type", "a/b\x00"]))
    fields: dict[str, Any] = metadata(protocol, entries)
    if content_type is not None:
        if protocol == "MQTT/5.0":
            fields["content_type"] = content_type
        elif protocol == "AMQP/1.0":
            fields["properties"] = {"content-type": content_type}
        else:
            fields["headers"].append({"name": "Content-Type", "value": content_type})
    if protocol == "KAFKA" and draw(st.booleans()):
        fields.update(topic="t", partition=1, offset=draw(st.integers(0, 9)))
    received = draw(st.sampled_from([None, "2026-11-21T09:00:00Z", "2026-11-21T09:00:00.5Z",
                                     "2026-11-21T10:00:00+01:00", "nonsense", ""]))
    body = draw(st.sampled_from(["json", "bytes", "none"]))
    if body == "json":
        return NativeMessage(protocol, fields, data={"v": 1}, received_at=received,
                             raw=b'{"v": 1}')
    if body == "bytes":
        return NativeMessage(protocol, fields, payload=b"\x01", received_at=received)
    return NativeMessage(protocol, fields, received_at=received)


def same_event(fast: CloudEvent | RenderError, checked: CloudEvent | RenderError) -> None:
    if isinstance(checked, RenderError):
        assert fast == checked
        return
    assert isinstance(fast, CloudEvent)
    a, b = dict(fast.get_attributes()), dict(checked.get_attributes())
    assert list(a) == list(b)  # same attributes in the same order (headers keep it)
    if a["id"] != b["id"]:  # both random: each a version-4 UUID
        assert uuid.UUID(a["id"]).version == uuid.UUID(b["id"]).version == 4
        a["id"] = b["id"]
    assert a == b
    assert [type(v) for v in a.values()] == [type(v) for v in b.values()]
    assert (fast.get_data(), fast.has_data) == (checked.get_data(), checked.has_data)


@settings(max_examples=600, deadline=None)
@given(st.data(), definitions())
def test_render_is_render_checked(data: st.DataObject, definition: MessageDefinition) -> None:
    template = EnvelopeTemplate(definition)
    assert definition.protocol is not None
    for _ in range(4):
        record = data.draw(records(definition.protocol))
        context = data.draw(st.dictionaries(st.sampled_from(["a", "b"]), VALUES))
        same_event(template.render(record, context, NOW),
                   template.render_checked(record, context, NOW))


def test_rules_the_fast_path_checks_itself() -> None:
    """Values the printable shortcut must not wave through (each is `render_checked`'s
    error), and values it hands to the exact regex that do pass."""
    d = define("d", "MQTT/5.0", [opt("topic_name", "t")],
               {"type": prop("{a}"), "source": prop("/s/{a}"), "subject": prop("{a}"),
                "myext": prop("{a}")})
    template = EnvelopeTemplate(d)
    record = NativeMessage("MQTT/5.0", {"topic_name": "t"})
    for value in ["a b", "a\tb", "", "a\x00", "a\u2028b", "a\xa0b", "é"]:
        fast = template.render(record, {"a": value}, NOW)
        same_event(fast, template.render_checked(record, {"a": value}, NOW))
        assert isinstance(fast, RenderError) == (value != "é")


def test_a_rendered_event_keeps_the_bytes_its_data_was_parsed_from() -> None:
    d = define("d", "MQTT/5.0", [opt("topic_name", "t")], {"type": prop("t"),
                                                              "source": prop("/s")})
    record = NativeMessage.from_wire("MQTT/5.0", {"topic_name": "t"}, b'{"v": 1.10}', None)
    event = EnvelopeTemplate(d).render(record, {}, NOW)
    assert isinstance(event, CloudEvent)
    assert event.get_data() == {"v": 1.1} and event.raw == b'{"v": 1.10}'


def test_records_of_another_protocol_of_the_family_render_alike() -> None:
    """An MQTT 5 definition matches MQTT 3.1.1 records too: they get a renderer of their
    own protocol (no content type, no metadata), not the definition's."""
    d = define("d", "MQTT/5.0", [opt("topic_name", "t/{a}")],
               {"type": prop("t"), "source": prop("/s/{a}")})
    template = EnvelopeTemplate(d)
    for protocol in ("MQTT/3.1.1", "MQTT/5.0", "MQTT/3.1.1"):
        record = NativeMessage(protocol, {"topic_name": "t/x", "content_type": "text/plain"},
                               data={"v": 1})
        fast = template.render(record, {"a": "x"}, NOW)
        same_event(fast, template.render_checked(record, {"a": "x"}, NOW))
        assert isinstance(fast, CloudEvent)
        assert fast.get_attributes()["datacontenttype"] == (
            "text/plain" if protocol == "MQTT/5.0" else "application/json")


def test_content_types_seen_are_remembered_short_and_bounded() -> None:
    """The media-type memo keeps short texts only, and at most `_MEDIA_TYPES_MAX`: a
    sender of long or ever new content types cannot grow it."""
    from gateway.envelope import render

    long_text = "application/" + "x" * 10_000
    assert render.media_type_seen(long_text)
    assert long_text not in render._MEDIA_TYPES_SEEN
    assert render.media_type_seen("text/plain; charset=utf-8")
    assert render._MEDIA_TYPES_SEEN.get("text/plain; charset=utf-8") is True
    assert not render.media_type_seen("not a media type")
    assert render._MEDIA_TYPES_SEEN.get("not a media type") is False
    for n in range(render._MEDIA_TYPES_MAX + 10):
        render.media_type_seen(f"a/b{n}")
    assert len(render._MEDIA_TYPES_SEEN) <= render._MEDIA_TYPES_MAX
