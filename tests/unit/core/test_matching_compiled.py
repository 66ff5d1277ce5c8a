"""`gateway.matching.compiled`: one definition compiled into checks. How a declaration
becomes a check (constant, template, presence, type), what a check accepts and captures,
how it phrases the first failure for `explain`, and which checks a definition keeps."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.definitions.model import Property
from gateway.matching.compiled import (
    TIME_SENTINEL,
    Check,
    CompiledDefinition,
    Failure,
    compile_definition,
    search,
)
from gateway.matching.values import reader_for
from gateway.record import NativeMessage

from .defs import define, opt, prop


def check(value: Any = None, *, type: str = "string", required: bool = False,
          has_value: bool | None = None, **kw: Any) -> Check:
    return Check("f", prop(value, type=type, required=required, has_value=has_value),
                 None, **kw)


# -- what a declaration compiles to -----------------------------------------------------------
def test_a_constant_declaration() -> None:
    c = check("orders")
    assert (c.has_constant, c.constant, c.template) == (True, "orders", None)
    assert c.literal_weight == 7  # its text, plus one: a constant beats a template
    assert (c.declared, c.check_type, c.constrains, c.required) == ("string", False, True,
                                                                    False)
    assert c.expected() == "orders"


@pytest.mark.parametrize(("value", "weight"), [(5, 2), (True, 5), (1.5, 4), ("", 1)])
def test_the_weight_of_a_constant_is_its_text_plus_one(value: Any, weight: int) -> None:
    assert check(value, type="any", has_value=True).literal_weight == weight


def test_a_template_declaration() -> None:
    c = check("a/{x}/bc", type="uritemplate")
    assert c.template is not None and c.template.text == "a/{x}/bc"
    assert (c.has_constant, c.constant) == (False, None)
    assert c.literal_weight == 5  # the literal characters `a/` and `/bc`
    assert c.constrains and c.expected() == "a/{x}/bc"
    assert not c.check_type
    assert c.template.separator == "/"
    assert check("a.{x}", separator=".").template.separator == "."  # type: ignore[union-attr]


@pytest.mark.parametrize("declared", ["string", "uritemplate", "uri", "symbol", "any", ""])
def test_braces_make_a_template_in_string_like_declarations(declared: str) -> None:
    c = Check("f", Property(type=declared, value="{x}", has_value=True), None)
    assert c.template is not None and not c.has_constant
    assert c.declared == (declared or "string")


@pytest.mark.parametrize(("value", "declared"), [
    ("{x}", "integer"),  # not a string-like declaration: compared literally
    ("a{", "string"), ("{x", "string"), ("{+x}", "string"), ("{}", "string"),  # invalid
    ("plain", "string"),
])
def test_other_values_are_constants(value: str, declared: str) -> None:
    c = check(value, type=declared)
    assert c.template is None and c.has_constant and c.constant == value
    assert c.literal_weight == len(value) + 1
    assert c.expected() == value


def test_presence_and_type_declarations() -> None:
    required = check(required=True)
    assert required.constrains and not required.has_constant and required.template is None
    assert required.expected() == "a string value (required)"
    assert required.literal_weight == 0
    typed = check(type="integer")
    assert not typed.constrains and typed.check_type
    assert typed.expected() == "a integer value"
    assert check(type="integer", required=True).expected() == "a integer value (required)"
    assert not check().constrains and not check().check_type
    assert check(type="uritemplate").check_type is False  # string-like: any value conforms
    # uri (absolute URI) and symbol (alphanumerics, underscore) constrain their text
    assert check(type="uri").check_type and check(type="symbol").check_type


def test_the_template_matcher_is_bound_once() -> None:
    c = check("a/{x}", type="uritemplate")
    assert c.match_fn is None  # built on first use only
    first = c.matcher()
    assert c.matcher() is first and c.match_fn is first
    assert first("a/1") == {"x": "1"}
    assert first("a/1/2") is None


# -- what a check accepts ----------------------------------------------------------------------
def apply(c: Check, values: list[Any], context: dict[str, str] | None = None
          ) -> tuple[str | None, dict[str, str]]:
    context = {} if context is None else context
    failure = c.apply(values, context)
    return (None if failure is None else str(failure)), context


@pytest.mark.parametrize(("c", "values", "failure"), [
    # nothing there
    (check("x"), [], "f: expected x, got nothing (field absent)"),
    (check("{x}"), [], "f: expected {x}, got nothing (field absent)"),
    (check(required=True), [], "f: expected a string value (required), got nothing (field absent)"),
    (check(), [], None),
    (check(type="integer"), [], None),
    # constants: any value of a repeated field may carry it; the last one is shown
    (check("x"), ["x"], None),
    (check("x"), ["y", "x"], None),
    (check("x"), ["y", "z"], "f: expected x, got z"),
    (check("1", type="integer"), [1], None),
    (check(1, type="integer"), ["1"], None),
    (check(True, type="boolean"), ["true"], None),
    (check(1, type="integer"), [2], "f: expected 1, got 2"),
    (check("x"), [None], "f: expected x, got None"),
    (check("x"), [["x"]], "f: expected x, got ['x']"),
    (check(5, type="integer"), ["x", "5"], None),
    (check(5, type="integer"), ["5x"], "f: expected 5, got 5x"),
    (check(5, type="integer"), [True], "f: expected 5, got True"),
    # templates
    (check("a/{x}"), ["b/1", "a/1"], None),
    (check("a/{x}"), ["a/1/2"], "f: expected a/{x}, got a/1/2"),
    (check("a/{x}"), ["a/"], "f: expected a/{x}, got a/"),
    (check("{x}"), [12], None),
    (check("{x}"), [""], "f: expected {x}, got "),
    (check("{x}", type="uri"), ["http://x"], None),
    (check("p-{x}"), [7, "q-1"], "f: expected p-{x}, got q-1"),
    # presence and types
    (check(required=True), [""], None),
    (check(required=True), [None], None),
    (check(type="integer"), ["x", 3], None),
    (check(type="integer"), ["x"], "f: expected a value of type integer, got x"),
    (check(type="integer"), ["x", 1.5], "f: expected a value of type integer, got 1.5"),
    (check(type="integer", required=True), [False],
     "f: expected a value of type integer, got False"),
    (check(type="boolean"), ["yes", "true"], None),
])
def test_apply(c: Check, values: list[Any], failure: str | None) -> None:
    assert apply(c, values)[0] == failure


def test_templates_capture_and_a_repeated_name_must_capture_the_same_value() -> None:
    c = check("{a}.{b}", separator=".")
    assert apply(c, ["x.y"]) == (None, {"a": "x", "b": "y"})
    assert apply(c, ["x.y"], {"a": "x", "z": "1"}) == (None, {"a": "x", "b": "y", "z": "1"})
    failure, context = apply(c, ["x.y"], {"b": "w"})
    assert failure == "f: expected {b} = 'w' (captured earlier), got 'y'"
    assert context["b"] == "w"
    whole = check("{n}")
    assert apply(whole, [5]) == (None, {"n": "5"})
    assert apply(whole, [True]) == (None, {"n": "true"})
    assert apply(whole, ["a.b/c"]) == (None, {"n": "a.b/c"})


def test_a_failure_names_the_first_clash() -> None:
    c = check("{a}/{b}")
    failure = c.apply(["1/2"], {"a": "9", "b": "8"})
    assert failure == Failure("f", "{a} = '9' (captured earlier)", "'1'")


def test_percent_encoded_fields_compare_and_capture_decoded() -> None:
    const = check("a b", decode=True)
    assert apply(const, ["a%20b"])[0] is None
    assert apply(const, ["a b"])[0] is None
    assert apply(check("a%20b", decode=True), ["a%20b"])[0] is None  # the raw text too
    assert apply(check("a b"), ["a%20b"])[0] == "f: expected a b, got a%20b"
    assert apply(check(5, type="integer", decode=True), ["%35"])[0] is None
    assert apply(check(5, type="integer", decode=True), [5])[0] is None
    template = check("/a/{x}", decode=True)
    assert apply(template, ["/a/b%20c"]) == (None, {"x": "b c"})
    assert apply(check("/a/{x}"), ["/a/b%20c"]) == (None, {"x": "b%20c"})
    typed = check(type="integer", decode=True)
    assert apply(typed, ["1%32"])[0] is None
    assert apply(check(type="integer"), ["1%32"])[0] == (
        "f: expected a value of type integer, got 1%32")


def test_a_repeated_field_passes_when_a_later_entry_agrees_with_the_capture() -> None:
    """A placeholder has one value: an entry that clashes with what was captured before
    does not end the search; the next entry that agrees makes the field pass."""
    template = check("/a/{x}")
    assert apply(template, ["/a/other", "/a/b"], {"x": "b"}) == (None, {"x": "b"})
    assert apply(template, ["/a/other", "/a/more"], {"x": "b"}) == (
        "f: expected {x} = 'b' (captured earlier), got 'more'", {"x": "b"})  # the last one


def test_a_search_over_repeated_fields_still_applies_the_checks_that_capture_nothing() -> None:
    """`search` (the path of definitions with repeated captures) tries each agreeing entry
    of a capturing check; a check without captures passes or fails as a whole."""
    constant, template = check("orders"), check("/a/{x}")
    assert search([(constant, ["orders"]), (template, ["/a/b"])], {}) == {"x": "b"}
    assert search([(constant, ["returns"]), (template, ["/a/b"])], {}) == Failure(
        "f", "orders", "returns")
    assert search([(template, ["/a/b"]), (constant, ["returns"])], {}) == Failure(
        "f", "orders", "returns")


def test_datacontenttype_compares_media_types_case_insensitively() -> None:
    dct = check("application/json; charset=utf-8", attribute="datacontenttype")
    assert apply(dct, ["Application/JSON;Charset=utf-8"])[0] is None
    assert apply(dct, ["application/json; charset=UTF-8"])[0] == (
        "f: expected application/json; charset=utf-8, got application/json; charset=UTF-8")
    assert apply(dct, [5])[0] == "f: expected application/json; charset=utf-8, got 5"
    other = check("application/json", attribute="subject")
    assert apply(other, ["APPLICATION/JSON"])[0] == (
        "f: expected application/json, got APPLICATION/JSON")
    assert apply(check("Application/Json", attribute="datacontenttype"),
                 ["application/json"])[0] is None
    non_text = Check("f", Property(type="any", value=1, has_value=True), None,
                     attribute="datacontenttype")
    assert apply(non_text, ["1"])[0] is None and apply(non_text, ["2"])[0] is not None


def test_failure_text() -> None:
    # what was got is text: a string as it is, anything else as its repr
    assert check(1, type="integer").apply([2], {}) == Failure("f", "1", "2")
    assert check("x").apply([None], {}) == Failure("f", "x", "None")
    assert check("x").apply(["None"], {}) == Failure("f", "x", "None")
    assert check(type="integer").apply([True], {}) == Failure(
        "f", "a value of type integer", "True")
    assert str(Failure("topic", "a/{x}", "b")) == "topic: expected a/{x}, got b"


# -- a definition's checks --------------------------------------------------------------------
def test_compile_definition_keeps_the_constraining_protocol_checks_in_order() -> None:
    # in the order written, except captures from repeated fields (a template on headers
    # or user properties), which run last: a placeholder they share with another field
    # is then compared with that field's value (issue 35 item 1)
    d = define("d", "KAFKA", [
        opt("topic", "orders"),
        opt("headers", "{kind}", name="kind"),
        opt("headers", name="ignored"),  # neither constrains nor has a type
        opt("partition", type="integer"),  # a type only: kept
        opt("key", required=True),
    ])
    compiled = compile_definition(d)
    assert compiled.definition is d and compiled.family == "KAFKA"
    assert [c.label for c in compiled.protocol_checks] == [
        "topic", "partition", "key", "headers[kind]"]
    assert compiled.envelope_checks == []
    topic, partition, key, kind = compiled.protocol_checks
    record = NativeMessage("KAFKA", {"topic": "orders", "partition": 1, "key": "k",
                                     "headers": [{"name": "kind", "value": "a"},
                                                 {"name": "Kind", "value": "b"}]})
    assert topic.reader is not None and topic.reader(record) == ["orders"]
    assert kind.reader is not None and kind.reader(record) == ["a"]
    assert partition.reader is not None and partition.reader(record) == [1]
    assert key.reader is not None and key.reader(record) == ["k"]
    assert topic.access is not None and topic.access.kind == "scalar"
    assert kind.access is not None and (kind.access.kind, kind.access.name) == ("pairs",
                                                                                 "kind")
    assert not any(c.decode for c in compiled.protocol_checks)
    assert all(c.attribute is None for c in compiled.protocol_checks)
    # literal characters: "orders" + 1; constrained fields: topic, kind, key
    assert compiled.specificity == (7, 3)
    assert compiled.specificity_ce == (7, 3)
    assert not compiled.envelope_only


def test_compile_definition_reads_the_protocol_for_decoding_and_separators() -> None:
    http = compile_definition(define("h", "HTTP", [opt("path", "/a/{x}"),
                                                   opt("query", "{q}", name="q"),
                                                   opt("method", "GET")]))
    path, query, method = http.protocol_checks
    assert (path.decode, query.decode, method.decode) == (True, True, False)
    assert query.label == "query[q]"
    nats = compile_definition(define("n", "NATS", [opt("subject", "a.{x}")]))
    [subject] = nats.protocol_checks
    assert subject.template is not None and subject.template.separator == "."
    assert subject.template.whole_value is False
    mqtt = compile_definition(define("m", "MQTT/3.1.1", [opt("topic_name", "a.{x}")]))
    assert mqtt.family == "MQTT"
    [topic] = mqtt.protocol_checks
    assert topic.template is not None and topic.template.whole_value is False
    assert topic.template.separator == "/"


def test_compile_definition_envelope_checks() -> None:
    d = define("ce", "KAFKA", [opt("topic", "t")], {
        "id": prop("1"), "specversion": prop("1.0"),  # never checked here
        "type": prop("a.{x}", type="uritemplate"),
        "source": prop(type="uri-reference"),  # a type only: any value conforms
        "subject": prop(),  # neither: dropped
        "count": prop(type="integer"),  # a type only: kept
        "time": prop(TIME_SENTINEL, type="timestamp"),  # "any time": a type check only
        "datacontenttype": prop("application/json"),
    })
    compiled = compile_definition(d)
    labels = [c.label for c in compiled.envelope_checks]
    assert labels == ["cloudevent type", "cloudevent source", "cloudevent count",
                      "cloudevent time", "cloudevent datacontenttype"]
    attributes = [c.attribute for c in compiled.envelope_checks]
    assert attributes == ["type", "source", "count", "time", "datacontenttype"]
    ce_type, source, count, time, dct = compiled.envelope_checks
    assert ce_type.template is not None and source.check_type and count.check_type
    assert not time.has_constant and time.template is None and time.check_type
    assert not time.constrains
    assert dct.has_constant and dct.reader is None
    assert compiled.specificity == (2, 1)  # topic "t" only
    assert compiled.specificity_ce == (2 + 2 + 17, 3)  # + "a." + "application/json"
    assert not compiled.envelope_only


def test_a_required_time_or_another_time_value_stays_a_constraint() -> None:
    required = compile_definition(define("r", None, None, {
        "type": prop("t"), "time": prop(TIME_SENTINEL, type="timestamp", required=True)}))
    time = required.envelope_checks[1]
    assert (time.label, time.required, time.has_constant) == ("cloudevent time", True, False)
    fixed = compile_definition(define("f", None, None, {
        "type": prop("t"), "time": prop("2024-01-01T00:00:00Z", type="timestamp")}))
    assert fixed.envelope_checks[1].constant == "2024-01-01T00:00:00Z"


def test_envelope_only_definitions() -> None:
    ce = compile_definition(define("ce", None, None, {"type": prop("t")}))
    assert ce.envelope_only and ce.family is None and ce.protocol_checks == []
    assert ce.specificity == (0, 0) and ce.specificity_ce == (2, 1)
    plain = compile_definition(define("p", None, None))
    assert not plain.envelope_only and plain.envelope_checks == []


def test_evaluate_returns_the_context_or_the_first_failure() -> None:
    compiled = compile_definition(define("d", "KAFKA", [
        opt("topic", "orders.{region}"), opt("headers", "{region}", name="r"),
        opt("key", "k1")], {"type": prop("order.{kind}"), "source": prop("{region}")}))
    record = NativeMessage("KAFKA", {"topic": "orders.eu", "key": "k1",
                                     "headers": [{"name": "r", "value": "eu"}]})
    assert compiled.evaluate(record, None) == {"region": "eu"}
    event = {"type": "order.new", "source": "eu"}
    assert compiled.evaluate(record, event) == {"region": "eu", "kind": "new"}
    assert str(compiled.evaluate(record, {"type": "order.new", "source": "us"})) == (
        "cloudevent source: expected {region} = 'eu' (captured earlier), got 'us'")
    assert str(compiled.evaluate(record, {"source": "eu"})) == (
        "cloudevent type: expected order.{kind}, got nothing (field absent)")
    wrong_key = NativeMessage("KAFKA", dict(record.fields, key="k2"))
    assert str(compiled.evaluate(wrong_key, event)) == "key: expected k1, got k2"
    assert compiled.score(wrong_key, event) == 4
    assert compiled.score(wrong_key, None) == 2
    assert compiled.score(record, event) == 5
    assert compiled.score(NativeMessage("KAFKA", {}), {"type": "order.x"}) == 1
    # the matcher hands in what it captured from the address and skips that check
    topic = compiled.protocol_checks[0]
    other = NativeMessage("KAFKA", dict(record.fields, topic="nothing"))
    assert compiled.evaluate(other, None, {"region": "eu"}, topic) == {"region": "eu"}
    assert str(compiled.evaluate(other, None, {"region": "us"}, topic)) == (
        "headers[r]: expected {region} = 'us' (captured earlier), got 'eu'")
    assert str(compiled.evaluate(other, None)) == (
        "topic: expected orders.{region}, got nothing")


def test_a_definition_no_matcher_has_indexed_has_no_native_test() -> None:
    compiled = CompiledDefinition(define("d", "KAFKA"), "KAFKA")
    with pytest.raises(AssertionError) as raised:
        compiled.native_test(NativeMessage("KAFKA", {}), None)
    assert str(raised.value) == "native_test of a definition no Matcher has indexed"


def test_checks_read_the_records_of_their_protocol() -> None:
    read = reader_for("KAFKA", "topic", None)
    c = Check("topic", Property(value="t", has_value=True), read)
    assert c.reader is read and c.label == "topic"
