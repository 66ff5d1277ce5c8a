"""What each replayed record does under OLD and under NEW.

Both catalogs convert every record exactly as `xrgw match` does (`gateway.convert`,
ties taken by the first declared definition, as a route's default `ambiguity: first`),
with one receive time for both, so a CloudEvent `time` taken from the receive time is
the same on both sides. `id` is compared only where it is deterministic: the record
carried a CloudEvent, has a native identity (`gateway.envelope.ids`: Kafka offset, AMQP
message-id, ...) or a definition declares it; a random id differs on every run.

| change                   | meaning                                              | worse |
|--------------------------|------------------------------------------------------|-------|
| `same`                   | same definition and the same CloudEvent (or the same miss) |  |
| `newly-unmatched`        | OLD took it (maybe to a dead letter), NEW matches nothing | yes |
| `newly-ambiguous`        | NEW has a tie of several definitions, OLD had not    | yes   |
| `different-definition`   | another definition takes it                          | yes   |
| `different-attributes`   | the same definition renders other attributes (listed) | yes  |
| `newly-dead-lettered`    | NEW matches it but cannot convert it (reason)        | yes   |
| `newly-matched`          | OLD matched nothing, NEW converts it                  |       |
| `no-longer-ambiguous`    | OLD had a tie, NEW has one definition                 |       |
| `no-longer-dead-lettered`| OLD matched but could not convert it, NEW converts it |       |
| `different-reason`       | dead-lettered under both, for other reasons           |       |
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Literal

from gateway.catalogdiff.definitions import ABSENT, FieldChange
from gateway.catalogdiff.records import ReplayLine
from gateway.convert import Conversion, Converter
from gateway.definitions.model import MessageDefinition
from gateway.envelope.ids import native_identity
from gateway.json.values import JSON, JSONObject

Status = Literal["matched", "ambiguous", "unmatched", "dead-letter"]

WORSE = ("newly-unmatched", "newly-ambiguous", "different-definition",
         "different-attributes", "newly-dead-lettered")
BETTER = ("newly-matched", "no-longer-ambiguous", "no-longer-dead-lettered")
NEUTRAL = ("same", "different-reason")
CHANGES = (*NEUTRAL[:1], *WORSE, *BETTER, *NEUTRAL[1:])


@dataclass(frozen=True)
class Outcome:
    """What one catalog does with a record (one event of an HTTP batch)."""

    status: Status
    definition: str | None  # the definition that took it (the first of a tie)
    tied: tuple[str, ...] = ()
    reason: str | None = None  # why it is a dead letter
    detail: str = ""  # the dead-letter detail, or the nearest definition's first failure
    event: dict[str, JSON] | None = None

    @classmethod
    def of(cls, conversion: Conversion) -> Outcome:
        match = conversion.match
        tied = tuple(d.xid for d in match.tied) if len(match.tied) > 1 else ()
        definition = match.definition.xid if match.definition is not None else None
        event = conversion.event.to_dict() if conversion.event is not None else None
        detail = conversion.detail
        if conversion.explain and match.definition is None:
            # Why it missed says more than "no definition accepts it".
            nearest = conversion.explain[0]
            detail = f"nearest {nearest.definition}: {nearest.failure}"
        status: Status
        if tied:
            status = "ambiguous"
        elif event is not None:
            status = "matched"
        elif definition is None:
            status = "unmatched"
        else:
            status = "dead-letter"
        return cls(status, definition, tied, conversion.reason if event is None else None,
                   detail, event)

    def to_json(self) -> JSONObject:
        out: JSONObject = {"status": self.status, "definition": self.definition}
        if self.tied:
            out["tied"] = list(self.tied)
        if self.reason is not None:
            out["reason"] = self.reason
        if self.detail:
            out["detail"] = self.detail
        return out


@dataclass(frozen=True)
class RecordChange:
    where: str  # FILE:LINE
    member: int | None  # the event's index in an HTTP CloudEvents batch
    change: str  # one of CHANGES
    old: Outcome
    new: Outcome
    attributes: tuple[FieldChange, ...] = ()

    @property
    def worse(self) -> bool:
        return self.change in WORSE

    def to_json(self) -> JSONObject:
        out: JSONObject = {"input": self.where, "change": self.change,
                           "old": self.old.to_json(), "new": self.new.to_json()}
        if self.member is not None:
            out["member"] = self.member
        if self.attributes:
            out["attributes"] = [a.to_json() for a in self.attributes]
        return out


@dataclass
class ReplayResult:
    counts: Counter[str] = field(default_factory=Counter)
    changes: list[RecordChange] = field(default_factory=list)  # every one but `same`
    invalid: list[ReplayLine] = field(default_factory=list)

    @property
    def records(self) -> int:
        return sum(self.counts.values())

    def to_json(self) -> JSONObject:
        return {"records": self.records,
                "counts": {name: self.counts[name] for name in CHANGES if self.counts[name]},
                "changes": [c.to_json() for c in self.changes],
                "invalid": [{"input": line.where, "error": line.error}
                            for line in self.invalid]}


def compare(old: Outcome, new: Outcome, *, fixed_id: bool) -> tuple[str, tuple[FieldChange, ...]]:
    """The change from `old` to `new` and, when both rendered, the attributes that differ
    (`id` only with `fixed_id`)."""
    attributes: tuple[FieldChange, ...] = ()
    if old.event is not None and new.event is not None:
        attributes = attribute_changes(old.event, new.event, fixed_id=fixed_id)
    if old.status != new.status:
        if new.status == "unmatched":
            return "newly-unmatched", attributes
        if new.status == "ambiguous":
            return "newly-ambiguous", attributes
        if old.status == "ambiguous":
            return "no-longer-ambiguous", attributes
        if old.status == "unmatched":
            return ("newly-matched" if new.status == "matched" else "different-reason",
                    attributes)
        if new.status == "dead-letter":
            return "newly-dead-lettered", attributes
        return "no-longer-dead-lettered", attributes
    if old.definition != new.definition:
        return "different-definition", attributes
    if old.status in ("unmatched", "dead-letter"):
        return ("same" if old.reason == new.reason else "different-reason"), attributes
    return ("different-attributes" if attributes else "same"), attributes


def attribute_changes(old: dict[str, JSON], new: dict[str, JSON], *,
                      fixed_id: bool) -> tuple[FieldChange, ...]:
    out: list[FieldChange] = []
    for name in dict.fromkeys([*old, *new]):
        if name == "id" and not fixed_id:
            continue
        was, now = old.get(name, ABSENT), new.get(name, ABSENT)
        if was != now:
            out.append(FieldChange(name, was, now))
    return tuple(out)


def _declares_id(definitions: dict[str, MessageDefinition], xid: str | None) -> bool:
    definition = definitions.get(xid) if xid is not None else None
    prop = definition.envelope_metadata.get("id") if definition is not None else None
    return prop is not None and prop.has_value


def replay(lines: Iterable[ReplayLine], old: Sequence[MessageDefinition],
           new: Sequence[MessageDefinition], now: datetime,
           converter: Callable[[Sequence[MessageDefinition]], Converter] = Converter,
           ) -> ReplayResult:
    """Each line's record converted by `converter(old)` and `converter(new)` (the
    command's builds them with its `--schema` policy) at the receive time `now`."""
    before, after = converter(old), converter(new)
    old_by_xid, new_by_xid = {d.xid: d for d in old}, {d.xid: d for d in new}
    result = ReplayResult()
    for line in lines:
        record = line.record
        if record is None:
            result.invalid.append(line)
            continue
        olds = before.convert_all(record, now=now)
        news = after.convert_all(record, now=now)
        batch = len(olds) > 1 or len(news) > 1
        # An HTTP batch splits the same way under both: decoding needs no definition.
        for member, (was, now_) in enumerate(zip(olds, news, strict=True)):
            old_outcome, new_outcome = Outcome.of(was), Outcome.of(now_)
            fixed_id = (was.source_event is not None or native_identity(record) is not None
                        or _declares_id(old_by_xid, old_outcome.definition)
                        or _declares_id(new_by_xid, new_outcome.definition))
            change, attributes = compare(old_outcome, new_outcome, fixed_id=fixed_id)
            result.counts[change] += 1
            if change != "same":
                # The events are compared; kept are only the attributes that differ.
                result.changes.append(RecordChange(
                    line.where, member if batch else None, change,
                    replace(old_outcome, event=None), replace(new_outcome, event=None),
                    attributes))
    return result


__all__ = ["BETTER", "CHANGES", "WORSE", "Outcome", "RecordChange", "ReplayResult",
           "attribute_changes", "compare", "replay"]
