"""The matcher: find the message definition a native message conforms to.

    matcher = Matcher(catalog.messages())
    result = matcher.match(record, event_attributes)   # MatchResult
    matcher.explain(record)                            # nearest definitions, first failure

Zero, one or several definitions can accept a message. Several: the most specific wins
(more literal characters, then more constrained fields); a true tie is `ambiguous` and the
policy decides: `first` takes the first declared, `deadletter` reports it unmatched-ambiguous.
With `validate_schema` (the route's `schema: tiebreak`), a tie between definitions carrying
a schema is broken by validating the body: inline or referenced, JSON Schema, Avro or
Protobuf (`gateway.schemas`); a definition whose schema cannot be checked stays a candidate.
"""

from __future__ import annotations

import difflib
import json
from bisect import insort
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import groupby, islice
from operator import itemgetter
from typing import Any, Literal
from urllib.parse import unquote

from gateway.definitions.model import MessageDefinition
from gateway.json.values import JSON
from gateway.matching.compiled import Check, CompiledDefinition, Failure, compile_definition
from gateway.matching.fast import Made, definition_test
from gateway.matching.index import KeyIndex
from gateway.matching.values import (
    ADDRESS_FIELD,
    address_of,
    family,
)
from gateway.protocols.accessors import ACCESSORS, FieldReader
from gateway.record import NativeMessage
from gateway.schemas.compile import PayloadValidator
from gateway.schemas.enforce import validator_of
from gateway.templates.template import Template

AmbiguityPolicy = Literal["first", "deadletter"]
# Per protocol: the index of its family, its scalar address field, its address reader.
_NativeRoute = tuple["KeyIndex | None", "str | None", FieldReader]
Status = Literal["matched", "unmatched", "ambiguous"]


@dataclass(slots=True)
class MatchResult:
    status: Status
    definition: MessageDefinition | None = None
    context: Mapping[str, str] = field(default_factory=dict)
    # Every definition that tied for the best match (more than one only when ambiguous).
    tied: tuple[MessageDefinition, ...] = ()

    @property
    def matched(self) -> bool:
        return self.status == "matched"


@dataclass(frozen=True)
class Explanation:
    """Why a near definition did not accept the message."""

    definition: str  # xid
    failure: str
    passed: int  # how many of its checks the message passed
    # The failure's parts when the matcher made it (empty when read back from JSON): the
    # check's label and expected value come from the definitions, `got` from the sender,
    # so redaction and metric labels treat them apart (gateway/redaction/redactor.py).
    # Not compared: an explanation equals one read back from its JSON.
    check: str = field(default="", compare=False)
    expected: str = field(default="", compare=False)
    got: str = field(default="", compare=False, repr=False)

    def to_json(self) -> dict[str, JSON]:
        return {"definition": self.definition, "failure": self.failure, "passed": self.passed}


class Matcher:
    def __init__(
        self,
        definitions: Iterable[MessageDefinition],
        *,
        ambiguity: AmbiguityPolicy = "first",
        validate_schema: bool = False,
    ) -> None:
        self.ambiguity: AmbiguityPolicy = ambiguity
        self.validate_schema = validate_schema
        self.compiled: list[CompiledDefinition] = []
        self._by_family: dict[str, KeyIndex] = {}
        self._cloudevents = KeyIndex()  # envelope-only definitions, keyed by CE type
        self._schema_validators: dict[str, Any] = {}
        # Per definition (by identity): its resolved schema's validator, None if none.
        self._payload_validators: dict[int, PayloadValidator | None] = {}
        self._native_routes: dict[str, _NativeRoute] = {}
        self._made: Made = {}  # the specialised tests, shared by equal constraints
        for definition in definitions:
            self._add(compile_definition(definition))
        for index in self._by_family.values():
            index.narrow_large_buckets()
        # Built once the buckets are split: a split decides some checks of the
        # definitions it finds (`narrowed_checks`), and their tests leave those out.
        for compiled in self.compiled:
            if compiled.family is not None:
                compiled.native_test = definition_test(compiled, self._made)

    def _add(self, compiled: CompiledDefinition) -> None:
        definition = compiled.definition
        self.compiled.append(compiled)
        if compiled.family is not None:
            index = self._by_family.setdefault(compiled.family, KeyIndex())
            address = ADDRESS_FIELD.get(compiled.family)
            key_check = None
            if address is not None:
                label = address[0] if address[1] is None else f"{address[0]}[{address[1]}]"
                key_check = next(
                    (c for c in compiled.protocol_checks if c.label == label), None
                )
            index.add(compiled, key_check)
            if key_check is not None and key_check.template is not None:
                compiled.address_captures = _segment_captures(key_check.template)
                compiled.address_check = key_check
            elif (key_check is not None and key_check.has_constant
                  and isinstance(key_check.constant, str) and not key_check.check_type):
                # Indexed by its constant address: found only when the address is that
                # text, which the check then accepts (`same_value` of equal text).
                compiled.address_check = key_check
                compiled.address_exact = True
        elif definition.is_cloudevent:
            type_check = next(
                (c for c in compiled.envelope_checks if c.attribute == "type"), None
            )
            self._cloudevents.add(compiled, type_check)
        # Definitions with neither a protocol nor a CloudEvents envelope (payload-only)
        # cannot be matched on metadata; the validator warns about them.

    def __len__(self) -> int:
        return len(self.compiled)

    # -- matching ------------------------------------------------------------------------------
    def candidates(
        self, record: NativeMessage, event: Mapping[str, JSON] | None = None,
        address: str | None = None,
    ) -> list[CompiledDefinition]:
        out: list[CompiledDefinition] = []
        fam = family(record.protocol)
        index = self._by_family.get(fam) if fam is not None else None
        if index is not None:
            out = index.lookup(address if address is not None else address_of(record), record)
        if event is not None:
            event_type = event.get("type")
            extra = self._cloudevents.lookup(event_type if isinstance(event_type, str) else None)
            if extra:
                out = out + extra
        return out

    def match(
        self, record: NativeMessage, event: Mapping[str, JSON] | None = None
    ) -> MatchResult:
        """Match a record; `event` holds the CloudEvents attributes when it carries one."""
        if event is None:
            return self.match_native(record)
        found: list[tuple[CompiledDefinition, dict[str, str]]] = []
        segments: list[str] | None = None
        address = address_of(record)
        for compiled in self.candidates(record, event, address):
            positions = compiled.address_captures
            if positions is not None:
                # Found through the shape index: literal segments already equal.
                if segments is None:
                    segments = (address or "").split("/")
                context = _read_captures(segments, positions, compiled.address_check)
                if context is None:
                    continue
                outcome = compiled.evaluate(record, event, context, compiled.address_check)
            else:
                outcome = compiled.evaluate(record, event)
            if not isinstance(outcome, Failure):
                found.append((compiled, outcome))
        return self._decide(found, record, event)

    def match_native(self, record: NativeMessage) -> MatchResult:
        """`match(record)` of a record that carries no CloudEvent: the hot path. Each
        candidate runs its specialised test (`gateway.matching.fast`), not `evaluate`."""
        route = self._native_routes.get(record.protocol)
        if route is None:
            route = self._native_route(record.protocol)
        index, field, read_address = route
        if index is None:
            return MatchResult("unmatched")
        if field is not None:  # a scalar address (topic, subject, path): read it here
            address = record.head.get(field)
            if address.__class__ is not str and not isinstance(address, str):
                address = None
        else:
            address = read_address(record.fields)
        segments: list[str] | None = None
        if address is None:
            candidates = index.lookup(None, record)
        else:
            if index.shapes:
                segments = address.split("/")
            candidates = index.lookup_split(address, segments, record)
        if len(candidates) == 1:  # the common case: the index left one candidate
            compiled = candidates[0]
            context = compiled.native_test(record, segments)
            if context is None:
                return MatchResult("unmatched")
            return MatchResult("matched", compiled.definition, context)
        found: list[tuple[CompiledDefinition, dict[str, str]]] = []
        for compiled in candidates:
            context = compiled.native_test(record, segments)
            if context is not None:
                found.append((compiled, context))
        return self._decide(found, record, None)

    def _native_route(self, protocol: str) -> _NativeRoute:
        """Where records of `protocol` are looked up, found once per protocol: the index
        of its family, and its address field when that is a scalar field (else None) or
        else the reader of the address."""
        fam = family(protocol)
        address = ADDRESS_FIELD.get(fam) if fam is not None else None
        scalar = address[0] if address is not None and address[1] is None else None
        route = (None if fam is None else self._by_family.get(fam), scalar,
                 ACCESSORS[protocol].address)
        self._native_routes[protocol] = route
        return route

    def _decide(self, found: list[tuple[CompiledDefinition, dict[str, str]]],
                record: NativeMessage, event: Mapping[str, JSON] | None) -> MatchResult:
        """The result from every definition that accepts the message: the most specific
        wins; a true tie is broken by the schema (when validating) and the policy."""
        if not found:
            return MatchResult("unmatched")
        if len(found) == 1:
            return MatchResult("matched", found[0][0].definition, found[0][1])
        if event is None:
            best = max(c.specificity for c, _ in found)
            tied = [(c, ctx) for c, ctx in found if c.specificity == best]
        else:
            best = max(c.specificity_ce for c, _ in found)
            tied = [(c, ctx) for c, ctx in found if c.specificity_ce == best]
        if len(tied) > 1 and self.validate_schema:
            valid = [(c, ctx) for c, ctx in tied if self._body_valid(c.definition, record)]
            if valid:
                tied = valid
        tied.sort(key=lambda pair: pair[0].definition.order)
        definitions = tuple(c.definition for c, _ in tied)
        if len(tied) == 1:
            return MatchResult("matched", tied[0][0].definition, tied[0][1])
        if self.ambiguity == "first":
            return MatchResult("matched", tied[0][0].definition, tied[0][1], definitions)
        return MatchResult("ambiguous", None, {}, definitions)

    def _body_valid(self, definition: MessageDefinition, record: NativeMessage) -> bool:
        if definition.schema is not None:
            # The resolved schema (inline or referenced, any enforceable format).
            key = id(definition)
            if key in self._payload_validators:
                checker = self._payload_validators[key]
            else:
                checker = self._payload_validators[key] = validator_of(definition)
            return checker is None or checker.check(record) is None
        fmt = (definition.dataschemaformat or "").lower()
        if not isinstance(definition.dataschema, dict) or not fmt.startswith("jsonschema"):
            return True  # nothing to validate against: stays a candidate
        validator = self._schema_validators.get(definition.xid)
        if validator is None:
            import jsonschema

            cls = jsonschema.validators.validator_for(definition.dataschema)
            validator = cls(definition.dataschema)
            self._schema_validators[definition.xid] = validator
        if record.has_json_data:
            body: Any = record.data
        else:
            try:
                body = json.loads(record.body_bytes())
            except (ValueError, UnicodeDecodeError):
                return False
        return bool(validator.is_valid(body))

    # -- explain -------------------------------------------------------------------------------
    def explain(
        self, record: NativeMessage, event: Mapping[str, JSON] | None = None, limit: int = 3
    ) -> list[Explanation]:
        """The nearest definitions and, for each, the first constraint the message failed."""
        fam = family(record.protocol)
        pool: list[CompiledDefinition] = []
        if fam is not None and fam in self._by_family:
            pool.extend(self._by_family[fam].all())
        if event is not None:
            pool.extend(self._cloudevents.all())
        del pool[EXPLAIN_PER_CALL:]  # see EXPLAIN_PER_CALL
        scored: list[tuple[int, CompiledDefinition, Failure]] = []
        for compiled in pool:
            outcome = compiled.evaluate(record, event)
            if isinstance(outcome, Failure):
                scored.append((compiled.score(record, event), compiled, outcome))
        return [
            Explanation(c.definition.xid, str(failure), passed,
                        failure.label, failure.expected, failure.got)
            for passed, c, failure in _nearest(scored, limit)
        ]


def _segment_captures(template: Template) -> tuple[tuple[str, int], ...] | None:
    """(name, segment index) per placeholder when each one is a whole `/` segment."""
    if not template.segmented:
        return None
    out: list[tuple[str, int]] = []
    for index, segment in enumerate(template.text.split("/")):
        if "{" not in segment:
            continue
        inner = segment[1:-1]
        if not (segment.startswith("{") and segment.endswith("}")) or "{" in inner:
            return None
        out.append((inner, index))
    return tuple(out)


def _read_captures(
    segments: list[str], positions: tuple[tuple[str, int], ...], check: Check | None
) -> dict[str, str] | None:
    context: dict[str, str] = {}
    decode = check is not None and check.decode
    for name, index in positions:
        value = segments[index]
        if not value:
            return None  # a placeholder captures a non-empty run
        if decode:
            value = unquote(value)
        seen = context.setdefault(name, value)
        if seen != value:
            return None  # same name, same value
    return context


# `explain` is for a message no definition took, and any sender can send those: its cost
# must not grow with the catalog without bound. Examining one definition (its checks, a
# score, a template's expression compiled on first use) was measured at ~10 µs warm and
# ~230 µs cold, and ranking it by likeness at ~50 µs: one unmatched message cost 0.7 s of
# the event loop in a catalog of 10,000 (2.3 s the first time). So a call examines at most
# this many definitions, in catalog order (the nearest among those: ~10 ms warm), and
# ranks at most `LIKENESS_POOL` of them by likeness.
EXPLAIN_PER_CALL = 1_000


# How much of a failed value `_likeness` compares: it only orders near definitions, and
# difflib's cost grows with the value (a 65,535-byte topic cost ~5 ms per definition).
_LIKENESS_WINDOW = 256
# Definitions of one score, at most, that `_nearest` compares by likeness (difflib, ~50 µs
# each): with every definition compared, one unmatched message cost 0.7 s of the event
# loop in a catalog of 10,000 (all failing the same first check, all of one score).
LIKENESS_POOL = 64


def _nearest(scored: list[tuple[int, CompiledDefinition, Failure]], limit: int
             ) -> list[tuple[int, CompiledDefinition, Failure]]:
    """The `limit` nearest: most checks passed first; among equals, the failed value
    most like what was expected, then definition order. Likeness is computed only in
    the score groups that fill the `limit` places, and there for the first
    `LIKENESS_POOL` definitions of a group in order (all of them in any catalog of that
    size or less: the same answer as ranking everything)."""
    scored.sort(key=lambda item: (-item[0], item[1].definition.order))
    out: list[tuple[int, CompiledDefinition, Failure]] = []
    for _, same_score in groupby(scored, key=itemgetter(0)):
        wanted = limit - len(out)
        if wanted <= 0:
            break
        group = list(islice(same_score, max(wanted, LIKENESS_POOL)))
        out += _most_alike(group, wanted) if len(group) > 1 else group  # likeness orders equals
    return out


def _most_alike(group: list[tuple[int, CompiledDefinition, Failure]], wanted: int
                ) -> list[tuple[int, CompiledDefinition, Failure]]:
    """The `wanted` of `group` (in definition order) whose failed value is most like what
    was expected, by likeness then order: the same as sorting the group by
    (-likeness, order), but a definition whose likeness cannot beat the last of those
    kept so far is not compared in full. difflib's two cheap upper bounds
    (`real_quick_ratio`, `quick_ratio`) decide that; the full comparison (`ratio`) was
    ~95% of an unmatched message's explanation, and most of a group loses."""
    kept: list[tuple[float, int]] = []  # (-likeness, position), best first
    for position, (_, _, failure) in enumerate(group):
        compared = _comparison(failure)
        if len(kept) == wanted:
            # A later definition of equal likeness loses to the earlier ones kept.
            floor = -kept[-1][0]
            if compared.real_quick_ratio() <= floor or compared.quick_ratio() <= floor:
                continue
        insort(kept, (-compared.ratio(), position))
        del kept[wanted:]
    return [group[position] for _, position in kept]


def _comparison(failure: Failure) -> difflib.SequenceMatcher[str]:
    window = max(_LIKENESS_WINDOW, 2 * len(failure.expected))
    return difflib.SequenceMatcher(None, failure.expected, failure.got[:window])


def _likeness(failure: Failure) -> float:
    return _comparison(failure).ratio()
