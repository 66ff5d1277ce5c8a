"""The whole comparison of OLD and NEW and whether it is for the worse.

For the worse (the command's exit code 1, to gate a catalog's CI): a replayed record that
is newly unmatched, newly ambiguous, taken by another definition, rendered with other
attributes or newly dead-lettered; a new overlapping pair; a new error in NEW (a
definition `xrgw validate` refuses, or a lint error; with `strict`, every new warning is
one). Errors OLD had already are not the change's doing. Added, removed or changed
definitions alone are not: what they do to traffic is what `--replay` shows. Endpoints
are listed the same way and never make a change worse.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gateway.catalogdiff.definitions import EntityChange
from gateway.catalogdiff.findings import FindingsDiff
from gateway.catalogdiff.replay import WORSE, ReplayResult
from gateway.json.values import JSONObject


@dataclass
class CatalogDiff:
    old: str
    new: str
    old_definitions: int
    new_definitions: int
    definitions: list[EntityChange]
    findings: FindingsDiff
    replay: ReplayResult | None  # None: nothing was replayed
    strict: bool = False  # new warnings are for the worse too
    endpoints: list[EntityChange] = field(default_factory=list)
    old_endpoints: int = 0
    new_endpoints: int = 0

    def worse(self) -> dict[str, int]:
        """What makes the change worse, by kind, with a count; empty: nothing."""
        out: dict[str, int] = {}
        if self.replay is not None:
            out.update({kind: self.replay.counts[kind] for kind in WORSE
                        if self.replay.counts[kind]})
        overlaps = len(self.findings.new_overlaps)
        if overlaps:
            out["new-overlapping-pairs"] = overlaps
        errors = len(self.findings.new_errors)
        if errors:
            out["new-errors"] = errors
        if self.strict and self.findings.new_warnings:
            out["new-warnings"] = len(self.findings.new_warnings)
        return out

    def to_json(self) -> JSONObject:
        return {
            "old": self.old, "new": self.new,
            "definitions": _summary(self.old_definitions, self.new_definitions,
                                    self.definitions),
            "endpoints": _summary(self.old_endpoints, self.new_endpoints, self.endpoints),
            "lint": {"introduced": [f.to_json() for f in self.findings.introduced],
                     "resolved": [f.to_json() for f in self.findings.resolved]},
            "replay": self.replay.to_json() if self.replay is not None else None,
            "worse": dict(self.worse()),
        }


def count(changes: list[EntityChange], kind: str) -> int:
    return sum(1 for c in changes if c.kind == kind)


def _summary(old: int, new: int, changes: list[EntityChange]) -> JSONObject:
    return {"old": old, "new": new, "added": count(changes, "added"),
            "removed": count(changes, "removed"), "changed": count(changes, "changed"),
            "changes": [c.to_json() for c in changes]}


__all__ = ["CatalogDiff", "count"]
