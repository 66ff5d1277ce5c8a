"""Property declarations -> `Property`, with the spec's type defaults.

Type defaults (a declaration without `type`):
- CloudEvents attributes: the spec's table with the model's choices (notes 1.4):
  `source`, `subject`, `dataschema` are `uritemplate`, `time` is `timestamp`, the other
  base attributes and every extension attribute `string`.
- protocol fields: the field's type in `gateway.protocols.DEFINITION_FIELDS` (AMQP
  `properties`/`header` members: the member's type). Members of open AMQP sections
  (`application-properties`, annotations, footer) may carry any AMQP type, so a
  non-string value with no declared type takes the type of its JSON value.
Older type names are read as today's: `datetime` -> `timestamp`, `var` -> `any`,
`uri-reference` (CloudEvents' spelling) -> `urireference`.
"""

from __future__ import annotations

from gateway.definitions.located import Located, Origin
from gateway.definitions.model import OptionConstraint, Property
from gateway.json.values import JSON, JSONObject
from gateway.protocols import FieldSpec, definition_field
from gateway.spec.problems import Problems

CLOUDEVENTS_TYPES: dict[str, str] = {
    "specversion": "string",
    "id": "string",
    "type": "string",
    "source": "uritemplate",
    "subject": "uritemplate",
    "time": "timestamp",
    "dataschema": "uritemplate",
    "datacontenttype": "string",
}
CLOUDEVENTS_REQUIRED = ("id", "type", "source")  # implicitly required, never optional
KNOWN_TYPES = frozenset({
    "any", "binary", "boolean", "duration", "integer", "number", "string", "symbol",
    "timestamp", "uri", "uritemplate",
    "urireference",  # rc1 and older; read as a string-like type
})
# `uri-reference` is the CloudEvents spelling of rc1's `urireference`.
_TYPE_ALIASES = {"datetime": "timestamp", "var": "any", "uri-reference": "urireference"}


def build_property(
    decl: JSON,
    default_type: str,
    where: Origin,
    problems: Problems,
    *,
    infer_type: bool = False,
    required: bool | None = None,
) -> Property:
    """`required` (when given) overrides the declared flag: implicit CloudEvents rules."""
    body: JSONObject = decl if isinstance(decl, dict) else {"value": decl}
    typ = declared_type(body, where, problems)
    has_value = "value" in body
    value = body.get("value")
    if typ is None:
        typ = _json_type(value) if infer_type and has_value and value is not None else None
        typ = typ or default_type
    flag = body.get("required", False)
    if not isinstance(flag, bool):
        problems.error(where.file, where.child("required").path,
                       f"'required' must be true or false, not {flag!r}",
                       'write "required": true or "required": false')
        flag = False
    description = body.get("description")
    return Property(
        type=typ,
        value=value,
        has_value=has_value,
        required=flag if required is None else required,
        description=description if isinstance(description, str) else None,
        provenance=where.provenance(),
    )


def declared_type(body: JSONObject, where: Origin, problems: Problems) -> str | None:
    if "type" not in body:
        return None
    typ = body["type"]
    if not isinstance(typ, str):
        problems.error(where.file, where.child("type").path,
                       f"'type' must be a string, not {typ!r}",
                       'write e.g. "type": "string"')
        return None
    lowered = typ.strip().lower()
    return _TYPE_ALIASES.get(lowered, lowered)


def _json_type(value: JSON) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        # `integer` is 32-bit; an AMQP long or ulong member value is still a number
        return "integer" if -(2**31) <= value < 2**31 else "number"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "any"


def envelope_properties(loc: Located, problems: Problems) -> dict[str, Property]:
    metadata = loc.data.get("envelopemetadata")
    if not isinstance(metadata, dict):
        return {}
    cloudevents = loc.data.get("envelope") == "CloudEvents/1.0"
    out: dict[str, Property] = {}
    for name, decl in metadata.items():
        implicit = True if cloudevents and name in CLOUDEVENTS_REQUIRED else None
        default = CLOUDEVENTS_TYPES.get(name, "string") if cloudevents else "string"
        out[name] = build_property(decl, default, loc.locate("envelopemetadata", name),
                                   problems, required=implicit)
    return out


def option_constraints(
    loc: Located, protocol: str | None, problems: Problems
) -> tuple[OptionConstraint, ...]:
    """One constraint per scalar field, list entry, map key and section member, in the
    order written. Fields the protocol does not define produce none."""
    options = loc.data.get("protocoloptions")
    if protocol is None or not isinstance(options, dict):
        return ()
    out: list[OptionConstraint] = []
    for field, value in options.items():
        spec = definition_field(protocol, field)
        if spec is None:
            continue
        out += _field_constraints(spec, value, loc, problems)
    return tuple(out)


def _field_constraints(
    spec: FieldSpec, value: JSON, loc: Located, problems: Problems
) -> list[OptionConstraint]:
    field = spec.name
    if spec.kind == "scalar":
        where = loc.locate("protocoloptions", field)
        return [OptionConstraint(field, None, build_property(value, spec.type, where, problems))]
    out: list[OptionConstraint] = []
    if spec.kind == "list" and isinstance(value, list):
        for index, entry in enumerate(value):
            name = entry.get("name") if isinstance(entry, dict) else None
            if isinstance(name, str):
                where = loc.locate("protocoloptions", field, index)
                out.append(OptionConstraint(
                    field, name, build_property(entry, spec.type, where, problems)))
    elif isinstance(value, dict):
        for name, decl in value.items():
            where = loc.locate("protocoloptions", field, name)
            member_type = spec.member_type(name) if spec.kind == "section" else None
            infer = spec.kind == "section" and not spec.members
            prop = build_property(decl, member_type or spec.type, where, problems,
                                  infer_type=infer)
            out.append(OptionConstraint(field, name, prop))
    return out
