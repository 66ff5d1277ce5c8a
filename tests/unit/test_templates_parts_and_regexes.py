"""`gateway.templates.template`: what a parsed template is made of (parts, names, literal text,
separator), the regex it matches with, how it renders, and why a template is refused."""

from __future__ import annotations

import re

import pytest

from gateway.templates.template import (
    Segment,
    Template,
    TemplateError,
    has_placeholders,
    to_wildcard_filter,
)


def test_parse_splits_literals_and_placeholders() -> None:
    t = Template.parse("a/{x}/b{y}")
    assert t.text == "a/{x}/b{y}" and t.separator == "/"
    assert t.parts == (Segment(literal="a/"), Segment(name="x"), Segment(literal="/b"),
                       Segment(name="y"))
    assert Template.parse("{x}").parts == (Segment(name="x"),)
    assert Template.parse("abc").parts == (Segment(literal="abc"),)
    assert Template.parse("").parts == ()
    assert Template.parse("{a}{b}").parts == (Segment(name="a"), Segment(name="b"))
    assert Template.parse("x.{y}", ".").separator == "."
    assert Segment() == Segment(literal=None, name=None)


@pytest.mark.parametrize(("text", "message"), [
    ("a{b{c}", "unbalanced brace in template 'a{b{c}'"),
    ("a}{c}", "unbalanced brace in template 'a}{c}'"),
    ("{c}}", "unbalanced brace in template '{c}}'"),
    ("{c}{", "unbalanced brace in template '{c}{'"),
    ("a/{}", "empty placeholder '{}' in template 'a/{}'"),
    ("{+x}", "placeholder {+x} in '{+x}' uses RFC 6570 level 2-4 syntax; only level 1 "
             "({name}) is allowed"),
    ("{x*}", "placeholder {x*} in '{x*}' uses RFC 6570 level 2-4 syntax; only level 1 "
             "({name}) is allowed"),
    ("{x:3}", "placeholder {x:3} in '{x:3}' uses RFC 6570 level 2-4 syntax; only level 1 "
              "({name}) is allowed"),
    ("{a,b}", "placeholder {a,b} in '{a,b}' uses RFC 6570 level 2-4 syntax; only level 1 "
              "({name}) is allowed"),
    ("{a b}", "placeholder name 'a b' in '{a b}' is not a symbol (letters, digits, "
              "underscore)"),
    ("{a\n}", "placeholder name 'a\\n' in '{a\\n}' is not a symbol (letters, digits, "
              "underscore)"),
])
def test_refusals(text: str, message: str) -> None:
    with pytest.raises(TemplateError) as raised:
        Template.parse(text)
    assert str(raised.value) == message


def test_a_name_with_a_trailing_newline_is_refused() -> None:
    # It used to parse (`$` matches before a final newline), and the template then broke
    # when a record reached it: `(?P<x\n>...)` is no regex.
    with pytest.raises(TemplateError, match="not a symbol"):
        Template.parse("a/{x\n}")


@pytest.mark.parametrize("operator", list("+#./;?&=,!@|"))
def test_every_operator_is_refused(operator: str) -> None:
    with pytest.raises(TemplateError, match="level 2-4"):
        Template.parse(f"{{{operator}x}}")


@pytest.mark.parametrize("name", ["x", "X_1", "0", "_", "aZ9"])
def test_symbols_are_names(name: str) -> None:
    assert Template.parse(f"{{{name}}}").names == (name,)


@pytest.mark.parametrize(("text", "names", "literal_length", "prefix"), [
    ("a/{x}/bc", ("x",), 5, "a/"),
    ("{b}/{a}/{b}", ("b", "a"), 2, ""),
    ("abc", (), 3, "abc"),
    ("", (), 0, ""),
    ("ab{x}cd{y}", ("x", "y"), 4, "ab"),
])
def test_facts(text: str, names: tuple[str, ...], literal_length: int, prefix: str) -> None:
    t = Template.parse(text)
    assert t.names == names
    assert t.is_constant is (not names)
    assert t.literal_length == literal_length
    assert t.literal_prefix == prefix


@pytest.mark.parametrize(("text", "separator", "segmented", "whole", "run"), [
    ("{x}", "/", False, True, "."),
    ("{x}", ".", False, True, "."),
    ("a{x}", "/", False, False, "."),
    ("{x}/", "/", True, False, "[^/]"),
    ("a/{x}", "/", True, False, "[^/]"),
    ("a.{x}", "/", False, False, "."),
    ("a.{x}", ".", False, False, r"[^\.]"),
    ("a/{x}", ".", True, False, "."),
    ("{x}.", ".", False, False, r"[^\.]"),
])
def test_separators(text: str, separator: str, segmented: bool, whole: bool, run: str
                    ) -> None:
    t = Template.parse(text, separator)
    assert t.segmented is segmented
    assert t.whole_value is whole
    assert t.run == run


@pytest.mark.parametrize(("text", "separator", "source"), [
    ("a.b", "/", r"a\.b\Z"),
    ("{x}", "/", r"(?P<x>.+)\Z"),
    # The unit's last placeholder takes the rest of its segment (an atomic loop: it
    # never gives characters back).
    ("a/{x}", "/", r"a/(?>(?P<x>(?>[^/]+)))\Z"),
    # A placeholder followed by literal text and another placeholder stops at the text's
    # first occurrence (an atomic loop that cannot give characters back); one followed by
    # another placeholder takes one character.
    ("{x}{y}", "/", r"(?>(?P<x>.)(?P<y>(?>.+)))\Z"),
    ("{x}-{y}", "/", r"(?>(?P<x>.(?>[^\-]*))\-(?P<y>(?>.+)))\Z"),
    ("{x}ab{y}", "/", r"(?>(?P<x>.(?>(?:(?!ab).)*))ab(?P<y>(?>.+)))\Z"),
    # Literal text that closes a segment: everything before it. A repeated name alone in
    # its first segment is fixed there, then a backreference.
    ("{y}/{x}-{z}.z/{y}", "/",
     r"(?>(?P<y>(?>[^/]+)))/(?>(?P<x>[^/](?>[^/\-]*))\-(?P<z>[^/]+)\.z)/(?>(?P=y))\Z"),
    # A name repeated inside one segment: matched by a search instead of a regex.
    ("a.{x}-{x}", ".", None),
])
def test_regex_source(text: str, separator: str, source: str | None) -> None:
    t = Template.parse(text, separator)
    assert t.regex_source == source
    if source is None:
        assert t.regex is None
    else:
        assert t.regex is not None and t.regex.pattern == source
        assert t.regex.flags & re.DOTALL


@pytest.mark.parametrize(("text", "separator", "value", "captures"), [
    ("a.b", "/", "a.b", {}),
    ("a.b", "/", "axb", None),
    ("a.b", "/", "a.bc", None),
    ("{x}", "/", "a\nb", {"x": "a\nb"}),
    ("{x}", "/", "", None),
    ("a-{x}", "/", "a-\n", {"x": "\n"}),
    ("a-{x}", "/", "a-b/c", {"x": "b/c"}),
    ("a/{x}", "/", "a/b/c", None),
    ("a/{x}", "/", "a/b\n", {"x": "b\n"}),
    ("a.{x}", ".", "a.b.c", None),
    ("a.{x}", ".", "a.b/c", {"x": "b/c"}),
    ("{x}.{y}", ".", "1.2", {"x": "1", "y": "2"}),
    ("{x}-{y}", "/", "1-2-3", {"x": "1", "y": "2-3"}),
    ("{x}/{x}", "/", "1/2", None),
])
def test_match(text: str, separator: str, value: str, captures: dict[str, str] | None
               ) -> None:
    assert Template.parse(text, separator).match(value) == captures


def test_rendering() -> None:
    t = Template.parse("/s/{a}/{b}")
    assert t.missing({"a": None, "b": ""}) == ["a", "b"]
    assert t.missing({"a": 0, "b": False}) == []
    assert t.expand({"a": 1.5, "b": True}) == "/s/1.5/true"
    assert t.expand({"a": False, "b": 0}) == "/s/false/0"
    assert t.expand({"a": "x y", "b": "-._~/?"}, encode=True) == "/s/x%20y/-._~%2F%3F"
    assert t.expand({"a": "x y", "b": "/"}) == "/s/x y//"
    assert t.format_string == "/s/{a}/{b}"
    assert t.expand_strings({"a": "1", "b": "2"}) == "/s/1/2"
    assert Template.parse("{1}/{b}").format_string is None
    assert Template.parse("{1}/{b}").expand_strings({"1": "x", "b": "y"}) == "x/y"
    with pytest.raises(KeyError) as raised:
        t.expand({"a": "1"})
    assert raised.value.args == ("b",)
    with pytest.raises(KeyError):
        t.expand_strings({"a": "1"})
    with pytest.raises(KeyError) as raised:
        t.expand({"a": "", "b": "1"})  # an empty value is unbound
    assert raised.value.args == ("a",)


@pytest.mark.parametrize(("value", "expected"), [
    ("{x}", True), ("a{b}c", True), ("{", False), ("{}", True), ("{a b}", True),
    ("no", False), (1, False),
])
def test_has_placeholders(value: object, expected: bool) -> None:
    assert has_placeholders(value) is expected


@pytest.mark.parametrize(("text", "single", "separator", "expected"), [
    ("a/{x}/b", "+", "/", "a/+/b"),
    ("a/x{y}/b", "+", "/", "a/+/b"),
    ("{x}", "+", "/", "+"),
    ("a.b", "*", ".", "a.b"),
    ("a.{x}.{y}z", "*", ".", "a.*.*"),
    ("XX/{x}", "+", "/", "XX/+"),
])
def test_wildcard_filters(text: str, single: str, separator: str, expected: str) -> None:
    assert to_wildcard_filter(Template.parse(text, separator), single, separator) == expected


def test_wildcard_filters_split_on_slash_by_default() -> None:
    assert to_wildcard_filter(Template.parse("a/{x}/b.{y}"), "+") == "a/+/+"
