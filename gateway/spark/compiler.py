"""Compile message definitions into the data the SQL plan is built from.

Nothing here touches Spark: the output is plain Python (the candidate table rows, the
check *signatures* that become static SQL expressions, the index slots, the CloudEvent
columns) so compilation problems surface before a session exists.

- Every definition is compiled by the core (`compile_definition`, `EnvelopeTemplate`);
  this module only translates the core's checks, so the semantics cannot drift.
- Definitions sharing a check *signature* (same fields, kinds, types and capture layout,
  different constants / regexes) share one SQL expression; per-definition values travel
  as data in the candidate table.
- A definition the SQL plan cannot express exactly is marked for the Python stage with
  the reason; `explain()` lists which path every definition takes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from gateway.cloudevents.typesystem import to_json_value
from gateway.definitions.model import MessageDefinition
from gateway.envelope.render import EnvelopeTemplate
from gateway.json.values import as_text
from gateway.matching.compiled import Check, CompiledDefinition, compile_definition
from gateway.matching.index import WILD
from gateway.matching.values import ADDRESS_FIELD
from gateway.protocols import PROFILES, field_access
from gateway.schemas.enforce import validator_of
from gateway.templates.match import linear_regex
from gateway.templates.template import Template

CORE_ATTRIBUTES = ("specversion", "id", "source", "type", "subject", "time",
                   "datacontenttype", "dataschema", "traceparent", "tracestate")
SEP = "\u0001"  # joins the parts of an index key; cannot occur in a topic or path


_SLOT_ORDER = ("x", "s", "p", "r")
# One rendered attribute's shape: absent, a fixed value, or a template (its declared type
# and parts: -1 a literal, else the capture slot). Literals are per-definition data.
AttributeShape = tuple[str, str, tuple[int, ...]]


class CompileError(ValueError):
    """A definition set the Spark job cannot run; the message says what and why."""


@dataclass(frozen=True)
class ReaderSpec:
    """How one constrained field is read (mirrors `gateway.matching.values.reader_for`)."""

    kind: Literal["scalar", "section", "pairs"]
    field: str
    name: str | None = None
    case_insensitive: bool = False


def reader_spec(protocol: str, field_name: str, name: str | None) -> ReaderSpec:
    # Percent-encoded values never reach SQL (the screen sends them to the core), so
    # `access.percent_encoded` needs no counterpart here.
    access = field_access(protocol, field_name, name)
    return ReaderSpec(access.kind, field_name, access.name, access.case_insensitive)


@dataclass(frozen=True)
class CheckShape:
    """The static part of one check; constants and regexes are per-definition data."""

    reader: ReaderSpec
    mode: Literal["presence", "const", "regex", "segments"]
    type: str  # declared type when it can fail (`conforms`), else ""
    required: bool
    slots: tuple[int, ...] = ()  # capture slot of each group / captured segment
    positions: tuple[int, ...] = ()  # segment positions (mode "segments")


@dataclass
class DefinitionPlan:
    index: int
    definition: MessageDefinition
    family: str | None
    key: str | None = None  # index key; None: not matched by SQL (CloudEvents-only)
    key_kind: str = ""
    signature: int = -1
    checks: tuple[CheckShape, ...] = ()
    consts: list[str | None] = field(default_factory=list)
    regexes: list[str | None] = field(default_factory=list)
    names: list[str] = field(default_factory=list)  # capture slots
    python: str | None = None  # why rows it could match go to the Python stage
    # Its checks cannot be judged in SQL, so a record that fetches it at all goes to
    # Python; otherwise only a record it wins does (its rendering needs Python).
    python_match: bool = False
    fixed: dict[str, str] = field(default_factory=dict)
    templated: list[tuple[str, str, list[tuple[str | None, int]]]] = field(default_factory=list)
    specificity: tuple[int, int] = (0, 0)
    slot: tuple[Any, ...] = ()  # which index-key slot of a record finds this definition
    shapes: list[int] = field(default_factory=list)  # per attribute: its shape id, -1 absent
    offsets: list[int] = field(default_factory=list)  # per attribute: first entry in rvals
    rvals: list[str] = field(default_factory=list)  # fixed values and template literals
    time_from_receive: bool = True
    content_type: str | None = None
    dataschema: str | None = None

    @property
    def xid(self) -> str:
        return self.definition.xid


@dataclass
class CompiledCatalog:
    definitions: list[MessageDefinition]
    plans: list[DefinitionPlan]
    signatures: list[tuple[CheckShape, ...]]
    # family -> segment count -> shape ids (literal positions) in slot order
    shapes: dict[str, dict[int, list[tuple[int, ...]]]]
    prefixes: dict[str, list[int]]  # family -> literal prefix lengths
    rest_families: set[str]
    extensions: dict[str, str]  # extension column -> Spark type
    ambiguity: str = "first"
    validate_schema: bool = False
    # The route's `schema` policy (gateway.schemas.enforce); None: off, or tiebreak with
    # `validate_schema`.
    schema: str | None = None
    # Rendered attributes in column order, and per attribute its distinct shapes.
    attributes: list[str] = field(default_factory=list)
    attribute_shapes: list[list[AttributeShape]] = field(default_factory=list)
    # extension -> the JSON type the compiled path renders it with in the event text,
    # where that differs from its column's (a typed value in a string column).
    extension_json: dict[str, str] = field(default_factory=dict)

    @property
    def sql_families(self) -> frozenset[str]:
        """The definition families some definition is found in by the index join: only
        records of these can take the compiled path."""
        return frozenset(plan.family for plan in self.plans
                         if plan.key is not None and plan.family is not None)

    @property
    def sql_protocols(self) -> frozenset[str]:
        """The record protocols of `sql_families` (MQTT: 5.0 and 3.1.1)."""
        return frozenset(prof.name for prof in PROFILES if prof.family in self.sql_families)

    def slots(self) -> list[tuple[Any, ...]]:
        """The record's index-key slots that can find a definition, in a fixed order."""
        seen = {plan.slot for plan in self.plans if plan.key is not None}
        return sorted(seen, key=lambda s: (_SLOT_ORDER.index(s[0]), s[1:]))

    def positions(self, slot: tuple[Any, ...]) -> list[list[int]]:
        """Per candidate position of a slot's array: the check signatures found there."""
        by_key: dict[str, list[DefinitionPlan]] = {}
        for plan in self.plans:
            if plan.key is not None and plan.slot == slot:
                by_key.setdefault(plan.key, []).append(plan)
        out: list[list[int]] = []
        for plans in by_key.values():
            for position, plan in enumerate(plans):
                if position == len(out):
                    out.append([])
                if plan.signature not in out[position]:
                    out[position].append(plan.signature)
        return out

    @property
    def readers(self) -> list[ReaderSpec]:
        """Every distinct field reader, in a fixed order (the candidates index into it)."""
        seen: dict[ReaderSpec, None] = {}
        for signature in self.signatures:
            for shape in signature:
                seen.setdefault(shape.reader, None)
        return list(seen)

    def explain(self) -> list[str]:
        lines = []
        for plan in self.plans:
            where = "python" if plan.python else "sql"
            why = f" ({plan.python})" if plan.python else ""
            index = f" index={plan.key_kind}" if plan.key_kind else ""
            lines.append(f"{plan.xid}: {where}{why}{index}")
        counts = sum(1 for p in self.plans if not p.python), len(self.plans)
        lines.append(f"{counts[0]} of {counts[1]} definition(s) compiled to SQL, "
                     f"{len(self.signatures)} check signature(s)")
        return lines


def java_regex(template: Template) -> tuple[str, list[str]] | None:
    """An anchored Java regex equivalent to `Template.match`, and its group names; None
    when no regex can match the template in linear time (the Python stage matches it).

    `gateway.templates.match.linear_regex` in Java's dialect: Java backtracks like Python,
    so the lazy `[^/]+?` groups would cost seconds per record on a long topic here too.
    Java group names allow no `_`, so groups are numbered and repeats are backrefs.
    """
    if template.whole_value:
        return "(?s)^(.+)\\z", [template.parts[0].name or ""]
    return linear_regex(template, "java")


def _inert_regex(groups: int) -> str:
    """A linear regex with `groups` groups for a check the Python stage decides (its
    definition is `python_match`): `regexp_extract` needs the groups to exist."""
    return "(?s)^" + "()" * groups + ".*\\z"


def _key_label(family: str) -> str:
    field_name, name = ADDRESS_FIELD[family]
    return field_name if name is None else f"{field_name}[{name}]"


def _split_label(label: str) -> tuple[str, str | None]:
    if "[" in label:
        head, _, rest = label.partition("[")
        return head, rest[:-1]
    return label, None


class _Builder:
    def __init__(self) -> None:
        self.signatures: dict[tuple[CheckShape, ...], int] = {}
        self.shapes: dict[str, dict[int, list[tuple[int, ...]]]] = {}
        self.prefixes: dict[str, list[int]] = {}
        self.rest: set[str] = set()
        self.ext_types: dict[str, set[str]] = {}

    def index_key(self, plan: DefinitionPlan, key_check: Check | None) -> tuple[int, ...] | None:
        """Mirror `KeyIndex.add`; returns the segment positions a segmented key captures."""
        fam = plan.family or ""
        if key_check is None or (key_check.template is None and not key_check.has_constant):
            plan.key, plan.key_kind, plan.slot = f"{fam}{SEP}r", "rest", ("r",)
            self.rest.add(fam)
            return None
        if key_check.template is None:
            if not isinstance(key_check.constant, str):
                plan.key, plan.key_kind, plan.slot = f"{fam}{SEP}r", "rest", ("r",)
                self.rest.add(fam)
            else:
                plan.key, plan.key_kind = f"{fam}{SEP}x{SEP}{key_check.constant}", "exact"
                plan.slot = ("x",)
            return None
        template = key_check.template
        if template.segmented:
            segments = template.expand({n: WILD for n in template.names}).split("/")
            literal = tuple(i for i, s in enumerate(segments) if WILD not in s)
            shapes = self.shapes.setdefault(fam, {}).setdefault(len(segments), [])
            if literal not in shapes:
                shapes.append(literal)
            shape_id = f"{len(segments)}:{','.join(map(str, literal))}"
            plan.key = SEP.join([fam, "s", shape_id, *(segments[i] for i in literal)])
            plan.key_kind = "segments"
            plan.slot = ("s", shapes.index(literal))
            return tuple(i for i, s in enumerate(segments) if s == WILD)
        prefix = template.literal_prefix
        if not prefix:
            plan.key, plan.key_kind, plan.slot = f"{fam}{SEP}r", "rest", ("r",)
            self.rest.add(fam)
        else:
            lengths = self.prefixes.setdefault(fam, [])
            if len(prefix) not in lengths:
                lengths.append(len(prefix))
            plan.key, plan.key_kind = f"{fam}{SEP}p{len(prefix)}{SEP}{prefix}", "prefix"
            plan.slot = ("p", lengths.index(len(prefix)))
        return None

    def checks(self, plan: DefinitionPlan, compiled: CompiledDefinition,
               key_check: Check | None, captured: tuple[int, ...] | None) -> None:
        protocol = plan.definition.protocol or ""
        shapes: list[CheckShape] = []
        for check in compiled.protocol_checks:
            field_name, name = _split_label(check.label)
            reader = reader_spec(protocol, field_name, name)
            typ = check.declared if check.check_type else ""
            const: str | None = None
            regex: str | None = None
            if check.template is not None:
                template = check.template
                names = list(template.names)
                repeated = len(names) != sum(1 for p in template.parts if p.name)
                if (check is key_check and captured is not None and not repeated
                        and len(captured) == len(names)):
                    # The index join already compared the literal segments: captures are
                    # read by position, no regex runs.
                    slots = tuple(_slot(plan.names, n) for n in names)
                    shapes.append(CheckShape(reader, "segments", typ, check.required,
                                             slots, captured))
                else:
                    written = java_regex(template)
                    if written is None:
                        # A repeated name no segment fixes: matched by a search, not a
                        # regex (`gateway.templates.match`), so in Python.
                        plan.python = plan.python or f"template {template.text} needs a search"
                        plan.python_match = True
                        regex, groups = _inert_regex(len(names)), names
                    else:
                        regex, groups = written
                    slots = tuple(_slot(plan.names, n) for n in groups)
                    shapes.append(CheckShape(reader, "regex", typ, check.required, slots))
            elif check.has_constant:
                if isinstance(check.constant, (dict, list)):
                    plan.python = "object-valued constant"
                    plan.python_match = True
                const = as_text(check.constant)
                shapes.append(CheckShape(reader, "const", typ, check.required))
            else:
                shapes.append(CheckShape(reader, "presence", typ, check.required))
            plan.consts.append(const)
            plan.regexes.append(regex)
        signature = tuple(shapes)
        plan.checks = signature
        plan.signature = self.signatures.setdefault(signature, len(self.signatures))

    def envelope(self, plan: DefinitionPlan) -> None:
        template = EnvelopeTemplate(plan.definition)
        if template.error is not None:
            plan.python = f"renders {template.error.reason}"
            return
        for name, value in template.fixed.items():
            json_value = to_json_value(value)
            plan.fixed[name] = as_text(json_value)
            self._ext(name, "boolean" if isinstance(json_value, bool)
                      else "int" if isinstance(json_value, int) else "string")
        for attribute in template.attributes:
            assert attribute.template is not None
            if attribute.type in ("timestamp", "datetime"):
                plan.python = f"templated timestamp attribute {attribute.name}"
            parts: list[tuple[str | None, int]] = []
            for part in attribute.template.parts:
                if part.literal is not None:
                    parts.append((part.literal, -1))
                elif part.name in plan.names:
                    parts.append((None, plan.names.index(part.name)))
                else:
                    plan.python = f"renders missing-context ({{{part.name}}} is not captured)"
            plan.templated.append((attribute.name, attribute.type, parts))
            self._ext(attribute.name, "int" if attribute.type == "integer"
                      else "boolean" if attribute.type == "boolean" else "string")
        plan.time_from_receive = template.time_from_receive
        plan.content_type = template.content_type
        plan.dataschema = template.dataschema

    def _ext(self, name: str, spark_type: str) -> None:
        if name not in CORE_ATTRIBUTES:
            self.ext_types.setdefault(name, set()).add(spark_type)


def _slot(names: list[str], name: str) -> int:
    if name not in names:
        names.append(name)
    return names.index(name)


def compile_catalog(
    definitions: Iterable[MessageDefinition],
    *,
    ambiguity: str = "first",
    validate_schema: bool = False,
    schema: str | None = None,
) -> CompiledCatalog:
    listed = list(definitions)
    if schema is not None and schema not in ("off", "tiebreak", "enforce"):
        raise CompileError(f"schema must be off, tiebreak or enforce, not {schema!r}")
    if schema is not None:
        validate_schema = schema != "off"
    if not listed:
        raise CompileError("no message definitions to compile (check -c / -d)")
    if ambiguity not in ("first", "deadletter"):
        raise CompileError(f"ambiguity must be first or deadletter, not {ambiguity!r}")
    builder = _Builder()
    plans: list[DefinitionPlan] = []
    for index, definition in enumerate(listed):
        compiled = compile_definition(definition)
        plan = DefinitionPlan(index, definition, compiled.family,
                              specificity=compiled.specificity)
        plans.append(plan)
        if schema == "enforce" and validator_of(definition) is not None:
            # The body is checked by the same validator as the daemon's, in Python.
            plan.python = "its payload schema is enforced"
            continue
        if compiled.family is None or compiled.family not in ADDRESS_FIELD:
            # CloudEvents-only (or unknown protocol): such records are never SQL-eligible.
            plan.python = "matched on CloudEvents attributes"
            continue
        label = _key_label(compiled.family)
        key_check = next((c for c in compiled.protocol_checks if c.label == label), None)
        captured = builder.index_key(plan, key_check)
        builder.checks(plan, compiled, key_check, captured)
        builder.envelope(plan)
    # One JSON type per extension on the compiled path (definitions that disagree go to
    # Python), and the column type: typed only where no CloudEvent can bring text.
    rendered: dict[str, str] = {}
    for name, types in builder.ext_types.items():
        rendered[name] = next(iter(types)) if len(types) == 1 else "string"
    for plan in plans:
        for name, value_type in _plan_types(plan):
            if name in rendered and rendered[name] != value_type and not plan.python:
                plan.python = f"extension {name} is declared with different types"
    extensions = {name: typed if _typed_everywhere(listed, name, typed) else "string"
                  for name, typed in rendered.items()}
    extension_json = {name: typed for name, typed in rendered.items()
                      if typed != extensions[name]}
    _check_regexes(plans)
    attributes = [*CORE_ATTRIBUTES[1:], *sorted(extensions)]
    attribute_shapes = _attribute_layout(plans, attributes)
    return CompiledCatalog(
        listed, plans, list(builder.signatures), builder.shapes, builder.prefixes,
        builder.rest, extensions, ambiguity, validate_schema, schema, attributes,
        attribute_shapes, extension_json,
    )


def _attribute_layout(plans: Sequence[DefinitionPlan],
                      attributes: list[str]) -> list[list[AttributeShape]]:
    """Give every plan its per-attribute shape ids, offsets and literal values.

    Shapes are numbered per attribute, so the SQL for one attribute has one branch per
    distinct way the definitions declare it (usually one or two), however many there are.
    """
    layout: list[list[AttributeShape]] = [[] for _ in attributes]
    for plan in plans:
        if plan.key is None:
            continue
        if plan.python is not None:
            # Rendered by the Python stage: its templates may be incomplete (a missing
            # capture), so they get no shape (and no branch in the SQL).
            plan.offsets.extend(0 for _ in attributes)
            plan.shapes.extend(-1 for _ in attributes)
            continue
        templated = {name: (typ, parts) for name, typ, parts in plan.templated}
        for position, name in enumerate(attributes):
            shape: AttributeShape | None = None
            plan.offsets.append(len(plan.rvals))
            if name in plan.fixed:
                shape = ("fixed", "", ())
                plan.rvals.append(plan.fixed[name])
            elif name in templated:
                typ, parts = templated[name]
                kinds = []
                for literal, slot in parts:
                    kinds.append(-1 if literal is not None else slot)
                    if literal is not None:
                        plan.rvals.append(literal)
                shape = ("template", typ, tuple(kinds))
            if shape is None:
                plan.shapes.append(-1)
                continue
            if shape not in layout[position]:
                layout[position].append(shape)
            plan.shapes.append(layout[position].index(shape))
    return layout


_DECLARED = {"int": "integer", "boolean": "boolean"}


def _typed_everywhere(definitions: Sequence[MessageDefinition], name: str, typed: str) -> bool:
    """Whether an extension column may have a non-string type: only when every definition
    that can pass a CloudEvent through declares the attribute with that type, so that a
    CloudEvent's value (text in every binary binding) is known to convert. Otherwise the
    column holds the canonical string form (5 -> "5"), and no record can fail the job."""
    if typed == "string":
        return True
    for definition in definitions:
        if not definition.is_cloudevent:
            continue
        declared = definition.envelope_metadata.get(name)
        if declared is None or declared.type != _DECLARED[typed]:
            return False
    return True


def _plan_types(plan: DefinitionPlan) -> list[tuple[str, str]]:
    out = [(n, "string") for n in plan.fixed]
    out += [(n, "int" if t == "integer" else "boolean" if t == "boolean" else "string")
            for n, t, _ in plan.templated]
    return out


def _check_regexes(plans: Sequence[DefinitionPlan]) -> None:
    """Java and Python must read a regex the same way; reject what they could not."""
    for plan in plans:
        for regex in plan.regexes:
            if regex is not None and "\\Q" in regex:  # pragma: no cover - never generated
                raise CompileError(f"{plan.xid}: unsupported template regex {regex!r}")


def plan_rows(catalog: CompiledCatalog) -> list[dict[str, Any]]:
    """The candidate table: one row per SQL-matchable definition, in catalog order.

    Only per-definition *data* is here (constants, regexes, literals, ranks); the SQL
    that reads it is generated once per check signature and attribute shape.
    """
    rows = []
    for plan in catalog.plans:
        if plan.key is None:
            continue
        spec = plan.definition
        rows.append({
            "k": plan.key,
            "slot": plan.slot,
            "lit": plan.specificity[0],
            "cnt": plan.specificity[1],
            "negorder": -spec.order,
            "idx": plan.index,
            "sig": plan.signature,
            "py": plan.python is not None,
            "pym": plan.python_match,
            "schema": validator_of(spec) is not None or (
                isinstance(spec.dataschema, dict)
                and (spec.dataschemaformat or "").lower().startswith("jsonschema")),
            "consts": plan.consts,
            "regexes": plan.regexes,
            "xid": plan.xid,
            "names": plan.names,
            "shapes": plan.shapes,
            "offsets": plan.offsets,
            "rvals": plan.rvals,
            "tfr": plan.time_from_receive,
            "ctype": plan.content_type,
            "dschema": plan.dataschema,
        })
    return rows
