"""Templates and the matcher against an oracle written from the rule, not from the code.

The rule (docs/architecture.md, gateway/templates/template.py): a level-1 template matches a whole
value; a placeholder captures one or more characters, never the template's separator when
the template contains one (`/` for topics and paths, `.` for NATS subjects); a lone
placeholder takes the whole value (any characters, newlines included); a repeated name
must capture the same text; everything else is literal (regex metacharacters included).
Where a value splits more than one way, the earlier placeholder takes the shortest text.

`_oracle` is that rule as a backtracking search over the parts: no regex. The existing
property tests compare the fast path with the general path, which share the template's
regex, so a regex slip (`$` for `\\Z` lets a trailing newline through; an empty segment
captured on the index path) passed them both; here it fails.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.matching.matcher import Matcher
from gateway.record import NativeMessage
from gateway.templates.template import Template

from .defs import define, opt

LITERALS = ["a", "b", "ab", ".", "*", "+", "$", "(", ")", "-", "\\", "?", "^", "|", "é", " "]
NAMES = ["p", "q", "r"]


def _oracle(template: Template, value: str) -> dict[str, str] | None:
    if template.is_constant:
        return {} if value == template.text else None
    if template.whole_value:
        return {template.names[0]: value} if value else None
    separator = template.separator if template.separator in template.text else None
    parts = template.parts

    def search(i: int, pos: int, got: dict[str, str]) -> dict[str, str] | None:
        if i == len(parts):
            return dict(got) if pos == len(value) else None
        part = parts[i]
        if part.literal is not None:
            if value.startswith(part.literal, pos):
                return search(i + 1, pos + len(part.literal), got)
            return None
        assert part.name is not None
        if part.name in got:
            seen = got[part.name]
            return search(i + 1, pos + len(seen), got) if value.startswith(seen, pos) else None
        for end in range(pos + 1, len(value) + 1):  # shortest first
            if separator is not None and value[end - 1] == separator:
                break
            got[part.name] = value[pos:end]
            found = search(i + 1, end, got)
            if found is not None:
                return found
            del got[part.name]
        return None

    return search(0, 0, {})


@st.composite
def templates(draw: st.DrawFn, separator: str) -> str:
    pieces = draw(st.lists(
        st.one_of(st.sampled_from(LITERALS), st.sampled_from(NAMES).map(lambda n: f"{{{n}}}"),
                  st.just(separator)),
        min_size=1, max_size=7))
    return "".join(pieces)


@st.composite
def values_for(draw: st.DrawFn, template: Template) -> str:
    """Mostly near the template: rendered with drawn captures, then perhaps disturbed."""
    alphabet = st.sampled_from(["a", "b", "x", ".", "/", "\n", "$", "é", "*"])
    if draw(st.booleans()):
        text = draw(st.lists(alphabet, max_size=10).map("".join))
    else:
        captures = {n: draw(st.lists(alphabet, min_size=0, max_size=3).map("".join))
                    for n in template.names}
        text = "".join(p.literal if p.literal is not None else captures[str(p.name)]
                       for p in template.parts)
    disturb = draw(st.sampled_from(["", "\n", "tail", "sep", "double"]))
    if disturb == "\n":
        text += "\n"
    elif disturb == "tail":
        text += "x"
    elif disturb == "sep":
        text = template.separator + text
    elif disturb == "double" and template.separator in text:
        text = text.replace(template.separator, template.separator * 2, 1)
    return text


@settings(max_examples=200, deadline=None)
@given(st.data(), st.sampled_from(["/", "."]))
def test_template_match_is_the_oracle(data: st.DataObject, separator: str) -> None:
    template = Template.parse(data.draw(templates(separator)), separator)
    for _ in range(6):
        value = data.draw(values_for(template))
        assert template.match(value) == _oracle(template, value), (template.text, value)


FIELD = {"/": ("MQTT/5.0", "topic_name"), ".": ("NATS", "subject")}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.sampled_from(["/", "."]))
def test_the_matcher_fast_path_is_the_oracle(data: st.DataObject, separator: str) -> None:
    """A definition per generated template, matched through `Matcher.match` (index,
    segment captures, specialised tests): matched with the oracle's captures exactly when
    the oracle matches."""
    protocol, field = FIELD[separator]
    text = data.draw(templates(separator))
    template = Template.parse(text, separator)
    matcher = Matcher([define("d", protocol, [opt(field, text, type="uritemplate")])])
    for _ in range(6):
        value = data.draw(values_for(template))
        expected = _oracle(template, value)
        result = matcher.match(NativeMessage(protocol, {field: value}))
        assert result.matched == (expected is not None), (text, value, expected)
        if expected is not None:
            assert result.context == expected, (text, value)


@pytest.mark.parametrize(("text", "value", "expected"), [
    ("/s/{p}/t", "/s/1/t", {"p": "1"}),
    ("/s/{p}/t", "/s/1/t\n", None),  # trailing newline: `$` would accept it
    ("/s/{p}/t", "/s//t", None),  # an empty segment is no value
    ("/s/{p}", "/s/", None),
    ("/s/{p}", "/s/1\n", {"p": "1\n"}),  # a newline is text inside a segment
    ("{p}", "a\nb", {"p": "a\nb"}),
    ("{p}", "", None),
    ("/a.b/{p}", "/axb/1", None),  # `.` is literal
    ("/a+/{p}", "/aa/1", None),
    ("/{p}/{p}", "/x/x", {"p": "x"}),
    ("/{p}/{p}", "/x/y", None),
    ("{p}-{q}", "a-b-c", {"p": "a", "q": "b-c"}),
])
def test_fixed_cases(text: str, value: str, expected: dict[str, str] | None) -> None:
    template = Template.parse(text)
    assert _oracle(template, value) == expected  # the oracle itself
    assert template.match(value) == expected
    result = Matcher([define("d", "MQTT/5.0", [opt("topic_name", text, type="uritemplate")])]
                     ).match(NativeMessage("MQTT/5.0", {"topic_name": value}))
    assert result.matched == (expected is not None)
    if expected is not None:
        assert result.context == expected
