"""Matching a value against a level-1 template in time linear in the value's length.

The rule (gateway/templates/template.py): each `{name}` captures one or more characters, never
the separator when the template contains it; a repeated name captures the same text;
where a value splits more than one way, the earlier placeholder takes the shortest text.
The obvious regex (`[^/]+?` per placeholder) says exactly that, but a backtracking engine
tries every split of a segment before it gives up: `{a}-{b}-{c}` against a segment of
1,000 dashes that ends in the wrong literal costs n^3/6 steps (seconds), and an MQTT topic
may be 65,535 bytes long. Two facts make the rule cheap to follow:

1. The value's separators line up with the template's (a placeholder never takes one),
   so the template splits into *units* (segments, or the whole value when the template
   has no separator) that match their own piece of the value.
2. Inside a unit, what follows a placeholder can match from a position only if it can
   from any earlier one, as long as it starts with a placeholder whose text nothing else
   must equal: that placeholder simply starts earlier. So a placeholder followed by
   literal text and then such a placeholder ends at the *first* occurrence of that text
   (the shortest split that can work, and if it cannot, none can); one followed by another
   placeholder takes one character; one followed by literal text up to the unit's end
   takes everything before that text; the last one takes the rest of the unit.

`linear_regex` writes that as a regex that cannot backtrack (atomic loops that stop at
the next literal, one atomic group per unit), in Python's or Java's dialect (the
Spark pipeline runs the Java one). Templates it cannot write that way (a repeated name
whose first occurrence shares its unit with another placeholder, a backreference right
after a placeholder, long literal text after a placeholder) use `SearchMatcher`: the same
facts as a search over `str.find` results, linear for every template without a repeated
name, with a repeated name's value pinned first wherever a unit fixes it. Only a
template whose repeated names no unit pins (`{a}-{b}-{a}` in one segment) can need real
search; that search has a work budget, and a value that exhausts it is not matched
(`SearchMatcher.gave_up` counts those; `xrgw lint` warns about such templates).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Literal, Protocol

# Literal text after a placeholder is found by a lookahead at every character of the
# placeholder's run: cost n * len(text). Longer text goes to `SearchMatcher` (str.find,
# linear whatever the length).
MAX_LOOKAHEAD = 16
# `SearchMatcher` steps (a tried split, or 256 characters compared) before it gives up
# on one value: about a millisecond. Only a template with a repeated name no unit pins
# can need more than a few steps per placeholder (`template_notes`).
SEARCH_BUDGET = 1_000

Dialect = Literal["python", "java"]


class _Part(Protocol):
    @property
    def literal(self) -> str | None: ...
    @property
    def name(self) -> str | None: ...


class Template(Protocol):
    """What matching reads of a `gateway.templates.template.Template` (which imports this module,
    so this one names only the shape)."""

    @property
    def text(self) -> str: ...
    @property
    def separator(self) -> str: ...
    @property
    def parts(self) -> Sequence[_Part]: ...
    @property
    def names(self) -> tuple[str, ...]: ...


log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Token:
    """Literal text or one placeholder occurrence, inside one unit."""

    literal: str | None = None
    name: str | None = None


Unit = tuple[Token, ...]


def units_of(template: Template) -> tuple[tuple[Unit, ...], bool]:
    """The template's units and whether they are separator-delimited segments (True) or
    one unit holding the whole value (False)."""
    sep = template.separator
    segmented = sep in template.text
    units: list[list[Token]] = [[]]
    for part in template.parts:
        if part.literal is None:
            units[-1].append(Token(name=part.name))
            continue
        pieces = part.literal.split(sep) if segmented else [part.literal]
        for i, piece in enumerate(pieces):
            if i:
                units.append([])
            if piece:
                units[-1].append(Token(literal=piece))
    return tuple(tuple(u) for u in units), segmented


def repeated_names(template: Template) -> frozenset[str]:
    counts: dict[str, int] = {}
    for part in template.parts:
        if part.name is not None:
            counts[part.name] = counts.get(part.name, 0) + 1
    return frozenset(n for n, c in counts.items() if c > 1)


def why_not_linear_regex(template: Template) -> str | None:
    """Why `linear_regex` cannot write this template (None when it can)."""
    units, _ = units_of(template)
    repeated = repeated_names(template)
    bound: set[str] = set()
    for unit in units:
        free = [t.name for t in unit if t.name is not None and t.name not in bound]
        if len(set(free)) != len(free):
            return "a name repeated inside one segment"
        if len(free) > 1 and any(n in repeated for n in free):
            return "a repeated name shares its first segment with another placeholder"
        for j, token in enumerate(unit):
            if token.name is None or token.name in bound:
                continue
            run, _ = _run_after(unit, j, bound)
            if run is None:
                return "a repeated name right after a placeholder"
            if len(run) > MAX_LOOKAHEAD:
                return f"more than {MAX_LOOKAHEAD} literal characters after a placeholder"
        bound.update(free)
    return None


def _run_after(unit: Unit, j: int, bound: set[str]) -> tuple[str | None, bool]:
    """The literal text right after the placeholder at `j` (None when a backreference is
    part of it) and whether the next placeholder is a free one (else the unit ends)."""
    out: list[str] = []
    for token in unit[j + 1:]:
        if token.literal is not None:
            out.append(token.literal)
        elif token.name in bound:
            return None, False
        else:
            return "".join(out), True
    return "".join(out), False


@dataclass(frozen=True)
class _Syntax:
    dialect: Dialect

    def escape(self, text: str) -> str:
        if self.dialect == "python":
            return re.escape(text)
        return "".join(c if c.isalnum() else "\\" + c for c in text)

    def group(self, name: str, body: str) -> str:
        return f"(?P<{name}>{body})" if self.dialect == "python" else f"({body})"

    def backref(self, name: str, groups: Sequence[str]) -> str:
        if self.dialect == "python":
            return f"(?P={name})"
        return f"(?:\\{groups.index(name) + 1})"  # (?:) so a digit after it stays literal


def linear_regex(template: Template, dialect: Dialect = "python"
                 ) -> tuple[str, list[str]] | None:
    """An anchored regex for `template` that runs in time linear in the value's length
    and captures what the rule says, and its group names in order; None when the
    template needs `SearchMatcher` (`why_not_linear_regex`).

    Python: named groups, `\\Z` at the end (use with `re.DOTALL`). Java: numbered groups
    and backreferences, `(?s)^...\\z`. A loop that must not give characters back is an
    atomic group around a greedy one, `(?>x*)`, in both dialects (Python since 3.11):
    not the possessive `x*+`, which CPython before 3.11.5 matched wrongly around a
    lookahead (gh-100061, gh-106052).
    """
    if why_not_linear_regex(template) is not None:
        return None
    syntax = _Syntax(dialect)
    units, segmented = units_of(template)
    sep = template.separator
    # One character of a placeholder (both dialects' `.` takes a newline under DOTALL).
    one = f"[^{syntax.escape(sep)}]" if segmented else "."
    groups: list[str] = []
    out: list[str] = []
    for u, unit in enumerate(units):
        if u:
            out.append(syntax.escape(sep))
        bound = set(groups)
        body: list[str] = []
        for j, token in enumerate(unit):
            if token.literal is not None:
                body.append(syntax.escape(token.literal))
                continue
            assert token.name is not None
            if token.name in bound:
                body.append(syntax.backref(token.name, groups))
                continue
            run, free_next = _run_after(unit, j, bound)
            assert run is not None
            if not run:
                # The unit's last placeholder takes the rest; one followed by another
                # placeholder takes one character.
                capture = f"(?>{one}+)" if not free_next else one
            elif free_next:
                # Up to the first occurrence of `run` (at least one character).
                if len(run) == 1:
                    stop = syntax.escape(run)
                    loop = (f"[^{syntax.escape(sep)}{stop}]" if segmented else f"[^{stop}]")
                else:
                    loop = f"(?:(?!{syntax.escape(run)}){one})"
                capture = f"{one}(?>{loop}*)"
            else:
                # Everything before the unit's closing literal text: greedy, giving back
                # at most len(run) characters per position inside the atomic group.
                capture = f"{one}+"
            groups.append(token.name)
            bound.add(token.name)
            body.append(syntax.group(token.name, capture))
        # Atomic: a unit's first match is the rule's; nothing after it may re-split it.
        has_placeholder = any(t.name is not None for t in unit)
        out.append(f"(?>{''.join(body)})" if has_placeholder else "".join(body))
    source = "".join(out)
    if dialect == "python":
        return source + r"\Z", groups
    return "(?s)^" + source + "\\z", groups


class _GiveUp(Exception):
    pass


class SearchMatcher:
    """The rule as a search over the units, for templates `linear_regex` cannot write.

    Linear for every template without a repeated name: each placeholder's split is the
    first that can work (fact 2 of the module docstring), so nothing is retried. A
    repeated name is pinned first by any unit in which it is the only unknown
    placeholder (its length then follows from the unit's length). Only names no unit
    pins make the search try several splits; then it stops after `SEARCH_BUDGET` steps.
    """

    def __init__(self, template: Template, budget: int = SEARCH_BUDGET) -> None:
        self.units, self.segmented = units_of(template)
        self.text = template.text
        self.separator = template.separator
        self.names = template.names
        self.repeated = repeated_names(template)
        self.budget = budget
        self.gave_up = 0  # values not matched because the budget ran out
        # Per unit and token: whether the token's name occurs again later in the template.
        later: list[list[bool]] = []
        seen: set[str] = set()
        for unit in reversed(self.units):
            flags = []
            for token in reversed(unit):
                flags.append(token.name is not None and token.name in seen)
                if token.name is not None:
                    seen.add(token.name)
            later.append(flags[::-1])
        self.referenced_later = later[::-1]
        # How `_pin` fixes repeated names, found once: (unit, name, occurrences in the
        # unit, the unit's other tokens before its first occurrence, the rest of them).
        self.pins: list[tuple[int, str, int, Unit, Unit]] = []
        pinned: set[str] = set()
        changed = True
        while changed:
            changed = False
            for u, unit in enumerate(self.units):
                free = {t.name for t in unit if t.name is not None and t.name not in pinned}
                if len(free) != 1 or not free <= self.repeated:
                    continue
                (name,) = free
                first = next(j for j, t in enumerate(unit) if t.name == name)
                others = tuple(t for t in unit[first:] if t.name != name)
                self.pins.append((u, name, sum(1 for t in unit if t.name == name),
                                  unit[:first], others))
                pinned.add(name)
                changed = True
        # Only unpinned repeated names can make the search retry; for those templates a
        # linear check of each unit first turns most values away.
        self.may_search = not self.repeated <= pinned

    def __call__(self, value: str) -> dict[str, str] | None:
        if self.segmented:
            pieces = value.split(self.separator)
            if len(pieces) != len(self.units):
                return None
        else:
            pieces = [value]
        bound: dict[str, str] = {}
        if self.repeated and not self._pin(pieces, bound):
            return None
        # Each unit on its own, repeated names unpinned treated as free: a linear
        # necessary condition that turns most values away before any search.
        if self.may_search:
            for unit, piece in zip(self.units, pieces, strict=True):
                if not _feasible(unit, piece, bound):
                    return None
        self._left = self.budget
        try:
            found = self._step(pieces, 0, 0, 0, bound)
        except _GiveUp:
            self.gave_up += 1
            if self.gave_up == 1:  # once per template: the value itself is never logged
                log.warning("template %r: gave up matching a value of %d characters after "
                            "%d steps; it is treated as not matching (xrgw lint explains "
                            "which templates can need a search)", self.text, len(value),
                            self.budget)
            return None
        return {name: bound[name] for name in self.names} if found else None

    def _pin(self, pieces: list[str], bound: dict[str, str]) -> bool:
        """Bind every repeated name some unit fixes (`self.pins`, in order); False when
        a unit cannot match."""
        for u, name, count, before, after in self.pins:
            piece = pieces[u]
            offset = sum(len(t.literal) if t.literal is not None else len(bound[t.name or ""])
                         for t in before)
            rest = len(piece) - offset - sum(
                len(t.literal) if t.literal is not None else len(bound[t.name or ""])
                for t in after)
            if rest < count or rest % count:
                return False
            bound[name] = piece[offset:offset + rest // count]
        return True

    def _spend(self, steps: int) -> None:
        self._left -= steps
        if self._left < 0:
            raise _GiveUp

    def _step(self, pieces: list[str], u: int, j: int, pos: int, bound: dict[str, str]
              ) -> bool:
        units = self.units
        while True:
            if u == len(units):
                return True
            unit, piece = units[u], pieces[u]
            if j == len(unit):
                if pos != len(piece):
                    return False
                u, j, pos = u + 1, 0, 0
                continue
            token = unit[j]
            if token.literal is not None or token.name in bound:
                text = token.literal if token.literal is not None else bound[token.name or ""]
                if len(text) > 256:
                    self._spend(len(text) >> 8)
                if not piece.startswith(text, pos):
                    return False
                pos += len(text)
                j += 1
                continue
            break
        name = token.name or ""
        # The literal run after the placeholder (backreferences included), up to the next
        # unbound placeholder (k) or the unit's end.
        k, run_parts = j + 1, []
        while k < len(unit):
            nxt = unit[k]
            if nxt.literal is not None:
                run_parts.append(nxt.literal)
            elif nxt.name in bound:
                run_parts.append(bound[nxt.name or ""])
            else:
                break
            k += 1
        run = "".join(run_parts)
        n = len(piece)
        later = self.referenced_later[u]
        if k == len(unit):  # one split only: the run closes the unit
            end = n - len(run)
            if end <= pos or not piece.startswith(run, end):
                return False
            bound[name] = piece[pos:end]
            if self._step(pieces, u + 1, 0, 0, bound):
                return True
            del bound[name]
            return False
        # When this name is the unit's last unknown, its length follows from the rest.
        count, fixed = 0, 0
        for later_token in unit[j:]:
            if later_token.literal is not None:
                fixed += len(later_token.literal)
            elif later_token.name == name:
                count += 1
            elif later_token.name in bound:
                fixed += len(bound[later_token.name or ""])
            else:
                break
        else:
            size, extra = divmod(n - pos - fixed, count)
            if extra or size < 1:
                return False
            self._spend(1)
            bound[name] = piece[pos:pos + size]
            if self._step(pieces, u, j + 1, pos + size, bound):
                return True
            del bound[name]
            return False
        # Try the splits shortest first; the first is the only one worth trying unless
        # this name or the next placeholder's must equal something later. Where several
        # are tried, each must leave a rest of the unit that can match (`_feasible`).
        only_first = not later[j] and not later[k]
        last = n - 1 - len(run)  # the next placeholder needs a character
        end = pos + 1
        while end <= last:
            if run:
                found = piece.find(run, end, last + len(run))
                if found < 0:
                    return False
                self._spend(1 + ((found - end) >> 8))
                end = found
            else:
                self._spend(1)
            bound[name] = piece[pos:end]
            if not only_first:
                self._spend((n - end) >> 8)
            if ((only_first or _feasible(unit, piece, bound, k, end + len(run)))
                    and self._step(pieces, u, k, end + len(run), bound)):
                return True
            del bound[name]
            if only_first:
                return False
            end += 1
        return False


def _feasible(unit: Unit, piece: str, bound: dict[str, str], j: int = 0, pos: int = 0
              ) -> bool:
    """Whether `piece[pos:]` can match `unit[j:]` when every placeholder not in `bound`
    may take any text (the first split that can work, as in the regex: linear, no
    retries)."""
    n, m = len(piece), len(unit)
    while j < m:
        token = unit[j]
        if token.literal is not None or token.name in bound:
            text = token.literal if token.literal is not None else bound[token.name or ""]
            if not piece.startswith(text, pos):
                return False
            pos += len(text)
            j += 1
            continue
        k, run_parts = j + 1, []
        while k < m and (unit[k].literal is not None or unit[k].name in bound):
            nxt = unit[k]
            run_parts.append(nxt.literal if nxt.literal is not None
                             else bound[nxt.name or ""])
            k += 1
        run = "".join(run_parts)
        if k == m:
            return n - len(run) > pos and piece.endswith(run)
        if run:
            found = piece.find(run, pos + 1)
            if found < 0:
                return False
            pos = found + len(run)
        else:
            pos += 1
        j = k
    return pos == n


def template_matcher(template: Template) -> Callable[[str], dict[str, str] | None]:
    """`template.match` for a template with placeholders that is not a lone one."""
    written = linear_regex(template)
    if written is None:
        return SearchMatcher(template)
    match = re.compile(written[0], re.DOTALL).match

    def regex_match(value: str) -> dict[str, str] | None:
        found = match(value)
        return None if found is None else found.groupdict()

    return regex_match


def pinned_names(template: Template) -> frozenset[str]:
    """The repeated names some unit fixes whatever the value (`SearchMatcher._pin`)."""
    return frozenset(name for _, name, _, _, _ in SearchMatcher(template).pins)


def template_notes(template: Template) -> list[tuple[str, str]]:
    """What `xrgw lint` says about one template: (message, fix) pairs.

    - Adjacent placeholders (`{a}{b}`): nothing tells where one ends, so the first always
      captures one character; a separator between them makes the split mean something.
    - A repeated name no unit fixes (`{a}-{b}-{a}` in one segment): the only templates
      whose matching must try several splits; past `SEARCH_BUDGET` steps (long values)
      a value is not matched.
    """
    notes: list[tuple[str, str]] = []
    parts = template.parts
    for left, right in pairwise(parts):
        if left.name is not None and right.name is not None:
            notes.append((
                f"template {template.text!r}: {{{left.name}}}{{{right.name}}} has nothing "
                f"between the placeholders, so {{{left.name}}} always captures exactly one "
                "character",
                f"put a separator between them ({{{left.name}}}-{{{right.name}}}) or use "
                "one placeholder"))
    unpinned = sorted(repeated_names(template) - pinned_names(template))
    if unpinned:
        names = ", ".join(f"{{{n}}}" for n in unpinned)
        notes.append((
            f"template {template.text!r}: {names} repeated next to other placeholders in "
            "a segment; matching must try several splits, and a long value that needs "
            f"more than {SEARCH_BUDGET} steps is not matched",
            "give the repeated name a segment of its own, or use different names"))
    return notes
