"""Template matching is linear in the value's length and keeps the lazy regex's answers.

Until issue 28 a template compiled to `[^/]+?` groups, and a backtracking engine tried
every split of a segment before giving up: one 1,000-character MQTT topic of dashes
against `/plant/{site}-{line}-{machine}/temp` took seconds, and topics may be 65,535
bytes. `gateway.templates.match` now writes regexes that cannot backtrack, or searches
with `str.find`. Here:

- the new matchers (the regex, the Java regex run by Python's engine, and the search
  forced on every template) give exactly what the old lazy regex gave, on generated
  templates (adjacent placeholders, repeated names, long literals, both separators) and
  values built near them;
- the regexes have no lazy or unbounded-backtracking parts (a structure check);
- a family of worst-case templates against 65,535-character adversarial values, through
  `Template.match` and through the `Matcher` the daemon and `xrgw match` use, finishes
  in a child process within a timeout the old code exceeds by orders of magnitude (a
  bound on the work, not a timing assertion: nothing here compares a duration);
- the search's own step count stays proportional to the template, not the value, for
  templates without repeated names, and it gives up (no match) within its budget on the
  few that can need real search.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.templates.match import (
    MAX_LOOKAHEAD,
    SearchMatcher,
    linear_regex,
    why_not_linear_regex,
)
from gateway.templates.template import Template
from tests.unit.core.defs import define, opt

ROOT = Path(__file__).resolve().parents[2]


def _lazy_regex(template: Template) -> re.Pattern[str]:
    """The regex templates compiled to before issue 28: the semantics to keep."""
    if template.whole_value:
        return re.compile(f"(?P<{template.parts[0].name}>.+)\\Z", re.DOTALL)
    sep = template.separator
    run = f"[^{re.escape(sep)}]+?" if sep in template.text else ".+?"
    out, seen = [], set()
    for part in template.parts:
        if part.literal is not None:
            out.append(re.escape(part.literal))
        elif part.name in seen:
            out.append(f"(?P={part.name})")
        else:
            seen.add(part.name or "")
            out.append(f"(?P<{part.name}>{run})")
    return re.compile("".join(out) + r"\Z", re.DOTALL)


def _old_match(template: Template, value: str) -> dict[str, str] | None:
    if template.is_constant:
        return {} if value == template.text else None
    found = _lazy_regex(template).match(value)
    return None if found is None else found.groupdict()


def _java_as_python(template: Template, value: str) -> dict[str, str] | None:
    """The Spark (Java) dialect run by Python's engine: numbered groups, `\\z`."""
    written = linear_regex(template, "java")
    assert written is not None
    source, groups = written
    assert source.startswith("(?s)^") and source.endswith("\\z")
    found = re.match(source[:-2] + r"\Z", value)
    return None if found is None else dict(zip(groups, found.groups(), strict=True))


LITERALS = ["a", "b", "ab", "aab", "-", ".", "_", "--", "*", "(", "\\", "é", " ",
            "0123456789abcdefXY", "ab" * 9]
NAMES = ["p", "q", "r"]


@st.composite
def template_texts(draw: st.DrawFn, separator: str) -> str:
    pieces = draw(st.lists(
        st.one_of(st.sampled_from(LITERALS), st.sampled_from(NAMES).map(lambda n: f"{{{n}}}"),
                  st.just(separator)),
        min_size=1, max_size=9))
    return "".join(pieces)


@st.composite
def values_near(draw: st.DrawFn, template: Template) -> str:
    alphabet = st.sampled_from(["a", "b", "-", ".", "/", "_", "\n", "é", "ab", "0123"])
    if draw(st.integers(0, 3)) == 0:
        return draw(st.lists(alphabet, max_size=14).map("".join))
    captures = {n: draw(st.lists(alphabet, min_size=0, max_size=4).map("".join))
                for n in template.names}
    text = "".join(p.literal if p.literal is not None else captures[str(p.name)]
                   for p in template.parts)
    disturb = draw(st.sampled_from(["", "", "tail", "head", "cut", "sep"]))
    if disturb == "tail":
        text += draw(alphabet)
    elif disturb == "head":
        text = draw(alphabet) + text
    elif disturb == "cut" and text:
        text = text[:-1]
    elif disturb == "sep":
        text = text.replace(template.separator, template.separator * 2, 1)
    return text


@settings(max_examples=400, deadline=None)
@given(st.data(), st.sampled_from(["/", "."]))
def test_every_matcher_gives_what_the_lazy_regex_gave(data: st.DataObject, separator: str
                                                      ) -> None:
    template = Template.parse(data.draw(template_texts(separator)), separator)
    # The search forced on every template, with a budget no generated value exhausts
    # (`template.match` keeps the default: a search there must fit it too).
    search = (None if template.is_constant or template.whole_value
              else SearchMatcher(template, budget=10**6))
    java = (not template.is_constant and not template.whole_value
            and linear_regex(template, "java") is not None)
    for _ in range(8):
        value = data.draw(values_near(template))
        expected = _old_match(template, value)
        assert template.match(value) == expected, (template.text, value)
        if search is not None:
            assert search(value) == expected, (template.text, value)
        if java:
            assert _java_as_python(template, value) == expected, (template.text, value)


@pytest.mark.parametrize(("text", "separator", "value", "expected"), [
    # The earlier placeholder takes the shortest text that lets the rest match.
    ("{a}-{b}", "/", "x-y-z", {"a": "x", "b": "y-z"}),
    ("{a}-{b}-", "/", "x-y-", {"a": "x", "b": "y"}),
    ("{a}-{b}-", "/", "x--", None),
    ("{a}{b}", "/", "xyz", {"a": "x", "b": "yz"}),
    ("/{a}-{b}/t", "/", "/--/t", None),
    ("/{a}-{b}/t", "/", "/---/t", {"a": "-", "b": "-"}),
    # Repeated names: pinned by a segment of their own, or searched.
    ("/{a}-{b}/{a}", "/", "/x-y-z/x-y", {"a": "x-y", "b": "z"}),
    ("{a}-{a}", "/", "x-y-x-y", {"a": "x-y"}),
    ("{a}-{b}-{a}", "/", "x-y-z-x-y", {"a": "x-y", "b": "z"}),
    ("/{a}-{b}/{a}-{c}", "/", "/x-y-z/x-y-w", {"a": "x", "b": "y-z", "c": "y-w"}),
    ("{a}{a}{b}", "/", "xxxyz", {"a": "x", "b": "xyz"}),
    ("{a}ab{a}", "/", "xabyabx", None),
    # A repeated name whose length follows from the rest of its segment: one character.
    ("{a}{b}-{b}", "/", "x1-1", {"a": "x", "b": "1"}),
    # Literal text longer than the regex's lookahead: the search finds it.
    ("{a}0123456789abcdefXY{b}", "/", "x0123456789abcdefXY0123456789abcdefXYy",
     {"a": "x", "b": "0123456789abcdefXYy"}),
])
def test_cases(text: str, separator: str, value: str, expected: dict[str, str] | None
               ) -> None:
    template = Template.parse(text, separator)
    assert _old_match(template, value) == expected  # the case states the old semantics
    assert template.match(value) == expected
    assert SearchMatcher(template)(value) == expected


# Templates whose placeholders share a segment, every separator that matters, repeated
# literals; each with values that make the lazy regex try every split.
FAMILY: list[tuple[str, str, list[str]]] = [
    ("/plant/{site}-{line}-{machine}/temp", "/", ["-", "a-"]),
    ("/plant/{site}.{line}.{machine}/temp", "/", [".", "a."]),
    ("/plant/{site}_{line}_{machine}_{cell}/temp", "/", ["_", "x_"]),
    ("{a}-{b}-{c}-{d}", "/", ["-", "--a"]),
    ("{a}{b}{c}{d}x", "/", ["a", "ab"]),
    ("x{a}ab{b}ab{c}abz", "/", ["ab", "aab"]),
    ("/s/{a}{b}{c}/t", "/", ["a", "ab"]),
    ("{a}0123456789abcdefXY{b}0123456789abcdefXY{c}!", "/", ["0123456789abcdefXY", "0"]),
    ("dev.{a}-{b}-{c}.t", ".", ["-", "a-"]),
    ("{a}-{b}-{a}", "/", ["-", "a-"]),
    ("/{a}-{b}/{a}-{c}", "/", ["-", "a-"]),
    ("{a}{b}{a}{b}", "/", ["a", "ab"]),
]
LONGEST = 65_535


def _adversarial(text: str, separator: str, unit: str) -> list[str]:
    """Values of up to LONGEST characters: the separator-free middle of each template
    filled with `unit`, closed by the wrong literal (no match) and the right one."""
    head, _, _ = text.partition("{")
    tail = text[text.rindex("}") + 1:]
    room = LONGEST - len(head) - len(tail) - 1
    body = (unit * (room // len(unit) + 1))[:room]
    return [head + body + tail + "~", head + body + tail, head + body, body]


def test_the_worst_case_family_finishes_in_a_child_within_a_generous_timeout() -> None:
    """65,535-character adversarial values against every template of the family, through
    `Template.match`, the `Matcher` and `Converter.convert_batch` with its `explain` of
    unmatched records (the path of the daemon and `xrgw match`). Before
    issue 28 one 1,500-character value of the first template took ~9 s; these are 44
    times longer against templates with up to four placeholders in a segment (hours).
    The child's answers are compared with the rule on short values above; here they are
    checked for sanity (the daemon's path agrees with `Template.match`, and a value
    closed by the wrong literal does not match)."""
    script = textwrap.dedent("""
        import json
        import sys
        from gateway.convert import Converter
        from gateway.record import NativeMessage
        from gateway.templates.template import Template
        from defs import define, opt
        cases = json.loads(sys.stdin.read())
        out = []
        for text, separator, values in cases:
            template = Template.parse(text, separator)
            protocol, field = (("MQTT/5.0", "topic_name") if separator == "/"
                               else ("NATS", "subject"))
            converter = Converter([define("d", protocol, [opt(field, text,
                                                              type="uritemplate")])])
            for value in values:
                direct = template.match(value)
                record = NativeMessage(protocol, {field: value})
                via = converter.matcher.match(record)
                # The route's call: match, and explain (every near template) when unmatched.
                [[conversion]] = converter.convert_batch([record])
                out.append([text, len(value), direct is not None, via.matched,
                            dict(via.context) == (direct or {})
                            and (conversion.reason == "unmatched") == (direct is None)])
        print(json.dumps(out))
    """)
    cases = [[text, sep, _adversarial(text, sep, unit)]
             for text, sep, units in FAMILY for unit in units]
    done = subprocess.run([sys.executable, "-c", script], input=json.dumps(cases),
                          capture_output=True, text=True, timeout=120, cwd=ROOT,
                          # `defs` (the tests' definition builders) is found through the
                          # child's PYTHONPATH, not by editing sys.path.
                          env={**os.environ, "PYTHONPATH": str(ROOT / "tests/unit/core")})
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)
    assert len(results) == sum(len(values) for _, _, values in cases)
    for text, length, direct, via, same in results:
        assert length <= LONGEST
        assert direct == via and same, (text, length)
    by_template: dict[str, list[bool]] = {}
    for text, _, direct, _, _ in results:
        by_template.setdefault(text, []).append(direct)
    # Closed by the wrong literal: never a match (the first value of every group of four).
    for text, outcomes in by_template.items():
        if not text.endswith("}"):
            assert not any(outcomes[0::4]), text


def test_the_first_template_of_the_issue_matches_a_long_topic_as_the_rule_says() -> None:
    template = Template.parse("/plant/{site}-{line}-{machine}/temp")
    dashes = "-" * 65_000
    assert template.match(f"/plant/{dashes}/temp") == {
        "site": "-", "line": "-", "machine": "-" * 64_996}
    assert template.match(f"/plant/{dashes}/tempx") is None
    assert template.match(f"/plant/a-{'b' * 65_000}-c/temp") == {
        "site": "a", "line": "b" * 65_000, "machine": "c"}


@pytest.mark.parametrize("text", [t for t, _, _ in FAMILY] + [
    "{a}", "a/{b}", "{a}/{b}{c}", "{y}/{x}-{z}.z/{y}", "x{a}", "{a}.{b}", "{a}\\{b}",
])
def test_regexes_cannot_backtrack(text: str) -> None:
    """No lazy or possessive quantifier (CPython before 3.11.5 got `x*+` wrong around a
    lookahead); every loop is an atomic group around one greedy repeat of a single
    character (`(?>[^/]+)`, `(?>(?:(?!ab).)*)`), except a segment's last placeholder before
    its closing literal (greedy inside the segment's atomic group, giving back at most
    that literal's length per position); every segment with a placeholder is atomic."""
    template = Template.parse(text)
    source = template.regex_source
    if source is None:
        assert why_not_linear_regex(template) is not None
        return
    one_char = r"(?:\[\^[^\]]*\]|\.|\(\?:\(\?!(?:\\.|[^)])*\)(?:\[\^[^\]]*\]|\.)\))"
    atomic_loop = re.compile(r"\(\?>" + one_char + r"[*+]\)")
    for dialect in ("python", "java"):
        written = linear_regex(template, dialect) if not template.whole_value else None
        regex = source if written is None else written[0]
        assert "+?" not in regex and "*?" not in regex and "*+" not in regex, regex
        assert "++" not in regex.replace("\\+", ""), regex
        rest = atomic_loop.sub("", regex.replace("\\\\", "").replace("\\+", "").replace(
            "\\*", ""))
        greedy = re.findall(r"[*+]", rest)
        segments = max(1, text.count("/") + 1)
        assert len(greedy) <= segments, (regex, rest)
        if written is not None and any(p.name for p in template.parts):
            assert "(?>" in regex
    for literal in re.findall(r"\(\?!(.*?)\)", source):
        assert len(literal.replace("\\", "")) <= MAX_LOOKAHEAD


@pytest.mark.parametrize(("text", "unit"), [
    ("{a}0123456789abcdefXY{b}0123456789abcdefXY{c}!", "0123456789abcdefXY"),
    ("{a}0123456789abcdefXY{b}", "0"),
    ("/s/{a}-{b}/{a}", "-"),  # `a` pinned by its own segment, then linear
    ("{a}-{a}", "-"),  # one name in a segment: pinned by the segment's length
])
def test_the_search_does_work_proportional_to_the_template(text: str, unit: str) -> None:
    """A step is a tried split or 256 compared characters: the budget of 400 covers
    comparing each 30,000-repeat value a few times over, and a search that retried
    splits would need one per repeat."""
    template = Template.parse(text)
    search = SearchMatcher(template, budget=400)
    for value in (unit * 30_000, unit * 30_000 + "!", "/s/" + unit * 30_000 + "/x",
                  "/s/" + unit * 30_000 + "/" + unit * 15_000):
        search(value)
    assert search.gave_up == 0


def test_the_search_gives_up_within_its_budget_on_names_no_segment_pins(caplog) -> None:
    template = Template.parse("{a}-{b}-{a}")
    search = SearchMatcher(template)
    assert search("x-y-x") == {"a": "x", "b": "y"}
    secret = "-" * 65_534 + "sender-text"
    assert search(secret) is None
    assert search(secret) is None
    assert search.gave_up == 2
    # Logged once per template, with the length, never the value.
    [record] = [r for r in caplog.records if r.name == "gateway.templates.match"]
    assert "'{a}-{b}-{a}'" in record.getMessage() and "65545 characters" in record.getMessage()
    assert "sender-text" not in record.getMessage()


def test_values_no_segment_can_take_are_turned_away_before_any_search() -> None:
    search = SearchMatcher(Template.parse("/s/{a}-{b}-{a}/t"), budget=0)
    for value in ("/s/" + "-" * 65_000 + "/tx", "/s/" + "a" * 65_000 + "/t",
                  "/s/" + "-" * 65_000, "/s/-/t"):
        assert search(value) is None
    assert search.gave_up == 0  # a search step would have exceeded the budget of 0


@pytest.mark.parametrize("value", ["x-y", "-x-y"])
def test_the_check_before_the_search_finds_each_run_after_a_placeholders_character(
        value: str) -> None:
    """A placeholder takes at least one character, so the literal after it is looked for
    from the next one on: "-x-y" has no "-" after "{a}" takes its first character and
    then one after "{b}" does ("-" at 0 cannot end {a}); "x-y" has none after "{b}"."""
    search = SearchMatcher(Template.parse("{a}-{b}-{a}"), budget=0)
    assert search(value) is None
    assert search.gave_up == 0  # turned away without a search step


def test_a_search_step_is_a_tried_split_or_256_characters_compared() -> None:
    """The budget counts what `SEARCH_BUDGET` says: here one split tried for {a}
    (1), 299 characters passed by `str.find` to reach the "-" that ends it (1: 256 or
    more), 303 characters after it checked for the rest of the segment (1), and {b}'s
    one possible split, which is free; so 3 steps, and a budget of 2 gives up."""
    template = Template.parse("{a}-{b}-{a}")
    a = "y" * 300
    assert SearchMatcher(template, budget=3)(a + "-z-" + a) == {"a": a, "b": "z"}
    short = SearchMatcher(template, budget=2)
    assert short(a + "-z-" + a) is None and short.gave_up == 1
    # A one-character {a}: one split tried (1), nothing passed, 303 characters after
    # it checked (1).
    b = "y" * 300
    assert SearchMatcher(template, budget=2)("x-" + b + "-x") == {"a": "x", "b": b}
    short = SearchMatcher(template, budget=1)
    assert short("x-" + b + "-x") is None and short.gave_up == 1


def test_explain_compares_a_bounded_window_of_a_long_value(monkeypatch) -> None:
    """`explain` ranks near definitions by difflib's likeness of the failed value to the
    template; difflib's cost grows with the value (~5 ms for a 65,535-byte topic, per
    definition), so it sees at most 256 characters (or twice the template's length)."""
    from gateway.matching import matcher as matcher_module

    seen: list[int] = []
    real = matcher_module.difflib.SequenceMatcher

    def recording(junk: object, a: str, b: str) -> object:
        seen.append(len(b))
        return real(None, a, b)

    monkeypatch.setattr(matcher_module.difflib, "SequenceMatcher", recording)
    text = "/plant/{site}-{line}-{machine}/temp"
    definitions = [define(f"d{i}", "MQTT/5.0", [opt("topic_name", text + str(i),
                                                     type="uritemplate")]) for i in range(2)]
    topic = "/plant/" + "-" * 65_000 + "/tempx"
    hints = matcher_module.Matcher(definitions).explain(
        matcher_module.NativeMessage("MQTT/5.0", {"topic_name": topic}))
    assert len(hints) == 2 and seen and max(seen) == 256


@pytest.mark.parametrize(("text", "why"), [
    ("{a}/{b}", None),
    ("{a}{a}", "a name repeated inside one segment"),
    ("{y}{x}/{y}", "a repeated name shares its first segment with another placeholder"),
    ("{y}/{x}{y}", "a repeated name right after a placeholder"),
    ("{y}/{x}" + "a" * 70 + "{z}",
     f"more than {MAX_LOOKAHEAD} literal characters after a placeholder"),
])
def test_why_a_template_gets_no_linear_regex_is_said_in_words(text: str, why: str | None
                                                               ) -> None:
    assert why_not_linear_regex(Template.parse(text)) == why
