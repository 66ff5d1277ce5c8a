"""The findings a change introduces or resolves: `xrgw lint`'s overlapping pairs (each
with its witness message), the catalog's errors and warnings as `xrgw validate` reports
them and the template notes, compared between OLD and NEW.

A finding is known by what it says, not where: a pair by its two xids (either order), a
warning by its JSON path and message, so moving a definition to another file or line does
not make its findings new. Findings are placed in the catalog that has them (NEW for
introduced, OLD for resolved)."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

from gateway.definitions.model import Catalog
from gateway.definitions.positions import with_document_positions
from gateway.json.values import JSONObject
from gateway.matching.lint import Overlap, find_overlaps, overlap_problem, template_problems
from gateway.spec.problems import Problem


@dataclass(frozen=True)
class Finding:
    problem: Problem
    overlap: Overlap | None = None  # an overlapping pair, with its witness

    @property
    def key(self) -> Hashable:
        if self.overlap is not None:
            return frozenset((self.overlap.first, self.overlap.second))
        return (self.problem.path, self.problem.message)

    @property
    def is_overlap(self) -> bool:
        return self.overlap is not None

    def to_json(self) -> JSONObject:
        out: JSONObject = {"kind": "overlap" if self.overlap is not None else "problem",
                           **self.problem.to_json()}  # type: ignore[dict-item]
        if self.overlap is not None:
            out.update(self.overlap.to_json())
        return out


@dataclass
class FindingsDiff:
    """The findings NEW has and OLD had not, split into overlapping pairs and warnings, and
    those OLD had and NEW has not (resolved)."""

    new_problems: list[Finding] = field(default_factory=list)  # errors and warnings
    new_overlaps: list[Finding] = field(default_factory=list)
    resolved: list[Finding] = field(default_factory=list)

    @property
    def introduced(self) -> list[Finding]:
        return [*self.new_problems, *self.new_overlaps]

    @property
    def new_errors(self) -> list[Finding]:
        return [f for f in self.new_problems if f.problem.is_error]

    @property
    def new_warnings(self) -> list[Finding]:
        return [f for f in self.new_problems if not f.problem.is_error]


def findings_of(catalog: Catalog, *, strict: bool = False) -> list[Finding]:
    """What `xrgw validate` and `xrgw lint` report of a catalog: its errors and warnings,
    template notes and overlapping pairs (errors with `strict`, as `xrgw lint --strict`
    has them)."""
    messages = list(catalog.messages())
    found = [Finding(p) for p in (*catalog.problems, *template_problems(messages))]
    found += [Finding(overlap_problem(catalog, overlap, strict=strict), overlap)
              for overlap in find_overlaps(messages)]
    return found


def diff_findings(old: Catalog, new: Catalog, *, strict: bool = False) -> FindingsDiff:
    """The findings NEW has and OLD had not (introduced) and the reverse (resolved),
    each with its line and column in a local document."""
    before, after = findings_of(old, strict=strict), findings_of(new, strict=strict)
    old_keys, new_keys = {f.key for f in before}, {f.key for f in after}
    introduced = _located([f for f in after if f.key not in old_keys])
    return FindingsDiff(new_problems=[f for f in introduced if f.overlap is None],
                        new_overlaps=[f for f in introduced if f.overlap is not None],
                        resolved=_located([f for f in before if f.key not in new_keys]))


def _located(findings: list[Finding]) -> list[Finding]:
    problems = with_document_positions(f.problem for f in findings)
    return [Finding(problem, f.overlap) for f, problem in zip(findings, problems, strict=True)]


__all__ = ["Finding", "FindingsDiff", "diff_findings", "findings_of"]
