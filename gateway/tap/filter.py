"""Which tapped messages a tap wants, and how many of them.

A filter is read from the `/tap` query (`route`, `definition`, `outcome`, `sample`,
`limit`; each of the first three may be given more than once, or comma-separated) and
answers per message, in the order the route offers them:

- `route`: a route name (`store-mqtt->events`) or its source endpoint (`store-mqtt`),
  shell patterns allowed (`store-*`);
- `definition`: an xid or the last part of one (`sale` for
  `/messagegroups/store/messages/sale`), patterns allowed; a miss is taken for the
  definition nearest to it (the first of its explanation) or the ones it tied between;
- `outcome`: `matched` (delivered), `dead-lettered` (any reason), or a reason
  (`unmatched`, `ambiguous`, `invalid-data`, ... see docs/operations.md);
- `sample`: the share of the wanted messages to stream, `0 < rate <= 1`, taken exactly
  (`0.1`: the 1st, 11th, 21st ... wanted message), not at random, so what a tap shows
  is repeatable;
- `limit`: stop after that many messages.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from fractions import Fraction

from gateway.deadletter import reasons
from gateway.json.values import JSONObject
from gateway.tap.item import Tapped

MATCHED = "matched"
DEAD_LETTERED = "dead-lettered"
OUTCOMES = (MATCHED, DEAD_LETTERED, *reasons.ALL)


class FilterError(ValueError):
    """A query the tap cannot follow (the message says which parameter and why)."""


@dataclass(frozen=True)
class TapFilter:
    routes: tuple[str, ...] = ()
    definitions: tuple[str, ...] = ()
    outcomes: tuple[str, ...] = ()
    sample: Fraction = Fraction(1)
    limit: int | None = None

    @classmethod
    def from_query(cls, query: Mapping[str, str] | Iterable[tuple[str, str]]) -> TapFilter:
        pairs = list(query.items()) if isinstance(query, Mapping) else list(query)

        def values(name: str) -> tuple[str, ...]:
            return tuple(v.strip() for key, text in pairs if key == name
                         for v in text.split(",") if v.strip())

        outcomes = values("outcome")
        unknown = [o for o in outcomes if o not in OUTCOMES]
        if unknown:
            raise FilterError(f"outcome {unknown[0]!r} is none of {', '.join(OUTCOMES)}")
        sample = Fraction(1)
        for text in values("sample"):
            try:
                sample = Fraction(text).limit_denominator(1_000_000)
            except (ValueError, ZeroDivisionError) as exc:
                raise FilterError(f"sample {text!r} is not a number") from exc
            if not 0 < sample <= 1:
                raise FilterError(f"sample {text!r} is not a share in (0, 1]")
        limit = None
        for text in values("limit"):
            try:
                limit = int(text)
            except ValueError as exc:
                raise FilterError(f"limit {text!r} is not a whole number") from exc
            if limit < 1:
                raise FilterError(f"limit {text!r} is not a positive number")
        return cls(values("route"), values("definition"), outcomes, sample, limit)

    def to_json(self) -> JSONObject:
        return {"route": list(self.routes), "definition": list(self.definitions),
                "outcome": list(self.outcomes), "sample": float(self.sample),
                "limit": self.limit}

    def wants_route(self, route: str) -> bool:
        if not self.routes:
            return True
        source = route.partition("->")[0]
        return any(fnmatchcase(route, p) or fnmatchcase(source, p) for p in self.routes)

    def wants(self, item: Tapped) -> bool:
        if self.outcomes and not _outcome_wanted(self.outcomes, item.reason):
            return False
        if self.definitions:
            return any(_xid_wanted(self.definitions, xid) for xid in _definitions_of(item))
        return True


def _outcome_wanted(outcomes: Sequence[str], reason: str | None) -> bool:
    if reason is None:
        return MATCHED in outcomes
    return DEAD_LETTERED in outcomes or reason in outcomes


def _definitions_of(item: Tapped) -> Iterable[str]:
    """The definitions a message is about: the matched one, else the nearest of its
    explanation and the ones it tied between."""
    xid = item.definition
    if xid is not None:
        return (xid,)
    conversion = item.conversion
    near = [e.definition for e in conversion.explain[:1]]
    return near + [d.xid for d in conversion.match.tied]


def _xid_wanted(patterns: Sequence[str], xid: str) -> bool:
    last = xid.rstrip("/").rpartition("/")[2]
    return any(fnmatchcase(xid, p) or fnmatchcase(last, p) for p in patterns)


class Sampler:
    """Takes exactly `rate` of what it is asked about: the first, then one each time
    the taken share falls behind the rate (integer arithmetic: no drift)."""

    __slots__ = ("_credit", "_denominator", "_numerator")

    def __init__(self, rate: Fraction) -> None:
        self._numerator = rate.numerator
        self._denominator = rate.denominator
        self._credit = self._denominator - self._numerator  # the first one is taken

    def take(self) -> bool:
        self._credit += self._numerator
        if self._credit >= self._denominator:
            self._credit -= self._denominator
            return True
        return False


__all__ = ["DEAD_LETTERED", "MATCHED", "OUTCOMES", "FilterError", "Sampler", "TapFilter"]
