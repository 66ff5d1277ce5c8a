"""The matcher's specialised tests (`gateway.matching.fast`) decide as `Check.apply` does.

`reference_match` is the matcher's general algorithm for a record that carries no
CloudEvent: the index's candidates, each run through `CompiledDefinition.evaluate` (the
`Check.apply` loop). Hypothesis draws catalogs of every protocol with constants, templates
(whole-value, segmented, mixed, repeated names), presence and type-only checks, and
records built from the same small alphabets, so most of them meet most definitions half
way; `Matcher.match` must give the same status, definition, context and ties.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.definitions.model import MessageDefinition, OptionConstraint
from gateway.matching.compiled import CompiledDefinition, Failure
from gateway.matching.fast import check_test, definition_test
from gateway.matching.matcher import AmbiguityPolicy, Matcher, MatchResult, _read_captures
from gateway.matching.narrow import Narrowed
from gateway.matching.values import address_of, family
from gateway.record import NativeMessage

from .defs import define, opt


def reference_match(matcher: Matcher, record: NativeMessage) -> MatchResult:
    """`Matcher.match(record)` as it was before the specialised tests (and before large
    buckets were narrowed by the record)."""
    found: list[tuple[CompiledDefinition, dict[str, str]]] = []
    segments: list[str] | None = None
    address = address_of(record)
    fam = family(record.protocol)
    index = matcher._by_family.get(fam) if fam is not None else None
    for compiled in [] if index is None else index.lookup(address):
        positions = compiled.address_captures
        if positions is not None:
            if segments is None:
                segments = (address or "").split("/")
            context = _read_captures(segments, positions, compiled.address_check)
            if context is None:
                continue
            outcome = compiled.evaluate(record, None, context, compiled.address_check)
        else:
            outcome = compiled.evaluate(record, None)
        if not isinstance(outcome, Failure):
            found.append((compiled, outcome))
    if not found:
        return MatchResult("unmatched")
    best = max(c.specificity for c, _ in found)
    tied = sorted(((c, ctx) for c, ctx in found if c.specificity == best),
                  key=lambda pair: pair[0].definition.order)
    if len(tied) == 1:
        return MatchResult("matched", tied[0][0].definition, tied[0][1])
    definitions = tuple(c.definition for c, _ in tied)
    if matcher.ambiguity == "first":
        return MatchResult("matched", tied[0][0].definition, tied[0][1], definitions)
    return MatchResult("ambiguous", None, {}, definitions)


def same(a: MatchResult, b: MatchResult) -> None:
    assert a.status == b.status
    assert a.definition is b.definition
    assert list(a.context.items()) == list(b.context.items())  # same captures, same order
    assert [d.xid for d in a.tied] == [d.xid for d in b.tied]


# -- catalogs ---------------------------------------------------------------------------------
SEGMENTS = ["a", "b", "{x}", "{y}", "{x}-{y}", "c{x}", "{x}{y}", "%2F", "a b"]
# "p-b" and "b/a" meet the field templates below ("p-{x}", "{x}/{y}") with a capture
# that disagrees with one made before.
TEXT = st.sampled_from(["a", "b", "1", "true", "", "a-b", "ca", "a%2Fb", "a b", "%", "A",
                        "p-b", "b/a", "p-a"])
CONSTANTS = st.sampled_from(["a", "b", "1", "true", 1, 2, True, "application/json"])
TYPES = st.sampled_from(["string", "uritemplate", "integer", "boolean", "number", "uri", "any"])
# protocol -> (address field, separator, entry fields: (field, names, case-insensitive))
PROTOCOLS: dict[str, tuple[str, str, list[tuple[str, list[str]]]]] = {
    "MQTT/5.0": ("topic_name", "/", [("user_properties", ["k", "K"])]),
    "KAFKA": ("topic", "/", [("headers", ["k", "K"])]),
    "NATS": ("subject", ".", [("headers", ["k", "K"])]),
    "HTTP": ("path", "/", [("headers", ["k", "K"]), ("query", ["k", "q%20"])]),
    "AMQP/1.0": ("properties", "/", [("application-properties", ["k", "K"])]),
}
SCALARS = {"MQTT/5.0": ("qos", "content_type"), "KAFKA": ("partition", "key"),
           "NATS": ("reply-to",), "HTTP": ("method",), "AMQP/1.0": ()}


@st.composite
def templates(draw: st.DrawFn, separator: str) -> str:
    parts = draw(st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=4))
    lead = draw(st.sampled_from(["", separator]))
    return lead + separator.join(parts)


@st.composite
def constraints(draw: st.DrawFn, protocol: str) -> list[OptionConstraint]:
    address, separator, entries = PROTOCOLS[protocol]
    out: list[OptionConstraint] = []
    kind = draw(st.sampled_from(["template", "constant", "none", "presence"]))
    value: Any = draw(templates(separator)) if kind == "template" else draw(TEXT)
    name = "subject" if protocol == "AMQP/1.0" else None
    if kind in ("template", "constant"):
        out.append(opt(address, value, name=name, type="uritemplate"))
    elif kind == "presence":
        out.append(opt(address, name=name, required=True))
    for _ in range(draw(st.integers(0, 3))):
        field, names = draw(st.sampled_from(entries + [(f, []) for f in SCALARS[protocol]]))
        entry = draw(st.sampled_from(names)) if names else None
        what = draw(st.sampled_from(["template", "constant", "presence", "type"]))
        typ = draw(TYPES)
        if what == "template":
            out.append(opt(field, draw(st.sampled_from(["{x}", "{y}", "{k}", "p-{x}",
                                                        "{x}/{y}"])),
                           name=entry, type="uritemplate"))
        elif what == "constant":
            out.append(opt(field, draw(CONSTANTS), name=entry, type=typ))
        elif what == "presence":
            out.append(opt(field, name=entry, type=typ, required=True))
        else:
            out.append(opt(field, name=entry, type=typ))
    return out


@st.composite
def catalogs(draw: st.DrawFn) -> tuple[str, list[MessageDefinition]]:
    protocol = draw(st.sampled_from(sorted(PROTOCOLS)))
    count = draw(st.sampled_from([1, 2, 3, 4, 6, 12, 30]))  # large buckets get narrowed
    return protocol, [define(f"d{i}", protocol, draw(constraints(protocol)))
                      for i in range(count)]


VALUES = st.one_of(TEXT, st.sampled_from([1, 2, True, None, 1.5, {"a": 1}, ["a"]]))


@st.composite
def records(draw: st.DrawFn, protocol: str) -> NativeMessage:
    address, separator, entries = PROTOCOLS[protocol]
    fields: dict[str, Any] = {}
    if draw(st.integers(0, 5)):  # mostly with an address
        parts = draw(st.lists(st.sampled_from(["a", "b", "ca", "a-b", "", "%2F", "1", "a b",
                                               "c"]), min_size=1, max_size=4))
        text = draw(st.sampled_from(["", separator])) + separator.join(parts)
        value: Any = draw(st.sampled_from([text, text, text, 7]))
        fields[address] = {"subject": value} if protocol == "AMQP/1.0" else value
    for field, names in entries:
        if not draw(st.booleans()):
            continue
        if field in ("query", "application-properties"):
            fields[field] = draw(st.dictionaries(st.sampled_from([*names, "z"]), VALUES,
                                                 max_size=3))
        else:
            fields[field] = draw(st.lists(st.fixed_dictionaries(
                {"name": st.sampled_from([*names, "z"]), "value": VALUES}), max_size=4))
    for field in SCALARS[protocol]:
        if draw(st.booleans()):
            fields[field] = draw(VALUES)
    return NativeMessage(protocol, fields)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), catalogs(), st.sampled_from(["first", "deadletter"]))
def test_specialised_match_is_the_general_match(data: st.DataObject,
                                                catalog: tuple[str, list[MessageDefinition]],
                                                policy: AmbiguityPolicy) -> None:
    protocol, definitions = catalog
    matcher = Matcher(definitions, ambiguity=policy)
    for _ in range(8):
        record = data.draw(records(protocol))
        same(matcher.match(record), reference_match(matcher, record))


@settings(max_examples=200, deadline=None)
@given(st.data(), catalogs())
def test_each_check_test_agrees_with_apply(data: st.DataObject,
                                           catalog: tuple[str, list[MessageDefinition]]
                                           ) -> None:
    protocol, definitions = catalog
    matcher = Matcher(definitions)
    record = data.draw(records(protocol))
    for compiled in matcher.compiled:
        for check in compiled.protocol_checks:
            assert check.reader is not None
            expected: dict[str, str] = {"x": "a"}
            passed = check.apply(check.reader(record), expected) is None
            got: dict[str, str] = {"x": "a"}
            assert check_test(check)(record, got) is passed
            if passed:
                assert got == expected


def test_definitions_found_by_shape_read_their_captures_by_position() -> None:
    d = define("d", "HTTP", [opt("path", "/i/{a}/{b}/{a}", type="uritemplate")])
    [compiled] = Matcher([d]).compiled
    test = definition_test(compiled)
    record = NativeMessage("HTTP", {"path": "/i/x%20y/z/x%20y"})
    assert test(record, record.fields["path"].split("/")) == {"a": "x y", "b": "z"}
    assert test(record, ["", "i", "x", "z", "y"]) is None  # same name, other value
    assert test(record, ["", "i", "", "z", ""]) is None  # a placeholder needs a value


def test_a_field_template_keeps_a_capture_made_before() -> None:
    """A Kafka key template whose capture disagrees with the topic's fails the check and
    leaves the context as it was; one that agrees passes and adds its other captures."""
    d = define("d", "KAFKA", [opt("topic", "{x}", type="uritemplate"),
                              opt("key", "{x}/{y}", type="uritemplate")])
    [compiled] = Matcher([d]).compiled
    [key_check] = [c for c in compiled.protocol_checks
                   if c.access is not None and c.access.field == "key"]
    test = check_test(key_check)
    context = {"x": "a"}
    assert test(NativeMessage("KAFKA", {"topic": "a", "key": "b/c"}), context) is False
    assert context == {"x": "a"}
    assert test(NativeMessage("KAFKA", {"topic": "a", "key": "a/c"}), context) is True
    assert context == {"x": "a", "y": "c"}
    empty: dict[str, str] = {}
    assert test(NativeMessage("KAFKA", {"key": "b/c"}), empty) is True
    assert empty == {"x": "b", "y": "c"}


@pytest.mark.parametrize("count", [1, 100, 2_000])
def test_large_catalogs_match_what_the_general_path_matches(count: int) -> None:
    from bench.bench_matcher import (
        kafka_definitions,
        kafka_messages,
        mqtt_definitions,
        mqtt_messages,
    )

    for make_definitions, make_messages in ((mqtt_definitions, mqtt_messages),
                                            (kafka_definitions, kafka_messages)):
        matcher = Matcher(make_definitions(count))
        for record in make_messages(200, count):
            result = matcher.match(record)
            assert result.matched
            same(result, reference_match(matcher, record))


def test_thousands_of_definitions_on_one_topic_are_narrowed_by_a_header() -> None:
    """One Kafka topic, told apart by a header (some by the key, a few by nothing): a
    message runs the tests of a handful of definitions, and matches as before."""
    definitions = [define(f"t{i}", "KAFKA", [opt("topic", "all"), opt("headers", f"type{i}",
                                                                          name="type")])
                   for i in range(2000)]
    definitions += [define(f"k{i}", "KAFKA", [opt("topic", "all"), opt("key", f"key{i}")])
                    for i in range(50)]
    definitions += [define("any", "KAFKA", [opt("topic", "all"), opt("headers", "{t}",
                                                                      name="type")])]
    matcher = Matcher(definitions)
    index = matcher._by_family["KAFKA"]
    for fields in ({"headers": [{"name": "type", "value": "type7"}]},
                   {"headers": [{"name": "Type", "value": "type7"},
                                {"name": "type", "value": "type1999"}]},
                   {"key": "key3"}, {"key": "key3", "headers": [{"name": "type", "value": 5}]},
                   {}, {"headers": [{"name": "type", "value": "nothing"}]}):
        record = NativeMessage("KAFKA", {"topic": "all", **fields})
        assert len(index.lookup("all", record)) <= 3
        same(matcher.match(record), reference_match(matcher, record))
    record = NativeMessage("KAFKA", {"topic": "all",
                                     "headers": [{"name": "type", "value": "type7"}]})
    assert matcher.match(record).tied == ()  # t7 is more specific than `any`
    assert matcher.match(record).definition is definitions[7]


NARROW_CONSTANTS = st.sampled_from(["a", "b", "1", 1, True, "true", 1.5, "a/b", "a b", "",
                                    None, "A"])
NARROW_VALUES = st.sampled_from(["a", "b", "1", 1, True, "true", 1.5, "a%2Fb", "a%20b",
                                 "a/b", "", None, "A", [1], {"a": 1}])


@st.composite
def one_address_catalogs(draw: st.DrawFn) -> tuple[str, list[MessageDefinition]]:
    """Many definitions on one address, told apart by constants of one or two fields:
    the bucket is split (and split again)."""
    protocol, field, names = draw(st.sampled_from([
        ("HTTP", "query", ["k", "q%20"]), ("HTTP", "headers", ["k", "K"]),
        ("KAFKA", "headers", ["k", "j"]), ("AMQP/1.0", "application-properties", ["k", "j"]),
        ("MQTT/5.0", "user_properties", ["k", "K"])]))
    address = {"HTTP": "path", "KAFKA": "topic", "AMQP/1.0": "properties",
               "MQTT/5.0": "topic_name"}[protocol]
    address_name = "subject" if protocol == "AMQP/1.0" else None
    out = []
    for i in range(draw(st.integers(9, 40))):
        options = [opt(address, "/x", name=address_name)]
        # Mostly a constant of the first entry (that is what gets the bucket split), some
        # with a second entry, a template or nothing.
        chosen = [names[0]] if draw(st.integers(0, 7)) else []
        chosen += draw(st.lists(st.sampled_from(names[1:]), max_size=1))
        for name in chosen:
            if draw(st.integers(0, 7)):
                options.append(opt(field, draw(NARROW_CONSTANTS), name=name,
                                   type=draw(st.sampled_from(["string", "integer", "any"])),
                                   has_value=True))
            else:
                options.append(opt(field, "{v}", name=name, type="uritemplate"))
        out.append(define(f"n{i}", protocol, options))
    return protocol, out


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), one_address_catalogs(), st.sampled_from(["first", "deadletter"]))
def test_narrowed_buckets_keep_every_definition_a_record_can_match(
        data: st.DataObject, catalog: tuple[str, list[MessageDefinition]],
        policy: AmbiguityPolicy) -> None:
    protocol, definitions = catalog
    matcher = Matcher(definitions, ambiguity=policy)
    address = {"HTTP": {"path": "/x"}, "KAFKA": {"topic": "/x"},
               "AMQP/1.0": {"properties": {"subject": "/x"}},
               "MQTT/5.0": {"topic_name": "/x"}}[protocol]
    for _ in range(8):
        values = data.draw(st.lists(st.tuples(st.sampled_from(["k", "K", "j", "q%20", "q "]),
                                              NARROW_VALUES), max_size=3))
        if protocol == "HTTP" and data.draw(st.booleans()):
            fields = {"query": dict(values)}
        elif protocol == "AMQP/1.0":
            fields = {"application-properties": dict(values)}
        else:
            fields = {"headers" if protocol != "MQTT/5.0" else "user_properties":
                      [{"name": k, "value": v} for k, v in values]}
        record = NativeMessage(protocol, {**address, **fields})
        same(matcher.match(record), reference_match(matcher, record))


@pytest.mark.parametrize(("constant", "value"), [
    ("a/b", "a%2Fb"),  # a percent-encoded field: compared decoded
    ("a b", "a%20b"),
    (True, True), ("true", True), (1, "1"), ("1", 1),  # values compared as text
    ("", ""),
])
def test_a_split_bucket_finds_what_the_constant_check_accepts(constant: Any,
                                                              value: Any) -> None:
    others = ["x", "y", "z", "w", "v", "u", "t", "s", "r"]
    definitions = [define(f"n{i}", "HTTP", [opt("path", "/x"),
                                            opt("query", c, name="k", has_value=True)])
                   for i, c in enumerate([constant, *others])]
    matcher = Matcher(definitions)
    assert isinstance(matcher._by_family["HTTP"].exact["/x"], Narrowed)
    result = matcher.match(NativeMessage("HTTP", {"path": "/x", "query": {"k": value}}))
    assert result.definition is definitions[0]


def test_thousands_of_key_templates_on_one_topic_are_narrowed_by_their_first_segment(
        ) -> None:
    """One Kafka topic, definitions told apart by the literal first segment of a templated
    key (`shop7/{storeid}/...`): a message runs the tests of the definitions of its key's
    first segment (and of those whose first segment is a placeholder), as before."""
    definitions = [define(f"s{i}", "KAFKA", [
        opt("topic", "all"),
        opt("key", f"shop{i}/{{storeid}}/cashierdesk/{{cdid}}", type="uritemplate")])
        for i in range(2000)]
    definitions += [define("any", "KAFKA", [opt("topic", "all"),
                                            opt("key", "{x}/9/cashierdesk/{y}",
                                                type="uritemplate")]),
                    define("joined", "KAFKA", [opt("topic", "all"),
                                               opt("key", "shop{n}/{s}", type="uritemplate")])]
    matcher = Matcher(definitions)
    index = matcher._by_family["KAFKA"]
    for key in ("shop7/1/cashierdesk/2", "shop1999/9/cashierdesk/x", "shop7", "shop7/",
                "shop77/1/cashierdesk/2", "nothing/1/cashierdesk/2", b"shop3/1/cashierdesk/2",
                "", "/shop7/1/cashierdesk/2"):
        record = NativeMessage("KAFKA", {"topic": "all", "key": key})
        assert len(index.lookup("all", record)) <= 3
        same(matcher.match(record), reference_match(matcher, record))
    record = NativeMessage("KAFKA", {"topic": "all", "key": "shop7/1/cashierdesk/2"})
    assert matcher.match(record).definition is definitions[7]
    assert matcher.match(record).context == {"storeid": "1", "cdid": "2"}


KEY_TEMPLATES = st.sampled_from(["a/{v}", "b/{v}", "a/b/{v}", "{v}/a", "a", "a/b", "ab/{v}",
                                 "a{v}/c", "a/{v}/{w}", "{v}", "/a/{v}", "a//{v}"])
KEY_VALUES = st.sampled_from(["a/x", "a", "a/", "ab/x", "a/b", "a/b/c", "b/x/y", "x/a",
                              b"a/x", 7, "", "/a/x", "a//x", "ax/c", None])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.lists(KEY_TEMPLATES, min_size=9, max_size=40),
       st.sampled_from(["first", "deadletter"]))
def test_buckets_split_by_a_first_segment_keep_every_definition_a_record_can_match(
        data: st.DataObject, templates: list[str], policy: AmbiguityPolicy) -> None:
    definitions = [define(f"k{i}", "KAFKA", [opt("topic", "t"),
                                             opt("key", t, type="uritemplate")])
                   for i, t in enumerate(templates)]
    matcher = Matcher(definitions, ambiguity=policy)
    for _ in range(8):
        key = data.draw(KEY_VALUES)
        record = NativeMessage("KAFKA", {"topic": "t", **({} if key is None else {"key": key})})
        same(matcher.match(record), reference_match(matcher, record))
