"""Building the typed `MessageDefinition` from a resolved canonical object."""

from __future__ import annotations

from gateway.definitions.layout import RawMessage
from gateway.definitions.located import Located, Origin
from gateway.definitions.model import MessageDefinition, Provenance
from gateway.definitions.properties import envelope_properties, option_constraints
from gateway.definitions.resolve import Resolved
from gateway.json.values import JSON, JSONObject
from gateway.spec.problems import Problems, json_path

_TEXT_FIELDS = ("dataschemaformat", "dataschemauri", "dataschemaxid", "datacontenttype",
                "name", "description")


def apply_group_defaults(loc: Located, group: Located) -> None:
    """A message that does not state its envelope or protocol has its group's (the
    spec requires every message of a group to use the group's)."""
    for key in ("envelope", "protocol"):
        if key not in loc.data and isinstance(group.data.get(key), str):
            loc.put(key, group.data[key], group.locate(key))


def build_message(raw: RawMessage, resolved: Resolved, problems: Problems) -> MessageDefinition:
    loc = resolved.loc
    data = loc.data
    texts = {key: _text(data, key, loc.locate(key), problems) for key in _TEXT_FIELDS}
    envelope = data.get("envelope")
    protocol = data.get("protocol")
    options = data.get("protocoloptions")
    metadata = data.get("envelopemetadata")
    envelope_options = data.get("envelopeoptions")
    return MessageDefinition(
        xid=raw.xid,
        message_id=raw.message_id,
        group_id=raw.group_id,
        provenance=raw.origin.provenance(),
        envelope=envelope if isinstance(envelope, str) else None,
        envelope_metadata=envelope_properties(loc, problems),
        envelope_options=dict(envelope_options) if isinstance(envelope_options, dict) else {},
        protocol=protocol if isinstance(protocol, str) else None,
        protocol_options=option_constraints(
            loc, protocol if isinstance(protocol, str) else None, problems),
        raw_protocol_options=dict(options) if isinstance(options, dict) else {},
        dataschemaformat=texts["dataschemaformat"],
        dataschema=data.get("dataschema"),
        dataschemauri=texts["dataschemauri"],
        dataschemaxid=texts["dataschemaxid"],
        datacontenttype=texts["datacontenttype"],
        name=texts["name"],
        description=texts["description"],
        deprecated=_deprecated(data.get("deprecated"), loc.locate("deprecated"), problems),
        incomplete=resolved.incomplete,
        order=raw.order,
        raw_envelope_metadata=dict(metadata) if isinstance(metadata, dict) else {},
        field_provenance=_field_provenance(loc),
        base_chain=resolved.chain,
    )


def _text(data: JSONObject, key: str, where: Origin, problems: Problems) -> str | None:
    value = data.get(key)
    if value is None or isinstance(value, str):
        return value
    problems.error(where.file, where.path, f"'{key}' must be a string, not {value!r}",
                   f'write "{key}": "..."')
    return None


def _deprecated(value: JSON, where: Origin, problems: Problems) -> bool:
    """rc4 spells deprecation as an object ({effective, removal, ...}); older documents
    used a boolean."""
    if value is None or isinstance(value, bool):
        return bool(value)
    if isinstance(value, dict):
        return True
    problems.warning(where.file, where.path, f"'deprecated' should be an object, not {value!r}",
                     'write "deprecated": {} (optionally with effective/removal/alternative)')
    return bool(value)


def _field_provenance(loc: Located) -> dict[str, Provenance]:
    return {json_path(*parts): origin.provenance() for parts, origin in loc.origins.items()
            if parts}
