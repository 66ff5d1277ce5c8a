"""Native message -> CloudEvent: decode, match, render, in one call.

This is the pure conversion step shared by `xrgw match`, `xrgw test`, the daemon and the
Spark parity path. It never raises on a message: every outcome is a `Conversion` that is
either a CloudEvent or a dead-letter reason with an explanation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from gateway.cloudevents.bindings import BINDINGS, decode, decode_batch, detect_mode
from gateway.cloudevents.errors import CloudEventError
from gateway.cloudevents.event import CloudEvent
from gateway.cloudevents.jsonformat import event_to_json
from gateway.deadletter import reasons
from gateway.definitions.model import MessageDefinition
from gateway.definitions.schema_model import SchemaPolicy
from gateway.envelope.render import EnvelopeRenderer, RenderError
from gateway.json.values import JSON, JSONObject
from gateway.matching.matcher import AmbiguityPolicy, Explanation, Matcher, MatchResult
from gateway.protocols import find_profile
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


# Whether a protocol's messages may carry a CloudEvents batch, per protocol name.
_BATCHES: dict[str, bool] = {}


class Converter:
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
        self._match_native = self.matcher.match_native
        # Per protocol, its binding's `detect` (is there a CloudEvent or a batch at all?).
        self._detectors = {name: binding.detect for name, binding in BINDINGS.items()}

    def convert(
        self, record: NativeMessage, *, explain: bool = True, now: datetime | None = None
    ) -> Conversion:
        if self._carries_no_event(record):
            return self._convert_native(record, explain, now)
        try:
            incoming = decode(record)
        except CloudEventError as exc:
            return Conversion(
                record, MatchResult("unmatched"), None, reasons.INVALID_CLOUDEVENT, str(exc)
            )
        return self._convert(record, incoming, explain, now)

    def convert_batch(
        self, records: Sequence[NativeMessage], *, explain: bool = True,
        now: datetime | None = None,
    ) -> list[list[Conversion]]:
        """`convert_all` of each record, in order: what the route calls for each batch it
        reads. One clock reading serves the whole batch as the receive time of records
        that do not carry theirs (`received_at`); they were received together."""
        if now is None:
            now = datetime.now(UTC)
        out: list[list[Conversion]] = []
        append = out.append
        detectors, match_native, envelopes = self._detectors, self._match_native, self._envelopes
        for record in records:
            # `convert_all` of the common record (no CloudEvent, no batch), inline.
            detect = detectors.get(record.protocol)
            if detect is None or detect(record) is not None:
                append(self.convert_all(record, explain=explain, now=now))
                continue
            result = match_native(record)
            definition = result.definition
            if definition is None:
                append([self._unconverted(record, result, None, explain)])
                continue
            if self._enforced and (invalid := self._invalid_data(record, result)):
                append([invalid])
                continue
            rendered = envelopes[id(definition)].render(record, result.context, now)
            if isinstance(rendered, RenderError):
                append([Conversion(record, result, None, rendered.reason, rendered.message)])
            else:
                append([Conversion(record, result, rendered)])
        return out

    def convert_all(
        self, record: NativeMessage, *, explain: bool = True, now: datetime | None = None
    ) -> list[Conversion]:
        """Like `convert`, for every event of an HTTP CloudEvents batch (one conversion per
        member, none for an empty batch); any other record gives one conversion."""
        batches = _BATCHES.get(record.protocol)
        if batches is None:
            prof = find_profile(record.protocol)
            batches = prof is not None and prof.batches
            if prof is not None:
                _BATCHES[record.protocol] = batches
        if not batches or detect_mode(record) != "batch":
            return [self.convert(record, explain=explain, now=now)]
        try:
            events = decode_batch(record)
        except CloudEventError as exc:
            return [Conversion(
                record, MatchResult("unmatched"), None, reasons.INVALID_CLOUDEVENT, str(exc))]
        return [self._convert(record, event, explain, now) for event in events]

    def _carries_no_event(self, record: NativeMessage) -> bool:
        """Whether `decode(record)` is None, without decoding: the binding's `detect` says
        no mode exactly when its decoder finds no CloudEvent (nor a batch)."""
        detect = self._detectors.get(record.protocol)
        return detect is not None and detect(record) is None

    def _convert_native(
        self, record: NativeMessage, explain: bool, now: datetime | None
    ) -> Conversion:
        """`_convert` of a record that carries no CloudEvent: the hot path."""
        result = self._match_native(record)
        definition = result.definition
        if definition is None:  # unmatched or ambiguous
            return self._unconverted(record, result, None, explain)
        if self._enforced and (invalid := self._invalid_data(record, result)):
            return invalid
        rendered = self._envelopes[id(definition)].render(record, result.context, now)
        if isinstance(rendered, RenderError):
            return Conversion(record, result, None, rendered.reason, rendered.message)
        return Conversion(record, result, rendered)

    def _convert(
        self,
        record: NativeMessage,
        incoming: CloudEvent | None,
        explain: bool,
        now: datetime | None,
    ) -> Conversion:
        if incoming is None:
            return self._convert_native(record, explain, now)
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
