"""Message definitions (and endpoints) of two catalogs compared by xid, field by field.

A definition is compared as it is effective, after its `basemessage` chain was merged:
a change to a base message shows at every definition built on it. Fields are named as
in a document (`protocoloptions.topic_name`, `envelopemetadata.source`,
`protocoloptions.headers[eventType]`); a declaration (`{type, value, required}`) is
compared member by member, so a tightened type reads `....type: "string" -> "integer"`;
so is the schema a definition's `dataschemauri` resolves to (`schema.required`, ...).
Where a document was read from (file, JSON path, declaration order) is not compared.
Endpoints are compared the same way, by their options as normalized (`endpoint_fields`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal, TypeVar

from gateway.definitions.model import Endpoint, MessageDefinition, Property, Provenance
from gateway.definitions.schema_model import SchemaResolution
from gateway.json.values import JSON, JSONObject

T = TypeVar("T")

ABSENT: JSON = object()  # type: ignore[assignment]  # the field is not there at all

#: The scalar members of a definition compared as they are, in the order shown.
_SCALARS = ("envelope", "protocol", "datacontenttype", "dataschemaformat", "dataschemauri",
            "dataschemaxid", "name", "description", "deprecated", "incomplete")


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
class EntityChange:
    """A message definition or an endpoint added, removed or changed."""

    kind: Literal["added", "removed", "changed"]
    xid: str
    provenance: Provenance  # in NEW, or in OLD when removed
    fields: tuple[FieldChange, ...] = ()

    def to_json(self) -> JSONObject:
        out: JSONObject = {"xid": self.xid, "change": self.kind,
                           "file": self.provenance.file, "path": self.provenance.path}
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
    schema = _schema(definition.schema)
    if schema is not None:
        out["schema"] = schema
    return out


def _schema(resolution: SchemaResolution | None) -> JSON:
    """The schema a definition's reference resolves to: a change inside a schema group
    changes every definition naming it, though `dataschemauri` stays the same."""
    if resolution is None:
        return None
    if resolution.document is None:
        return {"error": resolution.error}
    if resolution.remote is not None:
        return {"remote": resolution.remote}
    content = resolution.document.content
    if isinstance(content, bytes):  # a descriptor set or schemabase64: its digest
        return {"sha256": hashlib.sha256(content).hexdigest()}
    return content


def _declaration(prop: Property) -> JSONObject:
    out: JSONObject = {"type": prop.type}
    if prop.has_value:
        out["value"] = prop.value
    out["required"] = prop.required
    if prop.description is not None:
        out["description"] = prop.description
    return out


def _changes(prefix: str, before: dict[str, JSON], after: dict[str, JSON]) -> list[FieldChange]:
    """The members that differ; where both sides are objects (a declaration, a schema),
    the members inside them, one line each, named by their dotted path."""
    out: list[FieldChange] = []
    for name in dict.fromkeys([*before, *after]):
        was, now = before.get(name, ABSENT), after.get(name, ABSENT)
        if was == now:
            continue
        if isinstance(was, dict) and isinstance(now, dict):
            out += _changes(f"{prefix}{name}.", was, now)
        else:
            out.append(FieldChange(prefix + name, was, now))
    return out


def endpoint_fields(endpoint: Endpoint) -> dict[str, JSON]:
    """The compared fields of an endpoint (its inline definitions are compared as
    definitions; here only their xids)."""
    out: dict[str, JSON] = {}
    for name in ("protocol", "channel", "envelope", "name", "description"):
        value = getattr(endpoint, name)
        if value is not None:
            out[name] = value
    out["usage"] = list(endpoint.usage)
    out["deployed"] = endpoint.deployed
    out["messagegroups"] = list(endpoint.messagegroups)
    if endpoint.messages:
        out["messages"] = [d.xid for d in endpoint.messages]
    for key, option in endpoint.protocol_options.items():
        out[f"protocoloptions.{key}"] = option
    for key, option in endpoint.envelope_options.items():
        out[f"envelopeoptions.{key}"] = option
    return out


def diff_definitions(old: Iterable[MessageDefinition],
                     new: Iterable[MessageDefinition]) -> list[EntityChange]:
    """Removed, then changed and added in NEW's order."""
    return _diff({d.xid: (d.provenance, d) for d in old},
                 {d.xid: (d.provenance, d) for d in new}, definition_fields)


def diff_endpoints(old: Iterable[Endpoint], new: Iterable[Endpoint]) -> list[EntityChange]:
    """Removed, then changed and added in NEW's order."""
    return _diff({e.xid: (e.provenance, e) for e in old},
                 {e.xid: (e.provenance, e) for e in new}, endpoint_fields)


def _diff(before: Mapping[str, tuple[Provenance, T]], after: Mapping[str, tuple[Provenance, T]],
          fields_of: Callable[[T], dict[str, JSON]]) -> list[EntityChange]:
    out = [EntityChange("removed", xid, where) for xid, (where, _) in before.items()
           if xid not in after]
    for xid, (where, entity) in after.items():
        was = before.get(xid)
        if was is None:
            out.append(EntityChange("added", xid, where))
        elif changes := _changes("", fields_of(was[1]), fields_of(entity)):
            out.append(EntityChange("changed", xid, where, tuple(changes)))
    return out


__all__ = ["ABSENT", "EntityChange", "FieldChange", "definition_fields", "diff_definitions",
           "diff_endpoints", "endpoint_fields"]
