"""`xrgw lint`: pairs of definitions that can accept the same message.

For each pair in the same protocol family (or both CloudEvents-only), build one example
message that tries to satisfy both: constrained fields are unified (a literal beats a
placeholder, `/`-segments are unified one by one), remaining placeholders get sample
values, and so do required fields neither gives a value (of the declared type). The
pair is reported only when both compiled definitions really accept the example, so
every reported overlap comes with a witness and there are no false alarms.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gateway.definitions.model import Catalog, MessageDefinition
from gateway.json.values import JSON, JSONObject
from gateway.matching.compiled import Check, CompiledDefinition, Failure, compile_definition
from gateway.protocols import (
    HTTP,
    definition_field,
    field_access,
    find_profile,
    widest_protocol,
)
from gateway.record import NativeMessage
from gateway.spec.problems import Problem
from gateway.templates.match import template_notes
from gateway.templates.template import Template

_SAMPLE = "x1"
# For a required field neither definition gives a value: a sample of its declared type
# when `x1` would not conform (`values.conforms`), else the example fails both.
_TYPED_SAMPLES = {"integer": "1", "uint32": "1", "number": "1", "boolean": "true",
                  "uri": "urn:x1", "urireference": "urn:x1",
                  "timestamp": "1970-01-01T00:00:00Z", "datetime": "1970-01-01T00:00:00Z",
                  "duration": "PT1S"}


@dataclass(frozen=True)
class Overlap:
    first: str
    second: str
    example: JSONObject
    event: JSONObject | None

    def to_json(self) -> JSONObject:
        out: JSONObject = {"first": self.first, "second": self.second, "example": self.example}
        if self.event is not None:
            out["cloudevent"] = self.event
        return out


def _unify_text(a: Check | None, b: Check | None) -> str | None:
    """A value both checks accept, when one can be built."""
    values = [c for c in (a, b) if c is not None and (c.template or c.has_constant)]
    if not values:
        if not ((a and a.required) or (b and b.required)):
            return None
        typed = [c.declared for c in (a, b) if c is not None and c.declared in _TYPED_SAMPLES]
        return _TYPED_SAMPLES[typed[0]] if typed else _SAMPLE
    constants = [c for c in values if c.has_constant]
    if constants:
        return str(constants[0].constant) if not isinstance(
            constants[0].constant, bool
        ) else ("true" if constants[0].constant else "false")
    templates = [c.template for c in values if c.template is not None]
    if len(templates) == 1:
        return _fill(templates[0])
    first, second = templates[0], templates[1]
    if first.segmented and second.segmented:
        one, two = _fill(first).split("/"), _fill(second).split("/")
        raw_one, raw_two = first.text.split("/"), second.text.split("/")
        if len(one) != len(two):
            return _fill(first)
        merged = []
        for seg_a, seg_b, raw_a, raw_b in zip(one, two, raw_one, raw_two, strict=True):
            merged.append(seg_b if "{" in raw_a and "{" not in raw_b else seg_a)
        return "/".join(merged)
    # Prefer the template with more literal text; its sample fits the looser one more often.
    best = max((first, second), key=lambda t: t.literal_length)
    return _fill(best)


def _fill(template: Template) -> str:
    return template.expand({name: _SAMPLE for name in template.names})


def _example_record(
    protocol: str, a: CompiledDefinition, b: CompiledDefinition
) -> NativeMessage:
    by_label_a = {c.label: c for c in a.protocol_checks}
    by_label_b = {c.label: c for c in b.protocol_checks}
    fields: dict[str, JSON] = {}
    for label in dict.fromkeys([*by_label_a, *by_label_b]):
        check_a, check_b = by_label_a.get(label), by_label_b.get(label)
        text = _unify_text(check_a, check_b)
        if text is None:
            continue
        field, _, rest = label.partition("[")
        name = rest[:-1] if rest else None
        spec = definition_field(protocol, field)
        value: JSON = text
        either = check_a if check_a is not None else check_b
        declared = either.declared if either is not None else "string"
        if declared in ("integer", "uint32") and text.lstrip("-").isdigit():
            value = int(text)
        elif declared == "boolean" and text in ("true", "false"):
            value = text == "true"
        if name is None:
            fields[field] = value
        elif field_access(protocol, field, name).kind == "section":
            section = fields.setdefault(field, {})
            assert isinstance(section, dict)
            section[name] = value if spec is not None and spec.kind == "section" else text
        else:
            pairs = fields.setdefault(field, [])
            assert isinstance(pairs, list)
            pairs.append({"name": name, "value": text})
    return NativeMessage(protocol, fields)


def _example_event(a: CompiledDefinition, b: CompiledDefinition) -> dict[str, JSON]:
    by_a = {c.attribute: c for c in a.envelope_checks}
    by_b = {c.attribute: c for c in b.envelope_checks}
    event: dict[str, JSON] = {"specversion": "1.0", "id": "lint-example",
                              "source": _SAMPLE, "type": _SAMPLE}
    for name in dict.fromkeys([*by_a, *by_b]):
        if name is None:
            continue
        text = _unify_text(by_a.get(name), by_b.get(name))
        if text is not None:
            event[name] = text
    return event


def _protocol_for(a: CompiledDefinition, b: CompiledDefinition) -> str | None:
    protocols = [d.definition.protocol for d in (a, b) if d.definition.protocol]
    if not protocols:
        return None
    # MQTT 5.0 records carry every 3.1.1 field, so a mixed MQTT pair is tested as 5.0.
    return widest_protocol(protocols)


def _impossible(record: NativeMessage) -> bool:
    """The example holds fields its protocol never carries together (HTTP `method` and
    `status`): no message can be it, so it witnesses no overlap."""
    prof = find_profile(record.protocol)
    return prof is not None and any(
        rule.first in record.fields and rule.second in record.fields
        for rule in prof.definitions.exclusive)


def find_overlaps(definitions: Sequence[MessageDefinition]) -> list[Overlap]:
    compiled = [compile_definition(d) for d in definitions]
    out: list[Overlap] = []
    for i, a in enumerate(compiled):
        for b in compiled[i + 1 :]:
            if a.family != b.family:
                continue
            if a.family is None and not (a.envelope_only and b.envelope_only):
                continue
            protocol = _protocol_for(a, b)
            event = _example_event(a, b) if a.family is None else None
            record = (
                _example_record(protocol, a, b)
                if protocol is not None
                else NativeMessage(HTTP, {})
            )
            if protocol is not None and _impossible(record):
                continue  # e.g. an HTTP request (method) that is a response (status)
            if isinstance(a.evaluate(record, event), Failure):
                continue
            if isinstance(b.evaluate(record, event), Failure):
                continue
            out.append(
                Overlap(a.definition.xid, b.definition.xid,
                        record.to_json() if protocol else {}, event)
            )
    return out


@dataclass(frozen=True)
class TemplateNote:
    """A template that matches, but not as its author probably meant or not cheaply."""

    definition: MessageDefinition
    label: str  # the constrained field, e.g. `topic_name`, `cloudevent subject`
    message: str
    fix: str


def template_notes_of(definitions: Sequence[MessageDefinition]) -> list[TemplateNote]:
    """`gateway.templates.match.template_notes` of every template a definition matches
    with, in catalog order."""
    out: list[TemplateNote] = []
    for definition in definitions:
        compiled = compile_definition(definition)
        for check in (*compiled.protocol_checks, *compiled.envelope_checks):
            if check.template is None:
                continue
            for message, fix in template_notes(check.template):
                out.append(TemplateNote(definition, check.label,
                                        f"{check.label}: {message}", fix))
    return out


def template_problems(definitions: Sequence[MessageDefinition]) -> list[Problem]:
    """`template_notes_of` as warnings placed at their definitions, as `xrgw lint` and
    `xrgw diff` report them."""
    return [Problem("warning", note.definition.provenance.file,
                    note.definition.provenance.path, note.message, note.fix)
            for note in template_notes_of(definitions)]


OVERLAP_FIX = "make one of the two more specific (a constant header, a narrower template)"


def overlap_problem(catalog: Catalog, overlap: Overlap, *, strict: bool) -> Problem:
    """An overlap as `xrgw lint` reports it: a problem placed at the first definition of
    the pair; a warning, an error with `strict`."""
    first = catalog.message(overlap.first)
    where = first.provenance if first is not None else None
    return Problem("error" if strict else "warning",
                   where.file if where else "", where.path if where else "",
                   f"{overlap.first} and {overlap.second} can match the same message",
                   OVERLAP_FIX)


__all__ = ["OVERLAP_FIX", "Overlap", "TemplateNote", "find_overlaps", "overlap_problem",
           "template_notes_of", "template_problems"]
