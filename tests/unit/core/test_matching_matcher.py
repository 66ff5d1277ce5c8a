"""`gateway.matching.matcher`: which definition a record (and its CloudEvent) matches,
how the most specific one is chosen, how ties follow the policy, and how `explain` ranks
the near misses."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.matching import matcher as matcher_module
from gateway.matching.compiled import Failure
from gateway.matching.matcher import (
    Explanation,
    Matcher,
    MatchResult,
    _read_captures,
    _segment_captures,
)
from gateway.record import NativeMessage
from gateway.templates.template import Template

from .defs import define, opt, prop


def kafka(topic: Any = None, **fields: Any) -> NativeMessage:
    return NativeMessage("KAFKA", {**({} if topic is None else {"topic": topic}), **fields})


def ids(result: MatchResult) -> tuple[str | None, list[str]]:
    return (None if result.definition is None else result.definition.message_id,
            [d.message_id for d in result.tied])


# -- results ----------------------------------------------------------------------------------
def test_match_result_defaults() -> None:
    result = MatchResult("unmatched")
    assert (result.definition, dict(result.context), result.tied) == (None, {}, ())
    assert not result.matched
    assert MatchResult("matched").matched and not MatchResult("ambiguous").matched


def test_explanation_to_json() -> None:
    assert Explanation("/x", "f: expected a, got b", 2).to_json() == {
        "definition": "/x", "failure": "f: expected a, got b", "passed": 2}


def test_len_counts_every_definition() -> None:
    defs = [define("a", "KAFKA", [opt("topic", "t")]), define("b", None, None,
                                                              {"type": prop("t")}),
            define("c", None, None)]
    assert len(Matcher(defs)) == 3
    assert len(Matcher([])) == 0


# -- one match --------------------------------------------------------------------------------
def test_a_single_match_has_no_ties_and_its_captures() -> None:
    d = define("d", "KAFKA", [opt("topic", "orders.{region}"), opt("key", "{k}")])
    m = Matcher([d])
    result = m.match(kafka("orders.eu", key="k1"))
    assert result.status == "matched" and result.definition is d
    assert dict(result.context) == {"region": "eu", "k": "k1"} and result.tied == ()
    assert m.match(kafka("orders.eu")).status == "unmatched"
    assert m.match(kafka("other", key="k1")).status == "unmatched"
    assert m.match(kafka(key="k1")).status == "unmatched"
    assert m.match(kafka(5, key="k1")).status == "unmatched"


def test_records_of_a_protocol_without_definitions_match_nothing() -> None:
    m = Matcher([define("d", "KAFKA", [opt("topic", "t")])])
    assert m.match(NativeMessage("NATS", {"subject": "t"})).status == "unmatched"
    assert m.match(NativeMessage("NOSUCH", {"topic": "t"})).status == "unmatched"
    assert m.match(NativeMessage("NATS", {"subject": "t"})).status == "unmatched"  # cached
    assert m.match(kafka("t")).matched


def test_a_definition_without_an_address_constraint_takes_any_address() -> None:
    d = define("d", "KAFKA", [opt("key", "k")])
    m = Matcher([d])
    for record in (kafka("a", key="k"), kafka(None, key="k"), kafka(7, key="k"),
                   kafka("a/b/c", key="k")):
        assert m.match(record).definition is d
    assert not m.match(kafka("a", key="j")).matched


def test_amqp_records_are_addressed_by_their_subject_property() -> None:
    d = define("d", "AMQP/1.0", [opt("properties", "orders/{id}", name="subject")])
    m = Matcher([d])
    record = NativeMessage("AMQP/1.0", {"properties": {"subject": "orders/7"}})
    assert m.match(record).context == {"id": "7"}
    assert not m.match(NativeMessage("AMQP/1.0", {"properties": {"subject": "x/7"}})).matched
    assert not m.match(NativeMessage("AMQP/1.0", {"properties": {"to": "orders/7"}})).matched
    assert not m.match(NativeMessage("AMQP/1.0", {})).matched


def test_mqtt_and_http_addresses_are_split_into_segments() -> None:
    mqtt = define("m", "MQTT/5.0", [opt("topic_name", "a/{x}/{y}")])
    http = define("h", "HTTP", [opt("path", "/items/{name}/{name}")])
    m = Matcher([mqtt, http])
    assert m.match(NativeMessage("MQTT/5.0", {"topic_name": "a/1/2"})).context == {
        "x": "1", "y": "2"}
    assert m.match(NativeMessage("MQTT/3.1.1", {"topic_name": "a/1/2"})).definition is mqtt
    assert not m.match(NativeMessage("MQTT/5.0", {"topic_name": "a/1"})).matched
    assert not m.match(NativeMessage("MQTT/5.0", {"topic_name": "a//2"})).matched
    assert m.match(NativeMessage("HTTP", {"path": "/items/a%20b/a%20b"})).context == {
        "name": "a b"}
    assert not m.match(NativeMessage("HTTP", {"path": "/items/a/b"})).matched


# -- several matches --------------------------------------------------------------------------
def test_more_literal_characters_win_then_more_constrained_fields() -> None:
    wide = define("wide", "KAFKA", [opt("topic", "a.{x}")])
    narrow = define("narrow", "KAFKA", [opt("topic", "a.b")])
    header = define("header", "KAFKA", [opt("topic", "a.{x}"), opt("key", required=True)])
    m = Matcher([wide, header, narrow])
    for record, winner in ((kafka("a.b", key="k"), "narrow"), (kafka("a.c", key="k"), "header"),
                           (kafka("a.c"), "wide"), (kafka("a.b"), "narrow")):
        result = m.match(record)
        assert (result.status, ids(result)) == ("matched", (winner, []))
        event_result = m.match(record, {"type": "t"})
        assert (event_result.status, ids(event_result)) == ("matched", (winner, []))


@pytest.mark.parametrize("policy", ["first", "deadletter"])
def test_a_true_tie_follows_the_policy_in_declaration_order(policy: Any) -> None:
    one = define("one", "KAFKA", [opt("topic", "a.{x}")])
    two = define("two", "KAFKA", [opt("topic", "a.{y}")])
    lone = define("lone", "KAFKA", [opt("topic", "b.{z}")])
    m = Matcher([two, one, lone], ambiguity=policy)  # `one` is declared first
    assert m.ambiguity == policy
    result = m.match(kafka("a.1"))
    if policy == "first":
        assert result.status == "matched"
        assert ids(result) == ("one", ["one", "two"])
        assert dict(result.context) == {"x": "1"}
    else:
        assert result.status == "ambiguous"
        assert ids(result) == (None, ["one", "two"])
        assert dict(result.context) == {}
    assert ids(m.match(kafka("b.1"))) == ("lone", [])


def test_with_an_event_the_envelope_constraints_count_too() -> None:
    by_topic = define("by_topic", "KAFKA", [opt("topic", "orders")],
                      {"type": prop("{t}", type="uritemplate")})
    by_type = define("by_type", "KAFKA", [opt("topic", "{topic}")],
                     {"type": prop("com.example.order.created")})
    m = Matcher([by_topic, by_type])
    record = kafka("orders")
    event = {"specversion": "1.0", "id": "1", "type": "com.example.order.created"}
    assert ids(m.match(record, event)) == ("by_type", [])
    assert m.match(record, event).status == "matched"
    assert m.match(record, event).context == {"topic": "orders"}
    assert ids(m.match(record)) == ("by_topic", [])
    assert ids(m.match(record, {"type": "other"})) == ("by_topic", [])


@pytest.mark.parametrize("policy", ["first", "deadletter"])
def test_ties_with_an_event(policy: Any) -> None:
    a = define("a", "KAFKA", [opt("topic", "t")], {"type": prop("x.{n}")})
    b = define("b", "KAFKA", [opt("topic", "t")], {"type": prop("x.{m}")})
    result = Matcher([b, a], ambiguity=policy).match(kafka("t"), {"type": "x.1"})
    assert [d.message_id for d in result.tied] == ["a", "b"]
    assert result.status == ("matched" if policy == "first" else "ambiguous")


def test_cloudevents_definitions_are_found_by_their_type() -> None:
    sale = define("sale", None, None, {"type": prop("sale"), "source": prop("{s}")})
    prefixed = define("prefixed", None, None, {"type": prop("com.{x}")})
    untyped = define("untyped", None, None, {"source": prop("only")})
    any_type = define("any", None, None, {"type": prop("{t}"), "subject": prop("x")})
    m = Matcher([sale, any_type, prefixed, untyped])
    record = kafka("t")
    assert ids(m.match(record, {"type": "com.x"})) == ("prefixed", [])
    assert ids(m.match(record, {"type": 5, "source": "only"})) == ("untyped", [])
    assert ids(m.match(record, {"type": "sale", "source": "s1"})) == ("sale", [])
    assert ids(m.match(record, {"type": "refund", "subject": "x"})) == ("any", [])
    assert m.match(record, {"type": 5, "subject": "x"}).context == {"t": "5"}
    assert m.match(record, {"subject": "x"}).status == "unmatched"
    assert {c.definition.message_id for c in m.candidates(record, {"type": "sale"})} == {
        "sale", "any", "untyped"}
    assert {c.definition.message_id for c in m.candidates(record, {"type": 5})} == {
        "any", "untyped"}
    assert m.candidates(record) == []


def test_candidates_of_a_protocol_and_its_events() -> None:
    topic = define("topic", "KAFKA", [opt("topic", "t")])
    other = define("other", "KAFKA", [opt("topic", "u")])
    ce = define("ce", None, None, {"type": prop("e")})
    m = Matcher([topic, other, ce])
    names = lambda record, event=None, address=None: [  # noqa: E731
        c.definition.message_id for c in m.candidates(record, event, address)]
    assert names(kafka("t")) == ["topic"]
    assert names(kafka("t"), {"type": "e"}) == ["topic", "ce"]
    assert names(kafka("t"), {"type": "f"}) == ["topic"]
    assert names(kafka("t"), None, "u") == ["other"]  # the address handed in wins
    assert names(NativeMessage("NOSUCH", {"topic": "t"}), {"type": "e"}) == ["ce"]


def test_an_event_over_a_segmented_address_reads_the_captures_by_position() -> None:
    d = define("d", "MQTT/5.0", [opt("topic_name", "/s/{id}/{id}/{x}"), opt("qos", 1)],
               {"type": prop("t.{x}")})
    other = define("other", "MQTT/5.0", [opt("topic_name", "/s/{a}/{b}/{c}")],
                   {"type": prop("t.{c}")})
    m = Matcher([d, other])
    record = NativeMessage("MQTT/5.0", {"topic_name": "/s/1/1/2", "qos": 1})
    assert m.match(record, {"type": "t.2"}).context == {"id": "1", "x": "2"}
    assert m.match(record, {"type": "t.2"}).definition is d
    # `d` does not take the address (two values for {id}); `other`, after it, does
    assert m.match(NativeMessage("MQTT/5.0", {"topic_name": "/s/1/9/2", "qos": 1}),
                   {"type": "t.2"}).definition is other
    assert m.match(NativeMessage("MQTT/5.0", {"topic_name": "/s/1/1/2", "qos": 0}),
                   {"type": "t.2"}).definition is other
    m = Matcher([d])
    assert not m.match(record, {"type": "t.3"}).matched
    assert not m.match(NativeMessage("MQTT/5.0", {"topic_name": "/s/1/2/2", "qos": 1}),
                       {"type": "t.2"}).matched
    assert not m.match(NativeMessage("MQTT/5.0", {"topic_name": "/s//1/2", "qos": 1}),
                       {"type": "t.2"}).matched
    http = define("h", "HTTP", [opt("path", "/p/{a}")], {"type": prop("t")})
    result = Matcher([http]).match(NativeMessage("HTTP", {"path": "/p/a%2Fb"}),
                                   {"type": "t"})
    assert result.context == {"a": "a/b"}


# -- explain ----------------------------------------------------------------------------------
def test_explain_ranks_by_checks_passed_then_likeness_then_order() -> None:
    d1 = define("d1", "KAFKA", [opt("topic", "orders"), opt("key", "abc")])
    d2 = define("d2", "KAFKA", [opt("topic", "orders"), opt("key", "xyz")])
    d3 = define("d3", "KAFKA", [opt("topic", "other"), opt("key", "abd")])
    d4 = define("d4", "KAFKA", [opt("topic", "orders"), opt("key", "abd")])
    m = Matcher([d1, d2, d3, d4])
    hints = m.explain(kafka("orders", key="abx"))
    assert [h.definition for h in hints] == [d1.xid, d4.xid, d2.xid]
    assert [h.passed for h in hints] == [1, 1, 1]
    assert hints[0].failure == "key: expected abc, got abx"
    assert [h.definition for h in m.explain(kafka("orders", key="abx"), limit=4)] == [
        d1.xid, d4.xid, d2.xid, d3.xid]
    assert len(m.explain(kafka("orders", key="abx"), limit=1)) == 1
    # a definition the record matches is no near miss
    assert [h.definition for h in m.explain(kafka("orders", key="abc"))] == [
        d4.xid, d2.xid, d3.xid]


def test_explain_likeness_breaks_equal_scores() -> None:
    far = define("far", "KAFKA", [opt("topic", "zzzzzz")])
    near = define("near", "KAFKA", [opt("topic", "orderz")])
    hints = Matcher([far, near]).explain(kafka("orders"))
    assert [h.definition for h in hints] == [near.xid, far.xid]
    assert [h.passed for h in hints] == [0, 0]


def test_likeness_is_compared_within_the_first_of_a_large_equal_group(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Of definitions with equal scores, the first `LIKENESS_POOL` in order are ranked by
    likeness; one past them is not reached, however like the value it is."""
    monkeypatch.setattr(matcher_module, "LIKENESS_POOL", 3)
    defs = [define(f"d{n}", "KAFKA", [opt("topic", f"zzzz{n}")]) for n in range(3)]
    near = define("near", "KAFKA", [opt("topic", "orderz")])
    m = Matcher([*defs, near])
    assert [h.definition for h in m.explain(kafka("orders"), limit=2)] == [
        defs[0].xid, defs[1].xid]
    monkeypatch.setattr(matcher_module, "LIKENESS_POOL", 4)
    assert [h.definition for h in m.explain(kafka("orders"), limit=2)] == [
        near.xid, defs[0].xid]


def test_explain_examines_a_bounded_number_of_definitions(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """At most `EXPLAIN_PER_CALL` definitions, the first in catalog order."""
    monkeypatch.setattr(matcher_module, "EXPLAIN_PER_CALL", 2)
    defs = [define(f"d{n}", "KAFKA", [opt("topic", f"t{n}")]) for n in range(5)]
    near = define("near", "KAFKA", [opt("topic", "x")])
    m = Matcher([*defs, near])
    assert [h.definition for h in m.explain(kafka("x"), limit=5)] == [defs[0].xid, defs[1].xid]


def test_explain_includes_cloudevents_definitions_only_for_events() -> None:
    native = define("native", "KAFKA", [opt("topic", "t")])
    ce = define("ce", None, None, {"type": prop("sale"), "source": prop("s")})
    m = Matcher([native, ce])
    assert [h.definition for h in m.explain(kafka("u"))] == [native.xid]
    hints = m.explain(kafka("u"), {"type": "sale", "source": "x"})
    assert [(h.definition, h.passed) for h in hints] == [(ce.xid, 1), (native.xid, 0)]
    assert hints[0].failure == "cloudevent source: expected s, got x"
    assert m.explain(NativeMessage("NATS", {"subject": "t"})) == []
    assert m.explain(NativeMessage("NOSUCH", {})) == []


# -- helpers ----------------------------------------------------------------------------------
@pytest.mark.parametrize(("template", "captures"), [
    ("/a/{x}/{y}", (("x", 2), ("y", 3))),
    ("{x}/b/{x}", (("x", 0), ("x", 2))),
    ("a/b", ()),
    ("a/{x}", (("x", 1),)),
    ("{x}", None),  # no `/`: not segmented
    ("a/b{x}/c", None),  # a placeholder and literal text in one segment
    ("a/{x}b/c", None),
    ("a/{x}{y}", None),  # two placeholders in one segment
])
def test_segment_captures(template: str, captures: Any) -> None:
    assert _segment_captures(Template.parse(template)) == captures


def test_read_captures() -> None:
    positions = (("a", 1), ("b", 2), ("a", 3))
    assert _read_captures(["", "x", "y", "x"], positions, None) == {"a": "x", "b": "y"}
    assert _read_captures(["", "x", "y", "z"], positions, None) is None
    assert _read_captures(["", "x", "", "x"], positions, None) is None
    assert _read_captures(["", "", "y", ""], positions, None) is None
    assert _read_captures(["", "a%20b", "y", "a%20b"], positions, None) == {
        "a": "a%20b", "b": "y"}
    http = Matcher([define("h", "HTTP", [opt("path", "/{a}/{b}/{a}")])]).compiled[0]
    check = http.address_check
    assert check is not None and check.decode
    assert _read_captures(["", "a%20b", "y", "a b"], positions, check) == {
        "a": "a b", "b": "y"}
    assert http.address_captures == (("a", 1), ("b", 2), ("a", 3))


def test_address_checks_the_index_decides() -> None:
    m = Matcher([
        define("template", "KAFKA", [opt("topic", "a/{x}")]),
        define("constant", "KAFKA", [opt("topic", "a.b")]),
        define("typed", "KAFKA", [opt("topic", "5", type="integer")]),
        define("flat", "KAFKA", [opt("topic", "a.{x}")]),
        define("none", "KAFKA", [opt("key", "k")]),
        define("amqp", "AMQP/1.0", [opt("properties", "s/{x}", name="subject")]),
    ])
    by_id = {c.definition.message_id: c for c in m.compiled}
    template = by_id["template"]
    assert template.address_check is template.protocol_checks[0]
    assert template.address_captures == (("x", 1),) and not template.address_exact
    constant = by_id["constant"]
    assert constant.address_check is constant.protocol_checks[0]
    assert constant.address_exact and constant.address_captures is None
    for name in ("typed", "none"):
        assert by_id[name].address_check is None and not by_id[name].address_exact
    flat = by_id["flat"]
    assert flat.address_check is flat.protocol_checks[0]
    assert flat.address_captures is None and not flat.address_exact
    amqp = by_id["amqp"]
    assert amqp.address_check is amqp.protocol_checks[0]
    assert amqp.address_captures == (("x", 1),)
    assert m.match(kafka("5")).definition is by_id["typed"].definition
    assert m.match(kafka("a.b")).definition is constant.definition
    assert m.match(kafka("a/b")).context == {"x": "b"}


def test_definitions_with_the_same_constraints_share_one_test() -> None:
    defs = [define(f"d{i}", "KAFKA", [opt("topic", f"site{i}/{{dev}}"),
                                      opt("key", "{k}")]) for i in range(3)]
    defs.append(define("other", "KAFKA", [opt("topic", "site/{dev}"), opt("key", "k")]))
    m = Matcher(defs)
    tests = [c.native_test for c in m.compiled]
    assert tests[0] is tests[1] is tests[2]
    assert tests[3] is not tests[0]
    assert m.match(kafka("site1/x", key="y")).definition is defs[1]


def test_definitions_of_an_unknown_protocol_are_matched_on_their_constraints() -> None:
    d = define("d", "NOSUCH", [opt("topic", "t"), opt("key", "{k}")])
    m = Matcher([d])
    result = m.match(NativeMessage("NOSUCH", {"topic": "t", "key": "1"}))
    assert result.definition is d and result.context == {"k": "1"}
    assert not m.match(NativeMessage("NOSUCH", {"topic": "u", "key": "1"})).matched


def test_an_address_that_is_a_str_subclass_is_an_address() -> None:
    class Topic(str):
        pass

    d = define("d", "KAFKA", [opt("topic", "orders")])
    assert Matcher([d]).match(kafka(Topic("orders"))).definition is d


def test_an_address_that_is_no_text_finds_no_definition_of_an_empty_address() -> None:
    empty = define("empty", "KAFKA", [opt("topic", "")])
    m = Matcher([empty])
    assert m.match(kafka("")).definition is empty
    for record in (kafka(5), kafka(None), kafka(["x"])):
        assert m.match(record).status == "unmatched"


def _one_topic_catalog(topic: bool) -> list[Any]:
    address = [opt("topic", "all")] if topic else []
    return [define(f"t{i}", "KAFKA", [*address, opt("headers", f"type{i}", name="type")])
            for i in range(12)]


@pytest.mark.parametrize("topic", [True, False])
def test_a_large_bucket_is_narrowed_by_the_record(topic: bool) -> None:
    defs = _one_topic_catalog(topic)
    m = Matcher(defs)
    fields = {"topic": "all"} if topic else {}
    record = kafka(**fields, headers=[{"name": "type", "value": "type3"}])
    assert [c.definition for c in m.candidates(record)] == [defs[3]]
    assert m.match(record).definition is defs[3]
    miss = kafka(**fields, headers=[{"name": "type", "value": "type99"}])
    assert m.candidates(miss) == []
    assert m.match(miss).status == "unmatched"
    assert m.match(kafka(**fields)).status == "unmatched"


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.text("abz", max_size=5),
                          st.text("abz", max_size=5)), max_size=30),
       st.integers(1, 6))
def test_nearest_ranks_as_a_full_sort_within_the_likeness_pool(
        rows: list[tuple[int, str, str]], limit: int) -> None:
    """With no score group larger than `LIKENESS_POOL`, `_nearest` is the full ranking:
    score, then likeness, then definition order."""

    class Definition:
        def __init__(self, order: int) -> None:
            self.order = order

    class Compiled:
        def __init__(self, order: int) -> None:
            self.definition = Definition(order)

    scored = [(score, Compiled(n), Failure("topic", expected, got))
              for n, (score, expected, got) in enumerate(rows)]
    full = sorted(scored, key=lambda item: (-item[0], -matcher_module._likeness(item[2]),
                                            item[1].definition.order))
    assert matcher_module._nearest(list(scored), limit) == full[:limit]  # type: ignore[arg-type]
