"""One message definition compiled into checks: predicates plus capture extractors.

A `Check` is one constraint (`topic_name`, a header, an AMQP property, a CloudEvents
attribute). Checks run in declaration order; captures accumulate in one context where a
placeholder name used twice must carry the same value.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from gateway.cloudevents.mediatype import comparable
from gateway.cloudevents.typesystem import INT32_MAX
from gateway.definitions.model import MessageDefinition, OptionConstraint, Property
from gateway.json.values import JSON, as_text
from gateway.matching.values import (
    Reader,
    conforms,
    family,
    reader_for,
    same_value,
)
from gateway.protocols import (
    FieldAccess,
    definition_field,
    field_access,
    find_profile,
    percent_decoded,
    token_separator,
)
from gateway.record import NativeMessage
from gateway.templates.template import Template, TemplateError

# A record and its address split on `/` (when the index found the definition by its
# shape) -> the captured context, or None when the record does not conform.
NativeTest = Callable[[NativeMessage, "list[str] | None"], "dict[str, str] | None"]

# Declared types whose string values may hold placeholders (rc2: string, symbol, uri and
# uritemplate values), and those of them that accept any value (no type check).
_TEMPLATED = {"string", "uritemplate", "uri", "urireference", "symbol", "any", ""}
_STRINGY = {"string", "uritemplate", "any", ""}
TIME_SENTINEL = "0000-01-01T00:00:00Z"


@dataclass(frozen=True)
class Failure:
    """The first constraint a message failed, phrased for `explain`."""

    label: str
    expected: str
    got: str

    def __str__(self) -> str:
        return f"{self.label}: expected {self.expected}, got {self.got}"


class Check:
    """One compiled constraint. `values` are what the message carries for the field."""

    __slots__ = ("access", "attribute", "check_type", "constant", "declared", "decode",
                 "has_constant", "label", "literal_weight", "match_fn", "reader", "required",
                 "template")

    def __init__(
        self, label: str, prop: Property, reader: Reader | None, attribute: str | None = None,
        decode: bool = False,
        separator: str = "/",
        access: FieldAccess | None = None,
        declared: str | None = None,
    ) -> None:
        self.label = label
        # Where a protocol check reads the record (what `reader` reads), for the matcher's
        # specialised tests (`gateway.matching.fast`); None for envelope checks.
        self.access = access
        # Percent-encoded field (HTTP path, query): compare decoded, capture raw then decode.
        self.decode = decode
        self.reader = reader
        self.attribute = attribute  # CloudEvents attribute name for envelope checks
        # `declared` overrides the property's type where the protocol reads it its own
        # way (`_protocol_type`).
        self.declared = declared or prop.type or "string"
        self.required = prop.required
        self.template: Template | None = None
        self.has_constant = False
        self.constant: JSON = None
        self.literal_weight = 0
        if prop.has_value:
            value = prop.value
            if isinstance(value, str) and self.declared in _TEMPLATED and "{" in value:
                try:
                    template = Template.parse(value, separator)
                except TemplateError:
                    template = None  # the validator reports it; compare literally instead
                if template is not None and not template.is_constant:
                    self.template = template
                    self.literal_weight = template.literal_length
            if self.template is None:
                self.has_constant = True
                self.constant = value
                self.literal_weight = len(as_text(value)) + 1
        # The template's match function, built on first use (`matcher`): most
        # templates never need it (the index reads address captures by segment, `{name}`
        # alone captures the whole value), and compiling 10,000 of them was half the
        # start-up of a large catalog.
        self.match_fn: Callable[[str], dict[str, str] | None] | None = None
        # Whether a type check can fail at all (string-like declarations accept any value).
        self.check_type = self.declared not in _STRINGY

    def matcher(self) -> Callable[[str], dict[str, str] | None]:
        """The template's `match`: captures or None, in time linear in the value's length
        (the check must have a template)."""
        match_fn = self.match_fn
        if match_fn is None:
            assert self.template is not None
            match_fn = self.match_fn = self.template.matcher
        return match_fn

    @property
    def constrains(self) -> bool:
        return self.template is not None or self.has_constant or self.required

    def expected(self) -> str:
        if self.template is not None:
            return self.template.text
        if self.has_constant:
            return as_text(self.constant)
        if self.required:
            return f"a {self.declared} value (required)"
        return f"a {self.declared} value"

    def choices(self, values: list[JSON], context: Mapping[str, str]
                ) -> list[dict[str, str]] | None:
        """The captures of every value that passes and agrees with `context`, each once,
        in order; None when the check captures nothing (`apply` decides it)."""
        if self.template is None:
            return None
        out: list[dict[str, str]] = []
        for value in values:
            found: dict[str, str] = {}
            if self.apply([value], found) is not None:
                continue
            if all(context.get(k, v) == v for k, v in found.items()) and found not in out:
                out.append(found)
        return out

    def apply(self, values: list[JSON], context: dict[str, str]) -> Failure | None:
        """Check `values`; on success merge captures into `context` and return None."""
        if not values:
            if self.required or self.has_constant or self.template is not None:
                return Failure(self.label, self.expected(), "nothing (field absent)")
            return None
        last_got = values[0]
        clash: tuple[str, str] | None = None
        match_fn = self.matcher() if self.template is not None else None
        for value in values:
            plain = unquote(value) if self.decode and value.__class__ is str else value
            if self.check_type and not conforms(plain, self.declared):
                last_got = value
                continue
            if self.has_constant:
                if same_value(plain, self.constant) or same_value(value, self.constant):
                    return None
                if (self.attribute == "datacontenttype" and isinstance(value, str)
                        and isinstance(self.constant, str)
                        and comparable(value) == comparable(self.constant)):
                    return None  # media types compare case-insensitively
                last_got = value
                continue
            if match_fn is not None:
                if value.__class__ is not str:
                    value = as_text(value)
                captures = match_fn(value)
                if captures is None:
                    last_got = value
                    continue
                if self.decode:
                    captures = {k: unquote(v) for k, v in captures.items()}
                clashing = _merge(context, captures)
                if clashing is None:
                    return None
                # A placeholder has one value: a repeated field (MQTT user properties,
                # headers) passes when any of its entries agrees with it.
                clash = (clashing, captures[clashing])
                last_got = value
                continue
            return None  # presence / type constraint satisfied
        if clash is not None:
            name, got = clash
            return Failure(self.label, f"{{{name}}} = {context[name]!r} (captured earlier)",
                           f"{got!r}")
        if not self.has_constant and self.template is None:
            return Failure(self.label, f"a value of type {self.declared}", _show(last_got))
        return Failure(self.label, self.expected(), _show(last_got))


def _show(value: Any) -> str:
    return value if isinstance(value, str) else repr(value)


def _merge(context: dict[str, str], captures: Mapping[str, str]) -> str | None:
    """Merge captures into the context; on a clash, the clashing name and the context
    unchanged (the next entry of a repeated field is tried against it)."""
    for name, value in captures.items():
        seen = context.get(name)
        if seen is not None and seen != value:
            return name
    context.update(captures)
    return None


@dataclass(slots=True)
class CompiledDefinition:
    definition: MessageDefinition
    family: str | None
    protocol_checks: list[Check] = field(default_factory=list)
    envelope_checks: list[Check] = field(default_factory=list)
    # (literal characters, constrained fields) of the checks that apply to a native
    # message (protocol checks only) and to a CloudEvent (protocol + envelope checks).
    specificity: tuple[int, int] = (0, 0)
    specificity_ce: tuple[int, int] = (0, 0)
    # Set by the matcher when the address template is `/`-segmented with whole-segment
    # placeholders: the index has already compared the literal segments, so the address
    # check reduces to reading captures by position (no regex).
    address_check: Check | None = None
    address_captures: tuple[tuple[str, int], ...] | None = None
    # Set by the matcher when the index keys the definition on its constant address: a
    # record found that way passes `address_check` (the native test leaves it out).
    address_exact: bool = False
    # Set when the index splits a large bucket by constant checks (`matching.narrow`):
    # those of this definition's checks a record found through the split always passes.
    narrowed_checks: tuple[Check, ...] = ()
    # How many of `protocol_checks`, at their end, capture from repeated fields (headers,
    # user properties): their entries are searched for one consistent choice.
    repeated: int = 0
    # Set by the matcher: `evaluate(record, None)` as one specialised function
    # (`gateway.matching.fast`), the captured context or None.
    native_test: NativeTest = field(default=lambda record, segments: _not_indexed())

    @property
    def envelope_only(self) -> bool:
        return self.definition.protocol is None and self.definition.is_cloudevent

    def evaluate(
        self,
        record: NativeMessage,
        event: Mapping[str, JSON] | None,
        context: dict[str, str] | None = None,
        skip: Check | None = None,
    ) -> dict[str, str] | Failure:
        """Captured context when the message conforms, else the first failure.

        `context` and `skip` let the matcher hand in captures it already read (the address
        check verified by the index) so that check is not run twice."""
        if context is None:
            context = {}
        checks = self.protocol_checks
        single = len(checks) - self.repeated
        for check in checks[:single]:
            if check is skip:
                continue
            assert check.reader is not None
            failure = check.apply(check.reader(record), context)
            if failure is not None:
                return failure
        later = [(check, _values(check, record, event)) for check in checks[single:]]
        if event is not None:
            later += [(check, _values(check, record, event)) for check in self.envelope_checks]
        if self.repeated:
            return search(later, context)
        for check, values in later:
            failure = check.apply(values, context)
            if failure is not None:
                return failure
        return context

    def score(self, record: NativeMessage, event: Mapping[str, JSON] | None) -> int:
        """How many checks pass, for ranking the nearest definitions in `explain`."""
        passed = 0
        context: dict[str, str] = {}
        for check in self.protocol_checks:
            assert check.reader is not None
            if check.apply(check.reader(record), context) is None:
                passed += 1
        if event is not None:
            for check in self.envelope_checks:
                name = check.attribute or ""
                if check.apply([event[name]] if name in event else [], context) is None:
                    passed += 1
        return passed


def _values(check: Check, record: NativeMessage, event: Mapping[str, JSON] | None
            ) -> list[JSON]:
    if check.reader is not None:
        return check.reader(record)
    name = check.attribute or ""
    return [event[name]] if event is not None and name in event else []


def search(checks: list[tuple[Check, list[JSON]]], context: dict[str, str]
            ) -> dict[str, str] | Failure:
    """The checks in order, where a check with several agreeing entries (a repeated field
    captured into a placeholder) tries each in turn: a placeholder has one value, and
    the message conforms when some choice of entries agrees on it everywhere."""
    for position, (check, values) in enumerate(checks):
        choices = check.choices(values, context)
        if choices is None:  # no captures: passes or fails as a whole
            failure = check.apply(values, context)
            if failure is not None:
                return failure
            continue
        first: Failure | None = None
        for captures in choices:
            found = search(checks[position + 1:], {**context, **captures})
            if not isinstance(found, Failure):
                context.clear()
                context.update(found)
                return context
            first = first or found
        return first if first is not None else check.apply(values, dict(context)) or Failure(
            check.label, check.expected(), "no entry agreeing with the captured values")
    return context


def _not_indexed() -> dict[str, str] | None:
    raise AssertionError("native_test of a definition no Matcher has indexed")


def compile_definition(definition: MessageDefinition) -> CompiledDefinition:
    fam = family(definition.protocol)
    compiled = CompiledDefinition(definition, fam)
    if definition.protocol is not None:
        protocol = definition.protocol
        repeated: list[Check] = []
        for constraint in definition.protocol_options:
            label = (
                constraint.field
                if constraint.name is None
                else f"{constraint.field}[{constraint.name}]"
            )
            access = field_access(protocol, constraint.field, constraint.name)
            check = Check(label, constraint.prop,
                          reader_for(protocol, constraint.field, constraint.name),
                          decode=percent_decoded(protocol, constraint.field),
                          separator=token_separator(protocol, constraint.field),
                          access=access,
                          declared=_protocol_type(protocol, constraint))
            if check.constrains or check.check_type:
                # Captures from repeated fields run last, so a placeholder they share with
                # a single-valued field is compared with its value whatever the order
                # written (one of the entries must agree with it).
                last = access.kind == "pairs" and check.template is not None
                (repeated if last else compiled.protocol_checks).append(check)
        compiled.protocol_checks += repeated
        compiled.repeated = len(repeated)
    if definition.is_cloudevent:
        for name, prop in definition.envelope_metadata.items():
            if name in ("id", "specversion"):
                continue  # ids are per event; specversion is checked by the CE decoder
            if name == "time" and prop.has_value and prop.value == TIME_SENTINEL:
                prop = Property(type=prop.type, required=prop.required)
            check = Check(f"cloudevent {name}", prop, None, attribute=name)
            # A declaration with only a type constrains too: `"count": {"type": "integer"}`
            # refuses a CloudEvent whose count is "many".
            if check.constrains or check.check_type:
                compiled.envelope_checks.append(check)
    compiled.specificity = _specificity(compiled.protocol_checks)
    compiled.specificity_ce = _specificity(compiled.protocol_checks + compiled.envelope_checks)
    return compiled


def _protocol_type(protocol: str, constraint: OptionConstraint) -> str | None:
    """The type a protocol constraint is checked as, where it is not the declared one:
    - `symbol` fields of the protocol tables (AMQP content-type, content-encoding, MQTT
      content_type) carry media types (the spec's AMQP example sets "application/json"),
      so they are read as AMQP symbols, i.e. text, not the Property Definitions' symbol;
    - `integer` fields the protocol defines as unsigned 32-bit (MQTT message expiry,
      AMQP ttl, delivery-count, group-sequence) are `uint32`, not the 32-bit signed
      CloudEvents Integer."""
    declared = constraint.prop.type
    spec = definition_field(protocol, constraint.field)
    if spec is None:
        return None
    table = spec.type if spec.kind == "scalar" else (
        spec.member_type(constraint.name or "") if spec.kind == "section" else None)
    if declared == "symbol" and table == "symbol":
        return "string"
    if declared == "integer" and table == "integer":
        prof = find_profile(protocol)
        limits = None if prof is None else prof.definitions.ranges.get(
            (constraint.field, constraint.name))
        if limits is not None and limits[1] > INT32_MAX:
            return "uint32"
    return None


def _specificity(checks: list[Check]) -> tuple[int, int]:
    return (sum(c.literal_weight for c in checks), sum(1 for c in checks if c.constrains))
