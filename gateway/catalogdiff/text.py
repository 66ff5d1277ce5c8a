"""`xrgw diff` for a terminal: definitions, lint findings, replayed records, verdict.

Colours (ANSI) only when asked (`colour=True`: the command asks when stdout is a terminal
and `NO_COLOR` is not set): red for what is worse, green for what is better, yellow for
what merely changed. Long values are cut to `MAX_VALUE` characters; `--format json` has
them whole."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from gateway.catalogdiff.definitions import ABSENT, EntityChange, FieldChange
from gateway.catalogdiff.findings import Finding
from gateway.catalogdiff.replay import BETTER, CHANGES, WORSE, Outcome, RecordChange
from gateway.catalogdiff.verdict import CatalogDiff, count
from gateway.json.text import utf8_json
from gateway.json.values import JSON

MAX_VALUE = 160
_CODES = {"red": "31", "green": "32", "yellow": "33", "bold": "1", "dim": "2"}


class Paint:
    def __init__(self, colour: bool) -> None:
        self.colour = colour

    def __call__(self, text: str, style: str) -> str:
        return f"\033[{_CODES[style]}m{text}\033[0m" if self.colour else text

    def change(self, text: str, change: str) -> str:
        style = "red" if change in WORSE else "green" if change in BETTER else "yellow"
        return self(text, style)


def value_text(value: JSON) -> str:
    if value is ABSENT:
        return "(absent)"
    text = utf8_json(value)
    return text if len(text) <= MAX_VALUE else text[: MAX_VALUE - 1] + "…"


def _field(change: FieldChange, indent: str = "      ") -> str:
    return f"{indent}{change.field}: {value_text(change.old)} -> {value_text(change.new)}"


def render(diff: CatalogDiff, *, colour: bool = False, show: int = 10) -> str:
    """The report; at most `show` records of each change listed (0: all)."""
    return "\n".join(_lines(diff, Paint(colour), show)) + "\n"


def _lines(diff: CatalogDiff, paint: Paint, show: int) -> Iterator[str]:
    yield from _definitions(diff, paint)
    yield from _findings(diff, paint)
    if diff.replay is not None:
        yield from _replay(diff, paint, show)
    worse = diff.worse()
    if worse:
        yield paint("worse: " + ", ".join(f"{kind} {count}" for kind, count in worse.items()),
                    "red")
    else:
        yield paint("not worse", "green")


def _definitions(diff: CatalogDiff, paint: Paint) -> Iterator[str]:
    yield from _entities("definitions", diff.definitions, diff.old_definitions,
                         diff.new_definitions, diff, paint)
    if diff.endpoints:  # only when an endpoint changed: most changes are to definitions
        yield from _entities("endpoints", diff.endpoints, diff.old_endpoints,
                             diff.new_endpoints, diff, paint)


def _entities(title: str, changes: list[EntityChange], old: int, new: int, diff: CatalogDiff,
              paint: Paint) -> Iterator[str]:
    yield paint(f"{title}: {count(changes, 'added')} added, {count(changes, 'removed')} "
                f"removed, {count(changes, 'changed')} changed ({old} in {diff.old}, {new} "
                f"in {diff.new})", "bold")
    for change in changes:
        yield from _entity(change, paint)


def _entity(change: EntityChange, paint: Paint) -> Iterator[str]:
    mark, style = {"added": ("+", "green"), "removed": ("-", "red"),
                   "changed": ("~", "yellow")}[change.kind]
    yield paint(f"  {mark} {change.xid}", style)
    for field in change.fields:
        yield _field(field)


def _findings(diff: CatalogDiff, paint: Paint) -> Iterator[str]:
    found = diff.findings
    yield paint(f"lint: {len(found.new_overlaps)} new overlapping pair(s), "
                f"{len(found.new_errors)} new error(s), {len(found.new_warnings)} new "
                f"warning(s), {len(found.resolved)} resolved", "bold")
    for finding in found.introduced:
        yield from _finding(finding, paint, "red" if finding.is_overlap
                            or finding.problem.is_error or diff.strict else "yellow")
    for finding in found.resolved:
        yield paint(f"  resolved: {finding.problem.message}", "green")


def _finding(finding: Finding, paint: Paint, style: str) -> Iterator[str]:
    # At the start of the line, as `xrgw lint` prints problems: a CI problem matcher
    # (docs/troubleshooting.md) annotates the new findings on the changed file.
    yield paint(str(finding.problem), style)
    if finding.overlap is not None:
        witness = finding.overlap.event if not finding.overlap.example else (
            finding.overlap.example)
        yield f"      witness: {value_text(witness)}"


def _replay(diff: CatalogDiff, paint: Paint, show: int) -> Iterator[str]:
    replay = diff.replay
    assert replay is not None
    counts = ", ".join(f"{replay.counts[kind]} {kind}" for kind in CHANGES
                       if replay.counts[kind])
    skipped = f"; {len(replay.invalid)} line(s) skipped" if replay.invalid else ""
    yield paint(f"replay: {replay.records} record(s): {counts or 'none'}{skipped}", "bold")
    shown: Counter[str] = Counter()
    for change in replay.changes:
        shown[change.change] += 1
        if not show or shown[change.change] <= show:
            yield from _record(change, paint)
    for kind, listed in shown.items():
        if show and listed > show:
            yield paint(f"  ... and {listed - show} more {kind} record(s) (--show 0 lists "
                        "all)", "dim")
    for line in replay.invalid[:show or None]:
        yield paint(f"  {line.where}: skipped: {line.error}", "dim")
    if show and len(replay.invalid) > show:
        yield paint(f"  ... and {len(replay.invalid) - show} more skipped line(s)", "dim")


def _record(change: RecordChange, paint: Paint) -> Iterator[str]:
    where = change.where + (f" (event {change.member})" if change.member is not None else "")
    old, new = change.old, change.new
    if change.change == "different-attributes":
        what = str(new.definition)
    elif old.definition is not None and old.definition == new.definition and not (
            old.tied or new.tied):
        # The same definition, converted under one and dead-lettered under the other.
        what = f"{new.definition}: {_state(old)} -> {_state(new)}"
    else:
        what = f"{_outcome(old)} -> {_outcome(new)}"
    yield f"  {where}: {paint.change(change.change, change.change)}: {what}"
    for attribute in change.attributes:
        yield _field(attribute)


def _outcome(outcome: Outcome) -> str:
    if outcome.status == "ambiguous":
        return "ambiguous (" + ", ".join(outcome.tied) + ")"
    if outcome.status == "unmatched":
        return f"unmatched: {outcome.detail}" if outcome.detail else "unmatched"
    return f"{outcome.definition}" + ("" if outcome.status == "matched"
                                      else f" {_state(outcome)}")


def _state(outcome: Outcome) -> str:
    if outcome.status != "dead-letter":
        return "converted"
    what = f"dead-lettered ({outcome.reason})"
    return f"{what}: {outcome.detail}" if outcome.detail else what


__all__ = ["render", "value_text"]
