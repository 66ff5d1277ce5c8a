"""Validation of the typed catalog: every problem, each with file, JSON path and a fix.

Message rules (spec "Message Protocols", "Property Definitions"):
- option names per protocol table (unknown: warning with the closest valid name);
- value types per field (MQTT `qos` integer 0-2, `retain` boolean, Kafka `partition`
  integer, AMQP header/property member types ...) and per declared type elsewhere;
- mutual exclusions: Kafka `key`/`key_base64`, HTTP `method`/`status`,
  `dataschema`/`dataschemauri`;
- template syntax (RFC 6570 level 1) of every string-typed value;
- CloudEvents envelope rules (`envelope_rules`); endpoint rules (`endpoint_rules`);
  content types and `dataschemaformat` (`content_rules`).
Messages stating another protocol or envelope than their group are warned about.
"""

from __future__ import annotations

import re

from gateway.definitions.checks import check_property, unknown_name_problem, where
from gateway.definitions.content_rules import check_content_types, check_schema_format
from gateway.definitions.endpoint_rules import check_endpoint
from gateway.definitions.envelope_rules import check_envelope
from gateway.definitions.model import Catalog, MessageDefinition, OptionConstraint, Provenance
from gateway.definitions.typecheck import compatible, has_placeholder
from gateway.protocols import (
    DEFINITION_FIELDS,
    PROTOCOLS,
    ValueFormat,
    definition_field,
    family_members,
    find_profile,
    is_known_protocol,
    profile,
)
from gateway.spec.problems import Problem, Problems, suggest


def validate_catalog(catalog: Catalog) -> list[Problem]:
    problems = Problems()
    containers = [(g.envelope, g.protocol, g.messages) for g in catalog.groups.values()]
    containers += [(e.envelope, e.protocol, e.messages) for e in catalog.endpoints.values()]
    for envelope, protocol, messages in containers:
        for m in messages:
            validate_message(m, problems)
            _check_consistency(m, envelope, protocol, problems)
    for endpoint in catalog.endpoints.values():
        check_endpoint(endpoint, catalog, problems)
    return problems.items


def validate_message(m: MessageDefinition, problems: Problems) -> None:
    check_envelope(m, problems)
    _check_protocol(m, problems)
    _check_exclusions(m, problems)
    check_schema_format(m, problems)
    check_content_types(m, problems)


def _at(m: MessageDefinition, *parts: str | int) -> Provenance:
    return where(m.field_provenance, m.provenance, *parts)


def _check_protocol(m: MessageDefinition, problems: Problems) -> None:
    protocol = m.protocol
    if protocol is None:
        if m.raw_protocol_options:
            at = _at(m, "protocoloptions")
            problems.warning(at.file, at.path, "protocoloptions without a protocol are ignored",
                             'set "protocol" (e.g. "MQTT/5.0") or remove protocoloptions')
        return
    if not is_known_protocol(protocol):
        at = _at(m, "protocol")
        guess = suggest(protocol, PROTOCOLS)
        problems.warning(
            at.file, at.path,
            f"unknown protocol '{protocol}'; its protocoloptions are not checked"
            + (f"; did you mean '{guess}'?" if guess else ""),
            f"use one of: {', '.join(PROTOCOLS)}",
        )
        return
    if not m.raw_protocol_options and not m.protocol_options and not m.incomplete:
        # REQUIRED with a protocol (rc2): a definition that constrains nothing of the
        # protocol matches every message of it. An error where the message names the
        # protocol itself; a warning where it inherits it (from its group or endpoint).
        at = _at(m, "protocol")
        report = problems.error if declared_here(m, at) else problems.warning
        report(at.file, at.path,
               f"a message with protocol '{protocol}' must declare protocoloptions",
               'add "protocoloptions" (e.g. the topic or path it arrives on), or remove '
               "the protocol")
    _check_option_names(m, protocol, problems)
    for constraint in m.protocol_options:
        _check_constraint(m, protocol, constraint, problems)


def declared_here(m: MessageDefinition, at: Provenance) -> bool:
    """Whether the attribute at `at` is written in the message itself, not inherited from
    its group or endpoint."""
    return at.file == m.provenance.file and at.path.startswith(m.provenance.path)


def _check_option_names(m: MessageDefinition, protocol: str, problems: Problems) -> None:
    names = [spec.name for spec in DEFINITION_FIELDS[protocol]]
    for name, value in m.raw_protocol_options.items():
        spec = definition_field(protocol, name)
        at = _at(m, "protocoloptions", name)
        if spec is None:
            sibling = _sibling_with(protocol, name)
            if sibling is not None:
                problems.warning(at.file, at.path,
                                 f"option '{name}' exists only in {sibling} (ignored)",
                                 f'remove it, or use "protocol": "{sibling}"')
            else:
                unknown_name_problem(problems, at, f"{protocol} option", name, names)
            continue
        if spec.members and isinstance(value, dict):
            members = [n for n, _ in spec.members]
            for member in value:
                if spec.member_type(member) is None:
                    unknown_name_problem(problems, _at(m, "protocoloptions", name, member),
                                         f"AMQP {name} member", member, members)


def _check_constraint(
    m: MessageDefinition, protocol: str, c: OptionConstraint, problems: Problems
) -> None:
    spec = definition_field(protocol, c.field)
    assert spec is not None  # constraints exist only for known fields
    if spec.kind == "scalar":
        fixed: str | None = spec.type
        at = _at(m, "protocoloptions", c.field)
        label = f"{protocol} option '{c.field}'"
    else:
        fixed = spec.member_type(c.name or "") if spec.kind == "section" else None
        at = c.prop.provenance or _at(m, "protocoloptions", c.field)
        label = f"{protocol} {c.field} '{c.name}'"
    prop = c.prop
    if fixed is not None and not compatible(prop.type, fixed):
        problems.warning(at.file, at.path,
                         f"{label} is declared as '{prop.type}' but the protocol defines "
                         f"it as '{fixed}'", f'declare "type": "{fixed}" or leave type out')
    prof = find_profile(protocol)
    ranged = prof is not None and (c.field, c.name) in prof.definitions.ranges
    if not check_property(problems, prop, label, at, expected=fixed,
                          protocol_field=fixed is not None, own_range=ranged):
        return  # the value has the wrong type; range and format checks would only repeat it
    _check_range(protocol, c, label, at, problems)
    if spec.value_format is not None:
        _check_format(spec.value_format, c, label, at, problems)
    if spec.name_format is not None and not re.match(spec.name_format.pattern, c.name or ""):
        problems.error(at.file, at.path, f"{label}: {c.name!r} is not {spec.name_format.noun}",
                       spec.name_format.fix)


def _sibling_with(protocol: str, name: str) -> str | None:
    """Another protocol of the family that defines option `name` (MQTT/5.0 for a 3.1.1
    definition using a 5.0-only option)."""
    return next((p.name for p in family_members(profile(protocol).family)
                 if p.name != protocol and p.definition_field(name) is not None), None)


def _check_range(
    protocol: str, c: OptionConstraint, label: str, at: Provenance, problems: Problems
) -> None:
    prof = find_profile(protocol)
    limits = None if prof is None else prof.definitions.ranges.get((c.field, c.name))
    value = c.prop.value
    if limits is None or not c.prop.has_value or not isinstance(value, int):
        return
    low, high = limits
    if not low <= value <= high:
        problems.error(at.file, at.path, f"{label}: value {value} is outside {low}..{high}",
                       f"give an integer between {low} and {high}")


def _check_format(form: ValueFormat, c: OptionConstraint, label: str, at: Provenance,
                  problems: Problems) -> None:
    value = c.prop.value
    if not c.prop.has_value or not isinstance(value, str) or has_placeholder(value):
        return
    if not re.match(form.pattern, value):
        problems.error(at.file, at.path, f"{label}: {value!r} is not {form.noun}", form.fix)


def _check_exclusions(m: MessageDefinition, problems: Problems) -> None:
    prof = find_profile(m.protocol)
    for rule in () if prof is None else prof.definitions.exclusive:
        first, second = rule.first, rule.second
        if first in m.raw_protocol_options and second in m.raw_protocol_options:
            at = _at(m, "protocoloptions", second)
            problems.error(at.file, at.path,
                           f"{m.protocol} options '{first}' and '{second}' are mutually "
                           "exclusive", rule.fix)
    if (m.dataschemauri is not None or "$.dataschema" in m.field_provenance) and not (
        m.dataschemaformat
    ):
        at = _at(m, "dataschemauri" if m.dataschemauri is not None else "dataschema")
        problems.error(at.file, at.path,
                       "a schema reference needs 'dataschemaformat' (how to read the schema)",
                       'add e.g. "dataschemaformat": "JsonSchema/draft-07"')
    if "$.dataschema" in m.field_provenance and m.dataschemauri is not None:
        at = _at(m, "dataschema")
        problems.error(at.file, at.path,
                       "'dataschema' (inline schema) and 'dataschemauri' are mutually exclusive",
                       "keep the inline dataschema or the dataschemauri link, not both")


def _check_consistency(
    m: MessageDefinition, envelope: str | None, protocol: str | None, problems: Problems
) -> None:
    for what, mine, theirs in (("protocol", m.protocol, protocol),
                               ("envelope", m.envelope, envelope)):
        if mine is not None and theirs is not None and mine != theirs:
            at = _at(m, what)
            report = problems.error if what == "protocol" else problems.warning
            report(at.file, at.path,
                             f"message {what} '{mine}' differs from its group's '{theirs}'",
                             f"every message of a group uses the group's {what}; move the "
                             f"message to a group for '{mine}' or fix the value")
