"""Small checks shared by the validators: where a canonical path was written, name
suggestions, property value types and template syntax."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from gateway.definitions.model import Property, Provenance
from gateway.definitions.properties import KNOWN_TYPES
from gateway.definitions.typecheck import STRING_TYPES, has_placeholder, value_problem
from gateway.spec.problems import Problems, json_path, suggest
from gateway.templates.template import Template, TemplateError

# Type names of other systems (JSON Schema, Avro, programming languages) -> ours.
_TYPE_HINTS = {"float": "number", "double": "number", "decimal": "number", "int": "integer",
               "long": "integer", "bool": "boolean", "date-time": "timestamp",
               "bytes": "binary", "object": "any", "array": "any"}
_LEVEL1_FIX = ("use RFC 6570 level-1 placeholders only: {name} with letters, digits and "
               "underscore; no operators (+ # . / ; ? &), no * or :n modifiers")


def where(
    field_provenance: Mapping[str, Provenance], fallback: Provenance, *parts: str | int
) -> Provenance:
    """Where the canonical path `parts` was written: its recorded provenance, or that of
    its longest recorded prefix with the rest appended."""
    for cut in range(len(parts), 0, -1):
        found = field_provenance.get(json_path(*parts[:cut]))
        if found is not None:
            return Provenance(found.file, found.path + json_path(*parts[cut:])[1:])
    return Provenance(fallback.file, fallback.path + json_path(*parts)[1:])


def unknown_name_problem(
    problems: Problems, at: Provenance, what: str, name: str, choices: Iterable[str]
) -> None:
    known = sorted(choices)
    guess = suggest(name, known)
    hint = f"; did you mean '{guess}'?" if guess else ""
    fix = f"rename it to '{guess}'" if guess else f"use one of: {', '.join(known)}"
    problems.warning(at.file, at.path, f"unknown {what} '{name}'{hint}",
                     f"{fix} (until then it is ignored)")


def check_property(
    problems: Problems, prop: Property, label: str, at: Provenance, expected: str | None = None,
    *, protocol_field: bool = False, own_range: bool = False,
) -> bool:
    """Declared type known, value of the right type, templates level 1. False when the
    value has the wrong type (so callers skip checks that would only repeat it).
    `protocol_field`: `expected` is the protocol table's type; `own_range`: the protocol
    gives the field a range of its own (`typecheck.value_problem`)."""
    if prop.type not in KNOWN_TYPES:
        # rc2: the valid types are CloudEvents' with a few additions; a misspelt type
        # would silently constrain nothing.
        guess = _TYPE_HINTS.get(prop.type) or suggest(prop.type, KNOWN_TYPES)
        hint = f"; did you mean '{guess}'?" if guess else ""
        problems.error(
            at.file, at.path, f"{label}: unknown type '{prop.type}'{hint}",
            f"use one of: {', '.join(sorted(KNOWN_TYPES))}",
        )
        return False
    if not prop.has_value:
        return True
    typ = expected or prop.type
    value = prop.value
    if (typ not in STRING_TYPES and typ != "any" and isinstance(value, str)
            and has_placeholder(value)):
        # rc2: a value MUST be a valid value for the property; placeholders belong to
        # string, symbol, uri and uritemplate values.
        problems.error(at.file, at.path,
                       f"{label}: {typ} value {value!r} holds a placeholder; placeholders "
                       "are only allowed in string, symbol, uri and uritemplate values",
                       f"give a {typ} value, or declare a string type if it is rendered "
                       "from captured context")
        return False
    why = value_problem(value, typ, protocol_field=protocol_field, own_range=own_range)
    if why is not None:
        article = "an" if typ[:1] in "aeiou" else "a"
        problems.error(at.file, at.path, f"{label}: value {value!r} {why}",
                       f"give {article} {typ} value")
        return False
    check_template(problems, prop, label, at)
    return True


def templated_timestamp(problems: Problems, value: object, label: str, at: Provenance) -> bool:
    """Whether a CloudEvents `time` value is a placeholder template (then reported, and
    True).

    The spec allows placeholders only in string-like values (elsewhere it is an error,
    `check_property`), but real catalogs map a native field into the CloudEvents `time`
    this way (seattle-911: "{incident_datetime_utc}") and the Context Attributes section
    is exactly that use; for `time` it is a warning, not an error (the value filled in
    must be RFC 3339, or the message is dead-lettered).
    """
    if not isinstance(value, str) or not has_placeholder(value):
        return False
    try:
        Template.parse(value)
    except TemplateError as exc:
        problems.error(at.file, at.path, f"{label}: {exc}", _LEVEL1_FIX)
        return True
    problems.warning(at.file, at.path,
                     f"{label}: timestamp value {value!r} is a template; placeholders are only "
                     "defined for string-like types, and the value filled in must be RFC 3339",
                     'declare "type": "uritemplate" if the value is rendered from context, or '
                     "give an RFC 3339 timestamp")
    return True


def check_template(problems: Problems, prop: Property, label: str, at: Provenance) -> None:
    value = prop.value
    if not isinstance(value, str) or prop.type not in STRING_TYPES:
        return
    if "{" not in value and "}" not in value:
        return
    try:
        Template.parse(value)
    except TemplateError as exc:
        problems.error(at.file, at.path, f"{label}: {exc}", _LEVEL1_FIX)


def check_string_templates(problems: Problems, value: object, label: str, at: Provenance) -> None:
    """Template syntax of every string inside an option value (endpoint options)."""
    if isinstance(value, str):
        check_template(problems, Property(value=value, has_value=True), label, at)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            check_string_templates(problems, item, label,
                                   Provenance(at.file, at.path + f"[{index}]"))
    elif isinstance(value, dict):
        for key, item in value.items():
            check_string_templates(problems, item, label,
                                   Provenance(at.file, at.path + json_path(str(key))[1:]))
