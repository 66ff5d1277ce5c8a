import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.templates.template import Template, TemplateError, has_placeholders, to_wildcard_filter


def test_segmented_template_captures_one_segment_each():
    t = Template.parse("/store/{storeid}/cashierdesk/{cdid}")
    assert t.match("/store/12/cashierdesk/3") == {"storeid": "12", "cdid": "3"}
    assert t.match("/store/12/desk/3") is None
    assert t.match("/store/1/2/cashierdesk/3") is None  # never spans '/'
    assert t.match("/store//cashierdesk/3") is None  # non-empty


def test_lone_placeholder_takes_the_whole_value():
    assert Template.parse("{eventType}").match("a/b.c") == {"eventType": "a/b.c"}
    assert Template.parse("{x}").match("") is None


def test_adjacent_placeholders_and_repeats():
    assert Template.parse("{tenant}-{device}").match("t-d-1") == {"tenant": "t", "device": "d-1"}
    t = Template.parse("/a/{x}/b/{x}")
    assert t.match("/a/1/b/1") == {"x": "1"}
    assert t.match("/a/1/b/2") is None


@pytest.mark.parametrize("bad", ["{+x}", "{#x}", "{x*}", "{x:3}", "{a,b}", "{}", "a{b", "a}b",
                                 "{a-b}"])
def test_only_level_one(bad):
    with pytest.raises(TemplateError):
        Template.parse(bad)


def test_expand_and_missing():
    t = Template.parse("/store/{storeid}/cashierdesk/{cdid}")
    assert t.expand({"storeid": "12", "cdid": 3}) == "/store/12/cashierdesk/3"
    with pytest.raises(KeyError) as info:
        t.expand({"storeid": "12"})
    assert info.value.args[0] == "cdid"
    assert t.missing({"storeid": "1"}) == ["cdid"]
    assert t.missing({"storeid": "", "cdid": 0}) == ["storeid"]  # empty is missing, 0 is not
    assert t.expand({"storeid": True, "cdid": False}) == "/store/true/cashierdesk/false"
    assert Template.parse("/q/{v}").expand({"v": "a b/c"}, encode=True) == "/q/a%20b%2Fc"


def test_expand_strings_is_expand_also_for_digit_names():
    # All-digit names cannot go through str.format_map (read as positions): the slow path.
    for text in ("/a/{0}/b/{x}", "/a/{x}/c"):
        t = Template.parse(text)
        context = {name: f"v{name}" for name in t.names}
        assert t.expand_strings(context) == t.expand(context)
    assert Template.parse("/a/{0}").expand_strings({"0": "x"}) == "/a/x"
    with pytest.raises(KeyError):
        Template.parse("/a/{0}").expand_strings({})


@pytest.mark.parametrize(("value", "expected"), [
    ("/a/{b}", True), ("{b}", True), ("/a/b", False), ("a{", False),
    ("}{", False), (5, False), (None, False), (["{b}"], False),
])
def test_has_placeholders(value, expected):
    assert has_placeholders(value) is expected


def test_wildcard_filters():
    t = Template.parse("/store/{storeid}/cashierdesk/{cdid}")
    assert to_wildcard_filter(t, "+") == "/store/+/cashierdesk/+"
    n = Template.parse("store.{id}.desk-{d}")
    assert to_wildcard_filter(n, "*", ".") == "store.*.*"


segment = st.text(
    alphabet=st.characters(blacklist_characters="/{}", blacklist_categories=("Cs",)),
    min_size=1, max_size=12,
)


@given(st.lists(segment, min_size=1, max_size=5), st.data())
def test_render_then_match_recovers_values(literals, data):
    # Build a segmented template alternating literal segments and placeholders.
    names = [f"v{i}" for i in range(len(literals))]
    text = "/" + "/".join(f"{lit}/{{{name}}}" for lit, name in zip(literals, names,
                                                                    strict=True))
    template = Template.parse(text)
    values = {name: data.draw(segment) for name in names}
    assert template.match(template.expand(values)) == values


@given(st.text(max_size=40))
def test_parse_never_raises_anything_but_template_error(text):
    with contextlib.suppress(TemplateError):
        Template.parse(text)


@pytest.mark.parametrize(("bad", "says"), [
    ("a{b{c}", "unbalanced brace"),  # a stray brace before a placeholder, not only after
    ("a}b{c}", "unbalanced brace"),
    ("{c}x{", "unbalanced brace"),
    ("/a/{}", "empty placeholder"),
    ("{a:3}", "level 2-4"),
    ("{a,b}", "level 2-4"),
    ("{a*}", "level 2-4"),
    ("{+a}", "level 2-4"),
    ("{a-b}", "not a symbol"),
])
def test_refusals_say_why(bad, says):
    with pytest.raises(TemplateError, match=says):
        Template.parse(bad)


def test_an_empty_value_is_unbound():
    with pytest.raises(KeyError):
        Template.parse("/a/{x}").expand({"x": ""})
