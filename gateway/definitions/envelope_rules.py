"""CloudEvents 1.0 envelope rules (spec "Metadata Envelopes: CloudEvents/1.0")."""

from __future__ import annotations

import re
from collections.abc import Mapping

from gateway.definitions.checks import check_property, templated_timestamp, where
from gateway.definitions.model import CLOUDEVENTS, MessageDefinition, Provenance
from gateway.definitions.properties import CLOUDEVENTS_REQUIRED
from gateway.definitions.typecheck import TIME_SENTINEL, has_placeholder, is_rfc3339
from gateway.spec.problems import Problems

_ATTRIBUTE_NAME = re.compile(r"[a-z0-9]+\Z")


def check_envelope(m: MessageDefinition, problems: Problems) -> None:
    if m.envelope is None:
        if m.envelope_metadata:
            at = _at(m, "envelopemetadata")
            problems.warning(at.file, at.path, "envelopemetadata without an envelope is ignored",
                             'set "envelope": "CloudEvents/1.0"')
        return
    if m.envelope != CLOUDEVENTS:
        at = _at(m, "envelope")
        problems.warning(at.file, at.path,
                         f"unknown envelope '{m.envelope}'; its metadata is not checked",
                         'use "CloudEvents/1.0" (the only envelope the spec defines)')
        return
    if not m.raw_envelope_metadata and not m.incomplete:  # (a broken base says why)
        # REQUIRED with an envelope (rc2): without it nothing says what type and source
        # the event has, and every message would dead-letter at run time.
        at = _at(m, "envelope")
        own = at.file == m.provenance.file and at.path.startswith(m.provenance.path)
        report = problems.error if own else problems.warning
        report(at.file, at.path,
                       "a message with an envelope must declare envelopemetadata",
                       'add "envelopemetadata": {"type": {"value": "..."}, '
                       '"source": {"value": "..."}}, or remove the envelope')
    for name, prop in m.envelope_metadata.items():
        at = _at(m, "envelopemetadata", name)
        label = f"CloudEvents attribute '{name}'"
        raw = m.raw_envelope_metadata.get(name)
        declared = raw if isinstance(raw, dict) else {}
        if not _ATTRIBUTE_NAME.match(name):
            better = re.sub(r"[^a-z0-9]", "", name.lower()) or "<name>"
            problems.error(at.file, at.path,
                           f"{label}: names must be lower-case letters and digits only",
                           f"rename it to '{better}'")
        if name in CLOUDEVENTS_REQUIRED and declared.get("required") is False:
            problems.error(at.file, at.path,
                           f"{label} is always required and must not be declared required: false",
                           'remove "required": false')
        if name == "specversion":
            _check_specversion(declared, prop.value if prop.has_value else None, at, problems)
            continue
        if name == "time":
            if not (prop.has_value and templated_timestamp(problems, prop.value, label, at)):
                _check_time(prop.value if prop.has_value else None, prop.has_value, at, problems)
            if prop.type != "timestamp":
                check_property(problems, prop, label, at)
            continue
        if name == "id" and prop.has_value and prop.value is not None:
            problems.warning(at.file, at.path, f"{label} should not declare a value: "
                             "every event carries its own id",
                             "remove the value (declare only type or required)")
        check_property(problems, prop, label, at)
        if name == "dataschema":
            _check_dataschema(m, prop.value if prop.has_value else None, at, problems)


def _at(m: MessageDefinition, *parts: str | int) -> Provenance:
    return where(m.field_provenance, m.provenance, *parts)


def _check_specversion(declared: Mapping[str, object], value: object, at: Provenance,
                       problems: Problems) -> None:
    typ = declared.get("type")
    if typ is not None and (not isinstance(typ, str) or typ.lower() != "string"):
        problems.error(at.file, at.path,
                       f"CloudEvents attribute 'specversion' must be of type string, not {typ!r}",
                       'declare "type": "string"')
    if "value" in declared and value != "1.0":
        problems.error(at.file, at.path,
                       f"CloudEvents attribute 'specversion' must have the value \"1.0\", "
                       f"not {value!r}", 'write "value": "1.0" (or leave specversion out)')


def _check_time(value: object, has_value: bool, at: Provenance, problems: Problems) -> None:
    if not has_value:
        return
    if isinstance(value, str) and (value == TIME_SENTINEL or is_rfc3339(value)):
        return
    problems.error(at.file, at.path,
                   f"CloudEvents attribute 'time': value {value!r} is neither an RFC 3339 "
                   f"timestamp nor the {TIME_SENTINEL} (current time) sentinel",
                   f'write an RFC 3339 timestamp such as "2024-01-01T00:00:00Z", or '
                   f'"{TIME_SENTINEL}", or no value')


def _check_dataschema(m: MessageDefinition, value: object, at: Provenance,
                      problems: Problems) -> None:
    if not isinstance(value, str) or m.dataschemauri is None or has_placeholder(value):
        return
    if value != m.dataschemauri:
        problems.error(at.file, at.path,
                       f"CloudEvents attribute 'dataschema' {value!r} differs from the "
                       f"message's dataschemauri {m.dataschemauri!r}",
                       "make them equal, or drop the dataschema value (it is inferred)")
