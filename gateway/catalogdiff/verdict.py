"""The whole comparison of OLD and NEW and whether it is for the worse.

For the worse (the command's exit code 1, to gate a catalog's CI): a replayed record that
is newly unmatched, newly ambiguous, taken by another definition, rendered with other
attributes or newly dead-lettered; a new overlapping pair; a new lint error (with
`strict`, every new warning is one). Added, removed or changed definitions alone are not:
what they do to traffic is what `--replay` shows.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.catalogdiff.definitions import DefinitionChange
from gateway.catalogdiff.findings import FindingsDiff
from gateway.catalogdiff.replay import WORSE, ReplayResult
from gateway.json.values import JSONObject


@dataclass
class CatalogDiff:
    old: str
    new: str
    old_definitions: int
    new_definitions: int
    definitions: list[DefinitionChange]
    findings: FindingsDiff
    replay: ReplayResult | None  # None: nothing was replayed
    strict: bool = False  # new warnings are for the worse too

    def worse(self) -> dict[str, int]:
        """What makes the change worse, by kind, with a count; empty: nothing."""
        out: dict[str, int] = {}
        if self.replay is not None:
            out.update({kind: self.replay.counts[kind] for kind in WORSE
                        if self.replay.counts[kind]})
        overlaps = len(self.findings.new_overlaps)
        if overlaps:
            out["new-overlapping-pairs"] = overlaps
        errors = sum(1 for f in self.findings.new_warnings if f.problem.is_error)
        if errors:
            out["new-lint-errors"] = errors
        if self.strict and self.findings.new_warnings:
            out["new-warnings"] = len(self.findings.new_warnings)
        return out

    def to_json(self) -> JSONObject:
        changes = self.definitions
        return {
            "old": self.old, "new": self.new,
            "definitions": {
                "old": self.old_definitions, "new": self.new_definitions,
                "added": sum(1 for c in changes if c.kind == "added"),
                "removed": sum(1 for c in changes if c.kind == "removed"),
                "changed": sum(1 for c in changes if c.kind == "changed"),
                "changes": [c.to_json() for c in changes],
            },
            "lint": {"introduced": [f.to_json() for f in self.findings.introduced],
                     "resolved": [f.to_json() for f in self.findings.resolved]},
            "replay": self.replay.to_json() if self.replay is not None else None,
            "worse": dict(self.worse()),
        }


__all__ = ["CatalogDiff"]
