"""Normalization of a message's `protocoloptions` for its (effective) protocol.

Field names become the `gateway.protocols.DEFINITION_FIELDS` names, whatever the document
wrote: MQTT `topic`/`topic-name` -> `topic_name`, `user-properties` -> `user_properties`,
`payload_format_indicator` -> `payload_format`; AMQP `application_properties` ->
`application-properties` and `message_id` -> `message-id`; NATS `reply` -> `reply-to`.
Nesting that real catalogs add is flattened: `protocoloptions.options.*`
(real-time-sources) and, for MQTT, `protocoloptions.properties.*` (xrcg samples).

Values take one canonical shape per field kind, each constraint a declaration object:
  scalar  -> {type?, value?, required?, ...}
  list    -> [{name, value?, ...}, ...]       (a map {name: decl} is accepted and converted,
                                               and the 2023 draft's [{name: decl}, ...])
  map     -> {name: {value?, ...}, ...}       (an array of {name, value} is accepted, and the
                                               JSON-Schema-like {"type": "object",
                                               "properties": {...}} xrcg writes for headers)
  section -> {member: {value?, ...}, ...}     (AMQP; plain member values become {value})
Unknown fields (and everything under an unknown protocol) are kept as written; the
validator reports them and they produce no constraints.
"""

from __future__ import annotations

from gateway.definitions.located import Located, Origin, Parts
from gateway.definitions.reader import DECLARATION_KEYS, declaration
from gateway.definitions.spelling import SpellingLog
from gateway.json.values import JSON, JSONObject
from gateway.protocols import FieldSpec, definition_field, find_profile
from gateway.spec.problems import Problems


class _Context:
    def __init__(self, protocol: str | None, problems: Problems, log: SpellingLog) -> None:
        self.protocol = protocol
        self.problems = problems
        self.log = log
        self.origins: dict[Parts, Origin] = {}

    def error(self, where: Origin, message: str, fix: str) -> None:
        self.problems.error(where.file, where.path, message, fix)

    def warning(self, where: Origin, message: str, fix: str) -> None:
        self.problems.warning(where.file, where.path, message, fix)


def normalize_protocol_options(
    loc: Located, protocol: str | None, problems: Problems, log: SpellingLog
) -> None:
    """Rewrite `loc.data["protocoloptions"]` in place into its canonical shape."""
    if "protocoloptions" not in loc.data:
        return
    raw = loc.data["protocoloptions"]
    where = loc.locate("protocoloptions")
    ctx = _Context(protocol, problems, log)
    loc.drop("protocoloptions")
    if not isinstance(raw, dict):
        ctx.error(where, "protocoloptions must be an object",
                  'write e.g. "protocoloptions": {"topic_name": "a/{b}"}')
        return
    canonical: JSONObject = {}
    for name, value, at in _flatten(raw, where, ctx):
        field = _field_name(name, at, ctx)
        if field in canonical:
            ctx.warning(at, f"option '{field}' is given more than once; the first one is used",
                        f"keep a single '{field}'")
            continue
        canonical[field] = _normalize_value(field, value, at, ctx)
        ctx.origins[("protocoloptions", field)] = at
    loc.data["protocoloptions"] = canonical
    loc.origins[("protocoloptions",)] = where
    loc.origins.update(ctx.origins)


def _flatten(raw: JSONObject, where: Origin, ctx: _Context) -> list[tuple[str, JSON, Origin]]:
    """Top-level entries first, then those nested under `options` / MQTT `properties`."""
    nested_keys = {"options"}
    prof = find_profile(ctx.protocol)
    if prof is not None:
        nested_keys.update(prof.definitions.nested)  # MQTT `properties` (xrcg nests there)
    out = [(k, v, where.child(k)) for k, v in raw.items()
           if not (k in nested_keys and isinstance(v, dict))]
    for key in sorted(nested_keys):
        nested = raw.get(key)
        if isinstance(nested, dict):
            ctx.log.note(where.child(key), f"protocoloptions.{key}.*", "protocoloptions.*")
            out += [(k, v, where.child(key, k)) for k, v in nested.items()]
    return out


def _field_name(name: str, at: Origin, ctx: _Context) -> str:
    protocol = ctx.protocol
    if protocol is None:
        return name
    prof = find_profile(protocol)
    renamed = None if prof is None else prof.definitions.renames.get(name)
    if renamed is None:
        for old, new in (("-", "_"), ("_", "-")):
            candidate = name.replace(old, new)
            if candidate != name and definition_field(protocol, candidate) is not None:
                renamed = candidate
                break
    if renamed is None or definition_field(protocol, renamed) is None:
        return name
    if prof is None or name not in prof.definitions.quiet_renames:
        ctx.log.note(at, name, renamed)
    return renamed


def _normalize_value(field: str, value: JSON, at: Origin, ctx: _Context) -> JSON:
    spec = definition_field(ctx.protocol, field) if ctx.protocol else None
    if spec is None:
        return value
    if spec.kind == "scalar":
        return declaration(value)
    if spec.kind == "list":
        return _as_list(field, value, at, ctx)
    if spec.kind == "map":
        return _as_map(field, value, at, ctx)
    return _as_section(spec, value, at, ctx)


def _as_list(field: str, value: JSON, at: Origin, ctx: _Context) -> JSON:
    """Entries with repeatable names (`user_properties`, NATS/HTTP `headers`)."""
    out: list[JSON] = []
    if isinstance(value, dict):  # {name: decl} reads as one entry per name
        for name, decl in value.items():
            entry = declaration(decl)
            entry["name"] = name
            ctx.origins[("protocoloptions", field, len(out))] = at.child(name)
            out.append(entry)
        return out
    if not isinstance(value, list):
        ctx.error(at, f"'{field}' must be an array of {{name, value}} entries",
                  f'write "{field}": [{{"name": "...", "value": "..."}}]')
        return out
    for index, item in enumerate(value):
        where = at.child(index)
        if (isinstance(item, dict) and len(item) == 1
                and not set(item) & DECLARATION_KEYS):
            # The 2023 draft's MQTT/5.0 shape: each entry a single-key map
            # `{"<name>": {"value": ...}}`.
            [(name, decl)] = item.items()
            ctx.log.note(where, f"{field} entry {{<name>: {{...}}}}",
                         f'{field} entry {{"name": <name>, ...}}')
            entry = declaration(decl)
            entry["name"] = name
            ctx.origins[("protocoloptions", field, len(out))] = where.child(name)
            out.append(entry)
            continue
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            ctx.error(where, f"each '{field}' entry must be an object with a string 'name'",
                      'write {"name": "...", "value": "..."}')
            continue
        ctx.origins[("protocoloptions", field, len(out))] = where
        out.append(dict(item))
    return out


def _as_map(field: str, value: JSON, at: Origin, ctx: _Context) -> JSON:
    """Entries keyed by a unique name (Kafka `headers`, HTTP `query`)."""
    out: JSONObject = {}
    if isinstance(value, list):
        for index, item in enumerate(value):
            where = at.child(index)
            name = item.get("name") if isinstance(item, dict) else None
            if not isinstance(name, str):
                ctx.error(where, f"each '{field}' entry must be an object with a string 'name'",
                          'write {"name": "...", "value": "..."}')
                continue
            if name in out:
                ctx.warning(where, f"'{field}' entry '{name}' is given twice; the last one is used",
                            f"keep one '{name}' entry")
            out[name] = dict(item) if isinstance(item, dict) else {}
            ctx.origins[("protocoloptions", field, name)] = where
        return out
    if not isinstance(value, dict):
        ctx.error(at, f"'{field}' must be an object keyed by name",
                  f'write "{field}": {{"<name>": {{"value": "..."}}}}')
        return out
    entries, base = value, at
    if _schema_wrapper(value):
        ctx.log.note(at.child("properties"), f"{field}.properties", field)
        properties = value["properties"]
        assert isinstance(properties, dict)
        entries, base = properties, at.child("properties")
    for name, decl in entries.items():
        where = base.child(name)
        entry = declaration(decl)
        inner = entry.get("name")
        if inner is not None and inner != name:
            ctx.warning(where.child("name"),
                        f"'{field}' entry keyed '{name}' has name {inner!r}; the key is used",
                        f"make 'name' equal to '{name}' or remove it")
        out[name] = entry
        ctx.origins[("protocoloptions", field, name)] = where
    return out


def _schema_wrapper(value: JSONObject) -> bool:
    return (
        value.get("type") == "object"
        and isinstance(value.get("properties"), dict)
        and set(value) <= {"type", "properties", "description", "required"}
    )


def _as_section(spec: FieldSpec, value: JSON, at: Origin, ctx: _Context) -> JSON:
    """An AMQP section: fixed members (properties, header) or open maps."""
    out: JSONObject = {}
    if not isinstance(value, dict):
        ctx.error(at, f"AMQP section '{spec.name}' must be an object",
                  f'write "{spec.name}": {{"<name>": {{"value": "..."}}}}')
        return out
    for name, decl in value.items():
        member = name
        if spec.members and spec.member_type(name) is None:
            hyphenated = name.replace("_", "-")
            if spec.member_type(hyphenated) is not None:
                ctx.log.note(at.child(name), name, hyphenated)
                member = hyphenated
        if member in out:
            ctx.warning(at.child(name), f"'{spec.name}' member '{member}' is given twice; "
                        "the first one is used", f"keep one '{member}'")
            continue
        out[member] = declaration(decl)
        ctx.origins[("protocoloptions", spec.name, member)] = at.child(name)
    return out

