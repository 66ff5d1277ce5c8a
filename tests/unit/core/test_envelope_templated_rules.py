"""Regressions found while writing the envelope's mutation tests (issue 19).

- A definition templating `dataschema` or `datacontenttype` never rendered: the compile
  time check gave templated attributes the sample value "x", which is no absolute URI and
  no media type, so every message got "dataschema: 'x' is not an absolute URI". Templated
  values are checked per message instead, the fast path and `render_checked` alike.
- A CloudEvent whose data is JSON null, delivered natively, lost its body (and its
  content type): `render_native` read null data as no data."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from gateway.cloudevents.event import CloudEvent
from gateway.envelope.native import render_native
from gateway.envelope.render import EnvelopeTemplate, RenderError
from gateway.record import NativeMessage

from .defs import define, opt, prop

NOW = datetime(2026, 11, 21, 9, 0, tzinfo=UTC)
BASE = {"type": prop("t"), "source": prop("/s")}


@pytest.mark.parametrize(("name", "template", "value", "rendered"), [
    ("dataschema", "https://schemas.example.com/{v}", "order", "https://schemas.example.com/order"),
    ("dataschema", "{v}", "urn:schema:1", "urn:schema:1"),
    ("datacontenttype", "application/{v}", "json", "application/json"),
    ("datacontenttype", "{v}", "text/plain; charset=utf-8", "text/plain; charset=utf-8"),
])
def test_templated_dataschema_and_content_type_render(name: str, template: str, value: str,
                                                      rendered: str) -> None:
    compiled = EnvelopeTemplate(define("ts", "KAFKA", [opt("topic", "t")],
                                       {**BASE, name: prop(template)}))
    assert compiled.error is None
    record = NativeMessage("KAFKA", {"topic": "t"}, data={"v": 1})
    for event in (compiled.render(record, {"v": value}, NOW),
                  compiled.render_checked(record, {"v": value}, NOW)):
        assert isinstance(event, CloudEvent)
        assert event.get_attributes()[name] == rendered


@pytest.mark.parametrize(("name", "template", "value", "problem"), [
    ("dataschema", "{v}", "relative/path", "dataschema: 'relative/path' is not an absolute URI"),
    ("dataschema", "http://h/{v}", "a b", "dataschema: 'http://h/a b' is not an absolute URI"),
    ("datacontenttype", "{v}", "json",
     "datacontenttype: 'json' is not a media type (type/subtype)"),
])
def test_templated_values_that_break_their_rule_are_errors_per_message(
        name: str, template: str, value: str, problem: str) -> None:
    compiled = EnvelopeTemplate(define("tb", "KAFKA", [opt("topic", "t")],
                                       {**BASE, name: prop(template)}))
    record = NativeMessage("KAFKA", {"topic": "t"})
    error = RenderError("invalid-envelope", problem)
    assert compiled.render(record, {"v": value}, NOW) == error
    assert compiled.render_checked(record, {"v": value}, NOW) == error


def test_constant_dataschema_and_content_type_are_still_checked_at_compile_time() -> None:
    bad = EnvelopeTemplate(define("cb", "KAFKA", [], {**BASE, "dataschema": prop("rel")}))
    assert bad.error == RenderError(
        "invalid-envelope",
        "/messagegroups/g/messages/cb: dataschema: 'rel' is not an absolute URI")


def test_an_explicit_json_null_body_is_carried_as_data() -> None:
    event = CloudEvent({"specversion": "1.0", "id": "e", "type": "t", "source": "/s"}, None,
                       has_data=True)
    record = render_native(define("null", "KAFKA", [opt("topic", "t")]), event)
    assert record == NativeMessage(
        "KAFKA", {"topic": "t",
                  "headers": [{"name": "content-type", "value": "application/json"}]},
        data=None)
    assert record.has_json_data
