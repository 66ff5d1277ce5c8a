"""Message definitions of two catalogs compared by xid, field by field.

A definition is compared as it is effective, after its `basemessage` chain was merged:
a change to a base message shows at every definition built on it. Fields are named as
in a document (`protocoloptions.topic_name`, `envelopemetadata.source`,
`protocoloptions.headers[eventType]`); a declaration (`{type, value, required}`) is
compared member by member, so a tightened type reads `....type: "string" -> "integer"`.
Where a document was read from (file, JSON path, declaration order) is not compared.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from gateway.definitions.model import MessageDefinition, Property
from gateway.jsontypes import JSON, JSONObject

ABSENT: JSON = object()  # type: ignore[assignment]  # the field is not there at all

#: The scalar members of a definition compared as they are, in the order shown.
_SCALARS = ("envelope", "protocol", "datacontenttype", "dataschemaformat", "dataschemauri",
            "dataschemaxid", "dataschema", "name", "description", "deprecated", "incomplete")


@dataclass(frozen=True)
class FieldChange:
    field: str
    old: JSON  # ABSENT: the field is new
    new: JSON  # ABSENT: the field was removed

    def to_json(self) -> JSONObject:
        out: JSONObject = {"field": self.field}
        if self.old is not ABSENT:
            out["old"] = self.old
        if self.new is not ABSENT:
            out["new"] = self.new
        return out


@dataclass(frozen=True)
class DefinitionChange:
    kind: Literal["added", "removed", "changed"]
    definition: MessageDefinition  # NEW's, or OLD's when removed
    fields: tuple[FieldChange, ...] = ()

    @property
    def xid(self) -> str:
        return self.definition.xid

    def to_json(self) -> JSONObject:
        out: JSONObject = {"xid": self.xid, "change": self.kind,
                           "file": self.definition.provenance.file,
                           "path": self.definition.provenance.path}
        if self.fields:
            out["fields"] = [change.to_json() for change in self.fields]
        return out


def definition_fields(definition: MessageDefinition) -> dict[str, JSON]:
    """The compared fields of a definition; a declaration is an object of its members."""
    out: dict[str, JSON] = {}
    for name in _SCALARS:
        value = getattr(definition, name)
        if value is not None and value is not False:
            out[name] = value
    for key, option in definition.envelope_options.items():
        out[f"envelopeoptions.{key}"] = option
    for attribute, prop in definition.envelope_metadata.items():
        out[f"envelopemetadata.{attribute}"] = _declaration(prop)
    for constraint in definition.protocol_options:
        where = (constraint.field if constraint.name is None
                 else f"{constraint.field}[{constraint.name}]")
        out[f"protocoloptions.{where}"] = _declaration(constraint.prop)
    return out


def _declaration(prop: Property) -> JSONObject:
    out: JSONObject = {"type": prop.type}
    if prop.has_value:
        out["value"] = prop.value
    out["required"] = prop.required
    if prop.description is not None:
        out["description"] = prop.description
    return out


def field_changes(old: MessageDefinition, new: MessageDefinition) -> tuple[FieldChange, ...]:
    before, after = definition_fields(old), definition_fields(new)
    changes: list[FieldChange] = []
    for name in dict.fromkeys([*before, *after]):
        was, now = before.get(name, ABSENT), after.get(name, ABSENT)
        if was == now:
            continue
        if isinstance(was, dict) and isinstance(now, dict):
            # Both declared: the members that differ, one line each.
            for member in dict.fromkeys([*was, *now]):
                if was.get(member, ABSENT) != now.get(member, ABSENT):
                    changes.append(FieldChange(f"{name}.{member}", was.get(member, ABSENT),
                                               now.get(member, ABSENT)))
        else:
            changes.append(FieldChange(name, was, now))
    return tuple(changes)


def diff_definitions(old: Iterable[MessageDefinition],
                     new: Iterable[MessageDefinition]) -> list[DefinitionChange]:
    """Removed, then changed and added in NEW's order."""
    before = {d.xid: d for d in old}
    after = {d.xid: d for d in new}
    out = [DefinitionChange("removed", d) for xid, d in before.items() if xid not in after]
    for xid, definition in after.items():
        was = before.get(xid)
        if was is None:
            out.append(DefinitionChange("added", definition))
        elif fields := field_changes(was, definition):
            out.append(DefinitionChange("changed", definition, fields))
    return out


__all__ = ["ABSENT", "DefinitionChange", "FieldChange", "definition_fields",
           "diff_definitions", "field_changes"]
