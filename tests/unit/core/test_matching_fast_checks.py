"""`gateway.matching.fast`: each check specialised for its kind and for where it reads
(a scalar field, the entries of a {name, value} list, anything else through its reader),
and each definition as one test function. Expected verdicts are written out per case."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.definitions.model import OptionConstraint, Property
from gateway.matching.compiled import Check, compile_definition
from gateway.matching.fast import NEXT, PASS, check_test, definition_test, value_test
from gateway.matching.matcher import Matcher
from gateway.matching.values import reader_for
from gateway.record import NativeMessage

from .defs import define, opt


def compiled_check(protocol: str, constraint: OptionConstraint) -> Check:
    [c] = compile_definition(define("d", protocol, [constraint])).protocol_checks
    return c


def verdicts(protocol: str, constraint: OptionConstraint, records: list[dict[str, Any]],
             context: dict[str, str] | None = None) -> list[tuple[bool, dict[str, str]]]:
    test = check_test(compiled_check(protocol, constraint))
    out = []
    for fields in records:
        got = dict(context or {})
        out.append((test(NativeMessage(protocol, fields), got), got))
    return out


def passes(protocol: str, constraint: OptionConstraint, records: list[dict[str, Any]],
           context: dict[str, str] | None = None) -> list[bool]:
    return [ok for ok, _ in verdicts(protocol, constraint, records, context)]


# -- constants --------------------------------------------------------------------------------
def test_a_constant_on_a_scalar_field() -> None:
    records = [{"key": "a"}, {"key": "b"}, {}, {"key": None}, {"key": ["a"]}]
    assert passes("KAFKA", opt("key", "a"), records) == [True, False, False, False, False]


@pytest.mark.parametrize(("constant", "declared", "value", "ok"), [
    (1, "integer", "1", True), (1, "integer", 1, True), (1, "integer", "x", False),
    (1, "integer", True, False), (1, "integer", "2", False),
    (True, "boolean", "true", True), (True, "boolean", True, True),
    (True, "boolean", 1, False), (True, "boolean", "True", False),
    ("1", "string", 1, True), ("true", "string", True, True), ("1", "string", 1.0, False),
    (1.5, "number", "1.5", True), (1.5, "number", 1.5, True),
    ("", "string", None, True), ("", "string", "", True),
    ({"a": 1}, "any", {"a": 1}, True), ({"a": 1}, "any", '{"a":1}', True),
    ({"a": 1}, "any", {"a": 2}, False), ([1], "any", [1], True),
    ("", "string", 5, False), ("", "string", [], False), ("", "any", False, False),
    ("abc", "integer", "abc", False),  # a constant its own type refuses matches nothing
])
def test_constants_compare_values_or_their_text(constant: Any, declared: str, value: Any,
                                                ok: bool) -> None:
    constraint = opt("key", constant, type=declared, has_value=True)
    assert passes("KAFKA", constraint, [{"key": value}]) == [ok]
    # the same rule on a {name, value} entry, and through a reader (an AMQP section)
    header = opt("headers", constant, name="h", type=declared, has_value=True)
    assert passes("KAFKA", header, [{"headers": [{"name": "h", "value": value}]}]) == [ok]
    section = opt("application-properties", constant, name="p", type=declared,
                  has_value=True)
    assert passes("AMQP/1.0", section, [{"application-properties": {"p": value}}]) == [ok]


def test_a_percent_encoded_constant_compares_decoded_or_raw() -> None:
    records = [{"query": {"k": "a%20b"}}, {"query": {"k": "a b"}}, {"query": {"k": "a+b"}},
               {"query": {"k": 5}}, {"query": {}}]
    assert passes("HTTP", opt("query", "a b", name="k"), records) == [
        True, True, False, False, False]
    assert passes("HTTP", opt("query", "a%20b", name="k"), records[:1]) == [True]
    typed = opt("query", 5, name="k", type="integer")
    assert passes("HTTP", typed, [{"query": {"k": "%35"}}, {"query": {"k": 5}},
                                  {"query": {"k": "%3X"}}]) == [True, True, False]


def test_a_media_type_constant_compares_case_insensitively() -> None:
    check = Check("f", Property(value="application/json; charset=utf-8", has_value=True),
                  reader_for("KAFKA", "key", None), attribute="datacontenttype")
    test = check_test(check)
    for value, ok in (("Application/JSON;Charset=utf-8", True), ("text/plain", False),
                      ("application/json; charset=UTF-8", False), (5, False)):
        assert test(NativeMessage("KAFKA", {"key": value}), {}) is ok
    other = Check("f", Property(value="application/json", has_value=True),
                  reader_for("KAFKA", "key", None), attribute="subject")
    assert check_test(other)(NativeMessage("KAFKA", {"key": "Application/Json"}), {}) is False
    non_text = Check("f", Property(type="any", value=1, has_value=True),
                     reader_for("KAFKA", "key", None), attribute="datacontenttype")
    assert check_test(non_text)(NativeMessage("KAFKA", {"key": "1"}), {}) is True


def test_value_verdicts() -> None:
    constant = value_test(compiled_check("KAFKA", opt("key", "a")))
    assert (constant("a", {}), constant("b", {})) == (PASS, NEXT)
    typed = value_test(compiled_check("KAFKA", opt("key", 1, type="integer")))
    assert (typed("x", {}), typed("1", {}), typed(2, {})) == (NEXT, PASS, NEXT)
    template = value_test(compiled_check("KAFKA", opt("key", "p-{x}")))
    context = {"x": "1"}
    # a value clashing with an earlier capture sends the check on to the next value
    assert (template("p-1", context), template("p-2", context), template("q", context)) == (
        PASS, NEXT, NEXT)
    whole = value_test(compiled_check("AMQP/1.0", opt("application-properties", "{x}",
                                                      name="p")))
    assert (whole("1", dict(context)), whole("2", dict(context)), whole("", {})) == (
        PASS, NEXT, NEXT)
    fresh: dict[str, str] = {}
    assert whole(7, fresh) == PASS and fresh == {"x": "7"}
    presence = value_test(compiled_check("KAFKA", opt("key", type="integer")))
    assert (presence("1", {}), presence("x", {})) == (PASS, NEXT)
    assert (PASS, NEXT) == (1, 0)


# -- templates --------------------------------------------------------------------------------
def test_a_template_on_a_scalar_field() -> None:
    constraint = opt("key", "p-{x}")
    got = verdicts("KAFKA", constraint, [{"key": "p-1"}, {"key": "q-1"}, {}, {"key": 7},
                                         {"key": "p-"}])
    assert got == [(True, {"x": "1"}), (False, {}), (False, {}), (False, {}), (False, {})]
    assert verdicts("KAFKA", opt("key", "{y}-{x}"), [{"key": "1-2"}], {"x": "2"}) == [
        (True, {"x": "2", "y": "1"})]
    assert passes("KAFKA", opt("key", "{y}-{x}"), [{"key": "1-2"}], {"x": "3"}) == [False]
    assert verdicts("KAFKA", opt("key", "{x}"), [{"key": 17}]) == [(True, {"x": "17"})]


def test_a_template_on_a_percent_encoded_field_captures_decoded_values() -> None:
    records = [{"query": {"q": "a%20b"}}, {"query": {"q": 5}}, {"query": {"q": ""}}, {}]
    assert verdicts("HTTP", opt("query", "{x}", name="q"), records) == [
        (True, {"x": "a b"}), (True, {"x": "5"}), (False, {}), (False, {})]
    assert verdicts("HTTP", opt("query", "v-{x}", name="q"),
                    [{"query": {"q": "v-%2F"}}]) == [(True, {"x": "/"})]


def test_a_lone_placeholder_on_a_scalar_field() -> None:
    records = [{"key": "k1"}, {"key": ""}, {}, {"key": 5}, {"key": None}, {"key": True}]
    assert verdicts("KAFKA", opt("key", "{k}"), records) == [
        (True, {"k": "k1"}), (False, {}), (False, {}), (True, {"k": "5"}), (False, {}),
        (True, {"k": "true"})]
    assert passes("KAFKA", opt("key", "{k}"), [{"key": "k1"}, {"key": "k2"}],
                  {"k": "k1"}) == [True, False]


def test_a_lone_placeholder_on_entries() -> None:
    constraint = opt("headers", "{v}", name="h")
    records = [
        {"headers": [{"name": "h", "value": "1"}]},
        {"headers": [{"name": "H", "value": "1"}]},  # Kafka header names are exact
        {"headers": ["junk", {"name": 5, "value": "x"}, {"name": "h", "value": ""},
                     {"name": "h"}, {"name": "h", "value": 2}]},
        {"headers": {"h": "1"}},
        {},
        {"headers": [{"name": "h", "value": "1"}, {"name": "h", "value": "2"}]},
    ]
    assert verdicts("KAFKA", constraint, records) == [
        (True, {"v": "1"}), (False, {}), (True, {"v": "2"}), (False, {}), (False, {}),
        (True, {"v": "1"})]
    # any entry agreeing with an earlier capture passes (issue 35 item 1); none: fails
    assert passes("KAFKA", constraint, records[5:], {"v": "2"}) == [True]
    assert passes("KAFKA", constraint, records[5:], {"v": "1"}) == [True]
    assert passes("KAFKA", constraint, records[5:], {"v": "3"}) == [False]
    http = opt("headers", "{v}", name="X-Kind")
    assert verdicts("HTTP", http, [{"headers": [{"name": "x-kind", "value": "a"}]},
                                   {"headers": [{"name": "X-KIND", "value": "b"}]}]) == [
        (True, {"v": "a"}), (True, {"v": "b"})]
    upper = opt("headers", "{v}", name="H")
    assert verdicts("KAFKA", upper, [{"headers": [{"name": "H", "value": "1"}]},
                                     {"headers": [{"name": "h", "value": "1"}]}]) == [
        (True, {"v": "1"}), (False, {})]


def test_a_lone_placeholder_on_a_percent_encoded_field_captures_decoded() -> None:
    assert verdicts("HTTP", opt("path", "{p}"), [{"path": "a%20b"}, {"path": ""}]) == [
        (True, {"p": "a b"}), (False, {})]


def test_a_lone_placeholder_on_a_section_member() -> None:
    constraint = opt("application-properties", "{x}", name="p")
    records = [{"application-properties": {"p": "1"}}, {"application-properties": {"p": ""}},
               {"application-properties": [{"name": "p", "value": "1"}]}, {}]
    assert verdicts("AMQP/1.0", constraint, records) == [
        (True, {"x": "1"}), (False, {}), (False, {}), (False, {})]


# -- presence and types -----------------------------------------------------------------------
def test_presence_and_type_checks() -> None:
    required = opt("key", required=True)
    assert passes("KAFKA", required, [{"key": "x"}, {"key": ""}, {}]) == [True, True, False]
    typed = opt("key", type="integer")
    assert passes("KAFKA", typed, [{"key": "1"}, {"key": "x"}, {}]) == [True, False, True]
    assert passes("KAFKA", typed, [{"key": "%31"}]) == [False]  # no decoding here
    both = opt("key", type="integer", required=True)
    assert passes("KAFKA", both, [{"key": 3}, {"key": "x"}, {}]) == [True, False, False]
    encoded = opt("query", type="integer", name="n")
    assert passes("HTTP", encoded, [{"query": {"n": "%31"}}, {"query": {"n": "x"}},
                                    {"query": {}}]) == [True, False, True]


def test_entries_try_each_value_of_the_name_in_order() -> None:
    typed = opt("headers", 1, name="n", type="integer")
    records = [
        {"headers": [{"name": "n", "value": "x"}, {"name": "n", "value": "1"}]},
        {"headers": [{"name": "n", "value": "x"}]},
        {"headers": [{"name": "m", "value": "1"}]},
        {"headers": "n=1"},
        {},
        {"headers": ["junk", {"name": None, "value": "1"}, {"name": "n", "value": 1}]},
    ]
    assert passes("KAFKA", typed, records) == [True, False, False, False, False, True]
    optional = opt("headers", type="integer", name="n")
    assert passes("KAFKA", optional, records) == [True, False, True, True, True, True]
    http = opt("headers", "1", name="N")
    assert passes("HTTP", http, [{"headers": [{"name": "n", "value": "1"}]}]) == [True]
    assert passes("HTTP", opt("headers", "1", name="n"),
                  [{"headers": [{"name": "N", "value": "1"}]}]) == [True]
    assert passes("KAFKA", opt("headers", "1", name="N"),
                  [{"headers": [{"name": "n", "value": "1"}]},
                   {"headers": [{"name": "N", "value": "1"}]}]) == [False, True]
    template = opt("headers", "p-{x}", name="n")
    got = verdicts("KAFKA", template, [
        {"headers": [{"name": "n", "value": "q"}, {"name": "n", "value": "p-1"}]},
        {"headers": [{"name": "n", "value": "p-2"}, {"name": "n", "value": "p-1"}]},
    ], {"x": "1"})
    # a clash tries the next entry of the name
    assert got == [(True, {"x": "1"}), (True, {"x": "1"})]


def test_a_check_read_through_its_reader() -> None:
    section = opt("application-properties", "p-{x}", name="p")
    records = [{"application-properties": {"p": "p-1"}}, {"application-properties": {}},
               {"application-properties": {"p": "q"}}, {}]
    assert verdicts("AMQP/1.0", section, records) == [
        (True, {"x": "1"}), (False, {}), (False, {}), (False, {})]
    optional = opt("application-properties", type="integer", name="p")
    assert passes("AMQP/1.0", optional, records) == [False, True, False, True]
    assert passes("AMQP/1.0", section, records[:1], {"x": "2"}) == [False]


# -- tests reused by equal checks ---------------------------------------------------------------
def test_equal_checks_share_a_test_and_different_ones_do_not() -> None:
    made: dict[Any, object] = {}
    one = check_test(compiled_check("KAFKA", opt("key", 1, type="any")), made)
    again = check_test(compiled_check("KAFKA", opt("key", 1, type="any")), made)
    true = check_test(compiled_check("KAFKA", opt("key", True, type="any")), made)
    assert one is again and true is not one
    record = NativeMessage("KAFKA", {"key": "1"})
    assert (one(record, {}), true(record, {})) == (True, False)
    unhashable = compiled_check("KAFKA", opt("key", {"a": 1}, type="any"))
    first = check_test(unhashable, made)
    assert check_test(unhashable, made) is not first  # such a check gets a test of its own
    assert first(NativeMessage("KAFKA", {"key": {"a": 1}}), {}) is True
    assert check_test(unhashable) is not check_test(unhashable)
    other_field = check_test(compiled_check("KAFKA", opt("partition", 1, type="any")), made)
    assert other_field is not one
    assert other_field(NativeMessage("KAFKA", {"partition": 1, "key": "x"}), {}) is True


# -- definitions ------------------------------------------------------------------------------
def _definition(protocol: str, constraints: list[OptionConstraint]) -> Any:
    [compiled] = Matcher([define("d", protocol, constraints)]).compiled
    return compiled


def test_a_definition_found_by_one_placeholder_segment() -> None:
    compiled = _definition("MQTT/5.0", [opt("topic_name", "a/{x}"), opt("qos", 1,
                                                                        type="integer")])
    test = definition_test(compiled)
    record = NativeMessage("MQTT/5.0", {"topic_name": "ignored", "qos": 1})
    assert test(record, ["a", "b"]) == {"x": "b"}
    assert test(record, ["a", ""]) is None
    assert test(NativeMessage("MQTT/5.0", {"qos": 0}), ["a", "b"]) is None
    assert compiled.native_test(record, ["a", "b"]) == {"x": "b"}


def test_a_definition_found_by_several_placeholder_segments() -> None:
    compiled = _definition("KAFKA", [opt("topic", "{a}/{b}/{a}"), opt("key", "{b}")])
    test = definition_test(compiled)
    assert test(NativeMessage("KAFKA", {"key": "2"}), ["1", "2", "1"]) == {"a": "1", "b": "2"}
    assert test(NativeMessage("KAFKA", {"key": "3"}), ["1", "2", "1"]) is None
    assert test(NativeMessage("KAFKA", {"key": "2"}), ["1", "2", "3"]) is None
    assert test(NativeMessage("KAFKA", {"key": "2"}), ["1", "", "1"]) is None
    http = _definition("HTTP", [opt("path", "/{a}")])
    assert definition_test(http)(NativeMessage("HTTP", {}), ["", "a%20b"]) == {"a": "a b"}
    two = _definition("KAFKA", [opt("topic", "{a}/{b}")])
    assert definition_test(two)(NativeMessage("KAFKA", {}), ["1", "2"]) == {"a": "1", "b": "2"}
    assert definition_test(two)(NativeMessage("KAFKA", {}), ["1", ""]) is None
    http2 = _definition("HTTP", [opt("path", "/{a}/{b}")])
    assert definition_test(http2)(NativeMessage("HTTP", {}), ["", "a%20b", "c%2F"]) == {
        "a": "a b", "b": "c/"}
    assert definition_test(http2)(NativeMessage("HTTP", {}), ["", "a", ""]) is None


def test_a_definition_found_by_its_constant_address_leaves_the_address_check_out() -> None:
    compiled = _definition("KAFKA", [opt("topic", "orders"), opt("key", "{k}")])
    assert compiled.address_exact
    test = definition_test(compiled)
    assert test(NativeMessage("KAFKA", {"topic": "other", "key": "1"}), None) == {"k": "1"}
    assert test(NativeMessage("KAFKA", {"topic": "orders"}), None) is None
    flat = _definition("KAFKA", [opt("topic", "orders.{x}")])  # found by prefix: checked
    assert definition_test(flat)(NativeMessage("KAFKA", {"topic": "orders.1"}), None) == {
        "x": "1"}
    assert definition_test(flat)(NativeMessage("KAFKA", {"topic": "ordersx1"}), None) is None


def test_the_checks_a_split_bucket_decides_are_left_out() -> None:
    defs = [define(f"t{i}", "KAFKA", [opt("topic", "all"), opt("headers", f"type{i}",
                                                                name="type"),
                                      opt("key", "{k}")])
            for i in range(12)]
    m = Matcher(defs)
    compiled = m.compiled[3]
    assert [c.label for c in compiled.narrowed_checks] == ["headers[type]"]
    record = NativeMessage("KAFKA", {"topic": "x", "key": "1"})  # no header at all
    assert compiled.native_test(record, None) == {"k": "1"}
    assert definition_test(compiled)(record, None) == {"k": "1"}


def test_definition_tests_are_shared_by_equal_definitions() -> None:
    made: dict[Any, object] = {}
    a = _definition("KAFKA", [opt("topic", "a/{x}"), opt("key", "{k}")])
    b = _definition("KAFKA", [opt("topic", "b/{x}"), opt("key", "{k}")])
    c = _definition("KAFKA", [opt("topic", "b/{y}"), opt("key", "{k}")])
    assert definition_test(a, made) is definition_test(b, made)
    assert definition_test(c, made) is not definition_test(a, made)
    assert definition_test(a) is not definition_test(a)
    record = NativeMessage("KAFKA", {"key": "1"})
    assert definition_test(c, made)(record, ["b", "2"]) == {"y": "2", "k": "1"}


def test_a_matcher_decodes_what_it_reads_from_a_percent_encoded_address() -> None:
    defs = [define("one", "HTTP", [opt("path", "/one/{a}")]),
            define("two", "HTTP", [opt("path", "/two/{a}/{b}")])]
    m = Matcher(defs)
    assert m.match(NativeMessage("HTTP", {"path": "/one/a%20b"})).context == {"a": "a b"}
    assert m.match(NativeMessage("HTTP", {"path": "/two/a%2F/%41"})).context == {
        "a": "a/", "b": "A"}
