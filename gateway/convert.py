"""Native message -> CloudEvent: decode, match, render, in one call.

This is the pure conversion step shared by `xrgw match`, `xrgw test`, the daemon and the
Spark parity path. It never raises on a message: every outcome is a `Conversion` that is
either a CloudEvent or a dead-letter reason with an explanation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from gateway.cloudevents.bindings import BINDINGS, Binding, binding_for, decode_batch
from gateway.cloudevents.errors import CloudEventError
from gateway.cloudevents.event import CloudEvent
from gateway.cloudevents.jsonformat import event_to_json
from gateway.deadletter import reasons
from gateway.definitions.model import MessageDefinition
from gateway.envelope.render import EnvelopeRenderer, EnvelopeTemplate, RenderError
from gateway.json.values import JSON, JSONObject
from gateway.matching.matcher import AmbiguityPolicy, Explanation, Matcher, MatchResult
from gateway.policies.schema import SchemaPolicy
from gateway.record import NativeMessage
from gateway.schemas.enforce import enforced_validators


@dataclass(slots=True)
class Conversion:
    record: NativeMessage
    match: MatchResult
    event: CloudEvent | None = None
    reason: str | None = None  # dead-letter reason code when event is None
    detail: str = ""
    explain: tuple[Explanation, ...] = ()
    # The CloudEvent the message carried, when it was one (also when it failed to match).
    source_event: CloudEvent | None = None

    @property
    def ok(self) -> bool:
        return self.event is not None

    def to_json(self) -> JSONObject:
        definition = self.match.definition
        out: JSONObject = {
            "match": definition.xid if definition is not None else None,
            "context": dict(self.match.context),
        }
        if self.event is not None:
            out["cloudevent"] = event_to_json(self.event)
        else:
            out["reason"] = self.reason
            if self.detail:
                out["detail"] = self.detail
        if len(self.match.tied) > 1:
            out["tied"] = [d.xid for d in self.match.tied]
        if self.explain:
            out["explain"] = [e.to_json() for e in self.explain]
        return out


class Converter:
    """One dispatch per record (`convert_batch`): its binding's `detect` runs once and
    says which way it goes -- no CloudEvent (the native path, the hot one), one
    CloudEvent, or an HTTP CloudEvents batch (one conversion per member)."""

    def __init__(
        self,
        definitions: Iterable[MessageDefinition],
        *,
        ambiguity: AmbiguityPolicy = "first",
        validate_schema: bool = False,
        schema: SchemaPolicy | None = None,
    ) -> None:
        """`schema` is the route's policy (see `gateway.schemas.enforce`); without it,
        `validate_schema` says whether schemas break ties (the `match` CLI's switch)."""
        listed = list(definitions)
        if schema is not None:
            validate_schema = schema != "off"
        self.matcher = Matcher(listed, ambiguity=ambiguity, validate_schema=validate_schema)
        # Per definition (by identity), the schema `enforce` checks a matched body against.
        self._enforced = enforced_validators(listed, schema or "off")
        self.renderer = EnvelopeRenderer()
        # Every envelope compiled now, not on the first message; found by the identity of
        # the matched definition (the matcher returns the objects it was given).
        self._envelopes = {id(d): self.renderer.template(d) for d in listed}
        # Per protocol name as records carry it, its CloudEvents binding.
        self._bindings: dict[str, Binding] = dict(BINDINGS)

    def convert(
        self, record: NativeMessage, *, explain: bool = True, now: datetime | None = None
    ) -> Conversion:
        """The one conversion of `record`: an HTTP CloudEvents batch is one message here,
        refused as a CloudEvent (`unexpected-batch`); `convert_all` splits it."""
        return self.convert_batch([record], explain=explain, now=now, split=False)[0][0]

    def convert_all(
        self, record: NativeMessage, *, explain: bool = True, now: datetime | None = None
    ) -> list[Conversion]:
        """Every conversion of `record`: one per member of an HTTP CloudEvents batch (none
        for an empty batch); any other record gives one."""
        return self.convert_batch([record], explain=explain, now=now)[0]

    def convert_batch(
        self, records: Sequence[NativeMessage], *, explain: bool = True,
        now: datetime | None = None, split: bool = True,
    ) -> list[list[Conversion]]:
        """The conversions of each record, in order: what the route calls for each batch
        it reads. One clock reading serves the whole batch as the receive time of records
        that do not carry theirs (`received_at`); they were received together. `split`:
        an HTTP CloudEvents batch gives a conversion per member (else it is refused)."""
        if now is None:
            now = datetime.now(UTC)
        out: list[list[Conversion]] = []
        append = out.append
        bindings = self._bindings
        for record in records:
            binding = bindings.get(record.protocol) or self._binding(record.protocol)
            mode = binding.detect(record)
            if mode is None:
                append([self._native(record, explain, now)])
            elif mode == "batch" and split:
                append(self._members(record, explain, now))
            else:
                append([self._event(record, binding, explain, now)])
        return out

    def _binding(self, protocol: str) -> Binding:
        """The binding of a protocol name as written in a file (`mqtt` ...): found once,
        then kept under that name too (records usually carry the canonical one)."""
        binding = self._bindings[protocol] = binding_for(protocol)
        return binding

    def match_plain(self, record: NativeMessage) -> MatchResult | None:
        """The match of a record that carries no CloudEvent, as `convert` matches it;
        None for one that carries one (or claims to): `convert` decides those."""
        # None: the adapter read the headers and saw no CloudEvent (`event_mode`), which
        # is what every binding's `detect` would say; no call to it then.
        if record.event_mode is not None:
            binding = self._bindings.get(record.protocol) or self._binding(record.protocol)
            if binding.detect(record) is not None:
                return None
        return self.matcher.match_native(record)

    def convert_matched(self, record: NativeMessage, result: MatchResult, now: datetime,
                        explain: bool = True) -> Conversion:
        """The rest of `convert` for a record `match_plain` gave `result`: the same
        conversion, without matching it again."""
        return self._matched_native(record, result, explain, now)

    def template(self, definition: MessageDefinition) -> EnvelopeTemplate:
        """The envelope `definition` renders with (one given to this converter)."""
        return self._envelopes[id(definition)]

    def enforces(self, definition: MessageDefinition) -> bool:
        """Whether a body matched by `definition` is checked against its schema."""
        return id(definition) in self._enforced

    def _native(self, record: NativeMessage, explain: bool, now: datetime) -> Conversion:
        """A record that carries no CloudEvent: match, check, render (the hot path)."""
        return self._matched_native(record, self.matcher.match_native(record), explain, now)

    def _matched_native(self, record: NativeMessage, result: MatchResult, explain: bool,
                        now: datetime) -> Conversion:
        definition = result.definition
        if definition is None:  # unmatched or ambiguous
            return self._unconverted(record, result, None, explain)
        if self._enforced and (invalid := self._invalid_data(record, result)):
            return invalid
        rendered = self._envelopes[id(definition)].render(record, result.context, now)
        if isinstance(rendered, RenderError):
            return Conversion(record, result, None, rendered.reason, rendered.message)
        return Conversion(record, result, rendered)

    def _event(self, record: NativeMessage, binding: Binding, explain: bool,
               now: datetime) -> Conversion:
        """A record whose binding found a CloudEvent: decode, then match it."""
        try:
            incoming = binding.decode(record, None)
        except CloudEventError as exc:
            return _invalid(record, exc)
        if incoming is None:  # `detect` saw one, the full scan did not: as native
            return self._native(record, explain, now)
        return self._matched_event(record, incoming, explain)

    def _members(self, record: NativeMessage, explain: bool, now: datetime
                 ) -> list[Conversion]:
        """An HTTP CloudEvents batch: each member event matched on its own."""
        try:
            events = decode_batch(record)
        except CloudEventError as exc:
            return [_invalid(record, exc)]
        return [self._matched_event(record, event, explain) for event in events]

    def _matched_event(self, record: NativeMessage, incoming: CloudEvent,
                       explain: bool) -> Conversion:
        attributes: Mapping[str, JSON] = incoming.canonical_attributes()
        result = self.matcher.match(record, attributes)
        if not result.matched:
            return self._unconverted(record, result, incoming, explain)
        if self._enforced:
            # The schema describes the event's data, wherever the binding carried it.
            data = incoming.data
            body = (NativeMessage(record.protocol, payload=data) if isinstance(data, bytes)
                    else NativeMessage(record.protocol, data=data))
            invalid = self._invalid_data(body, result)
            if invalid is not None:
                invalid.record, invalid.source_event = record, incoming
                return invalid
        # Already a CloudEvent that conforms to the definition: pass it on unchanged.
        return Conversion(record, result, incoming, source_event=incoming)

    def _invalid_data(self, record: NativeMessage, result: MatchResult) -> Conversion | None:
        """The dead-letter conversion of a matched body its definition's schema rejects."""
        assert result.definition is not None
        validator = self._enforced.get(id(result.definition))
        if validator is None:
            return None
        error = validator.check(record)
        if error is None:
            return None
        return Conversion(record, result, None, reasons.INVALID_DATA, error)

    def _unconverted(self, record: NativeMessage, result: MatchResult,
                     incoming: CloudEvent | None, explain: bool) -> Conversion:
        """The dead-letter conversion of a message no definition takes (or several do)."""
        reason = reasons.AMBIGUOUS if result.status == "ambiguous" else reasons.UNMATCHED
        if result.status == "ambiguous":
            detail = "equally specific definitions: " + ", ".join(d.xid for d in result.tied)
            return Conversion(record, result, None, reason, detail, (), incoming)
        attributes = None if incoming is None else incoming.canonical_attributes()
        hints = tuple(self.matcher.explain(record, attributes)) if explain else ()
        return Conversion(record, result, None, reason, "no definition accepts it", hints,
                          incoming)


def _invalid(record: NativeMessage, exc: CloudEventError) -> Conversion:
    """The conversion of a record that claims to be a CloudEvent and is not a valid one."""
    return Conversion(record, MatchResult("unmatched"), None, reasons.INVALID_CLOUDEVENT,
                      str(exc))
