"""`xrgw lint` on templates: adjacent placeholders need a separator to mean anything, and
a repeated name no segment fixes makes matching search (with a budget). Both are
warnings (problem lines) that do not change the exit code."""

from __future__ import annotations

import json

from gateway.cli import main
from gateway.matching.lint import template_notes_of
from gateway.templates.match import pinned_names, template_notes
from gateway.templates.template import Template

from .defs import define, opt, prop


def test_adjacent_placeholders_are_noted_once_per_pair() -> None:
    [(message, fix)] = template_notes(Template.parse("/plant/{site}{line}/t"))
    assert "{site}{line} has nothing between the placeholders" in message
    assert "{site} always captures exactly one character" in message
    assert fix == "put a separator between them ({site}-{line}) or use one placeholder"
    assert len(template_notes(Template.parse("{a}{b}{c}"))) == 2


def test_separated_or_lone_placeholders_are_not_noted() -> None:
    for text in ("/plant/{site}-{line}/t", "{a}", "/{a}/{b}", "{a}.{b}", "/{a}/{a}",
                 "/{a}-{b}/{a}", "{a}-{a}", "a{b}c"):
        assert template_notes(Template.parse(text)) == [], text


def test_a_repeated_name_no_segment_fixes_is_noted() -> None:
    assert pinned_names(Template.parse("/{a}-{b}/{a}")) == {"a"}
    assert pinned_names(Template.parse("{a}-{b}-{a}")) == frozenset()
    [(message, fix)] = template_notes(Template.parse("{a}-{b}-{a}"))
    assert "{a} repeated next to other placeholders" in message
    assert "is not matched" in message and "segment of its own" in fix
    # Pinned through another pinned name: {b} alone in its segment, then {a}.
    assert pinned_names(Template.parse("/{b}/{a}-{b}/{a}-{b}")) == {"a", "b"}
    # Several such names: one note that lists them all.
    [(message, _)] = template_notes(Template.parse("{b}-{a}-{b}-{a}"))
    assert message.startswith("template '{b}-{a}-{b}-{a}': {a}, {b} repeated next to")


def test_notes_name_the_definition_and_field() -> None:
    defs = [define("m", "MQTT/5.0", [opt("topic_name", "/s/{a}{b}", type="uritemplate")],
                   envelope={"subject": prop("{x}-{y}-{x}", type="uritemplate")}),
            define("fine", "MQTT/5.0", [opt("topic_name", "/s/{a}", type="uritemplate")])]
    notes = template_notes_of(defs)
    assert [(n.definition.message_id, n.label) for n in notes] == [
        ("m", "topic_name"), ("m", "cloudevent subject")]
    assert notes[0].message.startswith("topic_name: template '/s/{a}{b}'")


def test_lint_prints_the_notes_as_warnings(tmp_path, capsys) -> None:
    doc = tmp_path / "adjacent.xreg.json"
    doc.write_text(json.dumps({"messagegroups": {"g": {"messages": {
        "a": {"protocol": "MQTT/5.0", "protocoloptions": {"topic_name": "/s/{x}{y}/t"}},
    }}}}))
    assert main(["lint", str(doc)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "0 overlapping pair(s)"
    [warning] = out[:-1]
    assert f"{doc}:" in warning and ": warning: topic_name: template '/s/{x}{y}/t'" in warning
    assert "(fix: put a separator between them ({x}-{y})" in warning
    assert main(["lint", "--format", "json", str(doc)]) == 0
    [entry] = json.loads(capsys.readouterr().out)
    assert entry["severity"] == "warning" and entry["path"] == "$.messagegroups.g.messages.a"
