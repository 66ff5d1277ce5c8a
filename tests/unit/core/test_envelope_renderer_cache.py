"""EnvelopeRenderer keeps one compiled template per definition id, and compiles again
when a definition of the same id is replaced (a reloaded catalog)."""

from __future__ import annotations

from datetime import UTC, datetime

from gateway.definitions.model import MessageDefinition
from gateway.envelope.render import EnvelopeRenderer, RenderError
from gateway.record import NativeMessage

from .defs import define, opt, prop

NOW = datetime(2026, 11, 21, 9, 0, tzinfo=UTC)
RECORD = NativeMessage("KAFKA", {"topic": "t", "partition": 0, "offset": 1})


def _definition(source: str) -> MessageDefinition:
    return define("same", "KAFKA", [opt("topic", "t")],
                  {"type": prop("com.example.sale"), "source": prop(source)})


def test_a_replaced_definition_of_the_same_id_renders_with_its_own_envelope() -> None:
    renderer = EnvelopeRenderer()
    first, second = _definition("/first"), _definition("/second")
    assert first.xid == second.xid
    for definition, source in ((first, "/first"), (second, "/second"), (first, "/first")):
        event = renderer.render(definition, RECORD, {}, NOW)
        assert not isinstance(event, RenderError)
        assert event.get_attributes()["source"] == source


def test_the_template_of_a_definition_is_compiled_once() -> None:
    renderer = EnvelopeRenderer()
    definition = _definition("/s")
    template = renderer.template(definition)
    assert renderer.render(definition, RECORD, {}, NOW) == template.render(RECORD, {}, NOW)
    assert renderer.template(definition) is template
