"""Native message -> CloudEvent: decode, match, render, in one call.

This is the pure conversion step shared by `xrgw match`, `xrgw test`, the daemon and the
Spark parity path. It never raises on a message: every outcome is a `Conversion` that is
either a CloudEvent or a dead-letter reason with an explanation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from gateway import reasons
from gateway.cloudevents.bindings import decode, decode_batch, detect_mode
from gateway.cloudevents.errors import CloudEventError
from gateway.cloudevents.event import CloudEvent
from gateway.cloudevents.jsonformat import event_to_json
from gateway.definitions.model import MessageDefinition
from gateway.envelope.render import EnvelopeRenderer, RenderError
from gateway.jsontypes import JSON, JSONObject
from gateway.matching.matcher import AmbiguityPolicy, Explanation, Matcher, MatchResult
from gateway.protocols import find_profile
from gateway.record import NativeMessage


@dataclass(slots=True)
class Conversion:
    record: NativeMessage
    match: MatchResult
    event: CloudEvent | None = None
    reason: str | None = None  # dead-letter reason code when event is None
    detail: str = ""
    explain: tuple[Explanation, ...] = field(default_factory=tuple)
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
    def __init__(
        self,
        definitions: Iterable[MessageDefinition],
        *,
        ambiguity: AmbiguityPolicy = "first",
        validate_schema: bool = False,
    ) -> None:
        listed = list(definitions)
        self.matcher = Matcher(listed, ambiguity=ambiguity, validate_schema=validate_schema)
        self.renderer = EnvelopeRenderer()
        for definition in listed:  # compile every envelope now, not on the first message
            self.renderer.template(definition)

    def convert(
        self, record: NativeMessage, *, explain: bool = True, now: datetime | None = None
    ) -> Conversion:
        try:
            incoming = decode(record)
        except CloudEventError as exc:
            return Conversion(
                record, MatchResult("unmatched"), None, reasons.INVALID_CLOUDEVENT, str(exc)
            )
        return self._convert(record, incoming, explain, now)

    def convert_all(
        self, record: NativeMessage, *, explain: bool = True, now: datetime | None = None
    ) -> list[Conversion]:
        """Like `convert`, for every event of an HTTP CloudEvents batch (one conversion per
        member, none for an empty batch); any other record gives one conversion."""
        prof = find_profile(record.protocol)
        if prof is None or not prof.batches or detect_mode(record) != "batch":
            return [self.convert(record, explain=explain, now=now)]
        try:
            events = decode_batch(record)
        except CloudEventError as exc:
            return [Conversion(
                record, MatchResult("unmatched"), None, reasons.INVALID_CLOUDEVENT, str(exc))]
        return [self._convert(record, event, explain, now) for event in events]

    def _convert(
        self,
        record: NativeMessage,
        incoming: CloudEvent | None,
        explain: bool,
        now: datetime | None,
    ) -> Conversion:
        attributes: Mapping[str, JSON] | None = (
            incoming.canonical_attributes() if incoming is not None else None
        )
        result = self.matcher.match(record, attributes)
        if not result.matched:
            reason = reasons.AMBIGUOUS if result.status == "ambiguous" else reasons.UNMATCHED
            if result.status == "ambiguous":
                detail = "equally specific definitions: " + ", ".join(
                    d.xid for d in result.tied
                )
                return Conversion(record, result, None, reason, detail, (), incoming)
            hints = tuple(self.matcher.explain(record, attributes)) if explain else ()
            return Conversion(record, result, None, reason, "no definition accepts it", hints,
                              incoming)
        assert result.definition is not None
        if incoming is not None:
            # Already a CloudEvent that conforms to the definition: pass it on unchanged.
            return Conversion(record, result, incoming, source_event=incoming)
        rendered = self.renderer.render(result.definition, record, result.context, now)
        if isinstance(rendered, RenderError):
            return Conversion(record, result, None, rendered.reason, rendered.message)
        return Conversion(record, result, rendered)
