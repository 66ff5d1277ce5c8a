"""`gateway.matching.narrow`: a large index bucket split by the constant (or the literal
first segment) most of its definitions give one field, and what a record then finds."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.definitions.model import OptionConstraint, Property
from gateway.matching.compiled import CompiledDefinition, compile_definition
from gateway.matching.narrow import SMALL, Narrowed, _constant_key, _segment_key, narrowed
from gateway.record import NativeMessage

from .defs import define, opt


def bucket(*constraints: list[OptionConstraint], protocol: str = "KAFKA"
           ) -> list[CompiledDefinition]:
    return [compile_definition(define(f"d{i}", protocol, c)) for i, c in enumerate(constraints)]


def names(found: list[CompiledDefinition]) -> list[str]:
    return [c.definition.message_id for c in found]


def headers(*pairs: tuple[str, Any]) -> NativeMessage:
    return NativeMessage("KAFKA", {"topic": "t",
                                   "headers": [{"name": n, "value": v} for n, v in pairs]})


def by_header(count: int, name: str = "type") -> list[list[OptionConstraint]]:
    return [[opt("topic", "t"), opt("headers", f"v{i}", name=name)] for i in range(count)]


def test_small_buckets_stay_as_they_are() -> None:
    assert SMALL == 8
    small = bucket(*by_header(8))
    assert narrowed(small) is small
    assert all(c.narrowed_checks == () for c in small)
    assert narrowed(bucket(*by_header(9)), depth=0).__class__ is list


def test_a_large_bucket_is_split_by_a_constant() -> None:
    large = bucket(*by_header(9))
    split = narrowed(large)
    assert isinstance(split, Narrowed)
    assert list(split) == large  # still the whole bucket, in order
    assert sorted(split.by_text) == [f"v{i}" for i in range(9)]
    assert split.others == [] and split.segment is None and split.decode is False
    assert names(split.narrow(headers(("type", "v3")))) == ["d3"]
    assert split.narrow(headers(("type", "v99"))) == []
    assert split.narrow(headers()) == []
    assert names(split.narrow(headers(("type", "v1"), ("type", "v2"), ("type", "v1")))) == [
        "d1", "d2"]
    # every definition found that way passes its constant: its test leaves it out
    for compiled in large:
        assert [c.label for c in compiled.narrowed_checks] == ["headers[type]"]


def test_values_are_compared_as_text() -> None:
    large = bucket(*[[opt("topic", "t"), opt("headers", v, name="n", type="any",
                                            has_value=True)]
                     for v in [1, True, "x", 1.5, "a", "b", "c", "d", "e"]])
    split = narrowed(large)
    assert isinstance(split, Narrowed)
    assert sorted(split.by_text) == ["1", "1.5", "a", "b", "c", "d", "e", "true", "x"]
    assert names(split.narrow(headers(("n", "1")))) == ["d0"]
    assert names(split.narrow(headers(("n", 1)))) == ["d0"]
    assert names(split.narrow(headers(("n", True)))) == ["d1"]
    assert names(split.narrow(headers(("n", True), ("n", 1.5)))) == ["d1", "d3"]


def test_definitions_without_the_constant_are_always_candidates() -> None:
    large = bucket(*by_header(9), [opt("topic", "t")], [opt("topic", "t"),
                                                        opt("headers", "{x}", name="type")])
    split = narrowed(large)
    assert isinstance(split, Narrowed)
    assert names(split.others) == ["d9", "d10"]
    assert names(split.narrow(headers(("type", "v3")))) == ["d3", "d9", "d10"]
    assert names(split.narrow(headers(("type", "zz")))) == ["d9", "d10"]
    assert names(split.narrow(headers())) == ["d9", "d10"]
    assert large[9].narrowed_checks == () and large[10].narrowed_checks == ()


@pytest.mark.parametrize(("size", "repeated", "is_split"), [
    # at worst a record tests (others + the largest share of one value) definitions:
    # split when that is at most half the bucket
    (9, 4, True), (9, 5, False), (10, 5, True), (10, 6, False), (12, 6, True),
])
def test_a_split_must_at_least_halve_the_work(size: int, repeated: int, is_split: bool
                                              ) -> None:
    values = ["same"] * repeated + [f"v{i}" for i in range(size - repeated)]
    large = bucket(*[[opt("topic", "t"), opt("headers", v, name="type")] for v in values])
    assert isinstance(narrowed(large), Narrowed) is is_split


def test_without_constants_there_is_no_split() -> None:
    large = bucket(*[[opt("topic", "t"), opt("headers", "{x}", name=f"h{i}")]
                     for i in range(12)])
    assert narrowed(large) is large


def test_the_cheapest_field_is_chosen_and_the_first_of_equals() -> None:
    # the key is the same everywhere (no help); the header tells them apart
    large = bucket(*[[opt("topic", "t"), opt("key", "k"), opt("headers", f"v{i}", name="h")]
                     for i in range(9)])
    split = narrowed(large)
    assert isinstance(split, Narrowed)
    assert names(split.narrow(headers(("h", "v2")))) == ["d2"]
    # both tell them apart equally well: the first one met (the header here) is used
    both = bucket(*[[opt("topic", "t"), opt("headers", f"v{i}", name="h"),
                     opt("key", f"k{i}")] for i in range(9)])
    split = narrowed(both)
    assert isinstance(split, Narrowed)
    assert names(split.narrow(headers(("h", "v2")))) == ["d2"]  # no key in the record
    assert split.narrow(NativeMessage("KAFKA", {"key": "k2"})) == []


def test_nested_splits() -> None:
    # 90 definitions: header b has 10 values (9 definitions each), header a 9 values
    # (10 each): split by b, then each share of 9 by a
    constraints = [[opt("topic", "t"), opt("headers", f"a{i // 10}", name="a"),
                    opt("headers", f"b{i % 10}", name="b")] for i in range(90)]
    large = bucket(*constraints)
    split = narrowed(large)
    assert isinstance(split, Narrowed)
    assert sorted(split.by_text) == [f"b{i}" for i in range(10)]
    inner = split.by_text["b4"]
    assert isinstance(inner, Narrowed)
    assert sorted(inner.by_text) == [f"a{i}" for i in range(9)]
    assert names(split.narrow(headers(("a", "a1"), ("b", "b4")))) == ["d14"]
    assert names(split.narrow(headers(("a", "a1"), ("b", "b4"), ("a", "a2")))) == [
        "d14", "d24"]
    assert split.narrow(headers(("b", "b4"))) == []
    assert names(split.narrow(headers(("b", "b4"), ("b", "b5"), ("a", "a1")))) == [
        "d14", "d15"]
    assert [c.label for c in large[14].narrowed_checks] == ["headers[b]", "headers[a]"]
    assert narrowed(large, depth=1).__class__ is Narrowed
    assert narrowed(large, depth=1).by_text["b4"].__class__ is list  # type: ignore[attr-defined]


def test_others_are_split_too() -> None:
    constraints = [[opt("topic", "t"), opt("headers", f"a{i}", name="a")] for i in range(20)]
    constraints += [[opt("topic", "t"), opt("headers", f"b{i}", name="b")] for i in range(9)]
    large = bucket(*constraints)
    split = narrowed(large)
    assert isinstance(split, Narrowed)
    assert sorted(split.by_text) == sorted(f"a{i}" for i in range(20))
    assert isinstance(split.others, Narrowed)
    assert names(split.narrow(headers(("a", "a1"), ("b", "b2")))) == ["d1", "d22"]
    assert names(split.narrow(headers(("b", "b2")))) == ["d22"]
    assert names(split.narrow(headers(("a", "a9")))) == ["d9"]


def test_typed_constants_split_but_keep_their_check() -> None:
    large = bucket(*[[opt("topic", "t"), opt("partition", i, type="integer")]
                     for i in range(9)])
    split = narrowed(large)
    assert isinstance(split, Narrowed)
    assert names(split.narrow(NativeMessage("KAFKA", {"partition": 3}))) == ["d3"]
    assert names(split.narrow(NativeMessage("KAFKA", {"partition": "3"}))) == ["d3"]
    assert all(c.narrowed_checks == () for c in large)  # the type is still to check


def test_percent_encoded_constants_are_found_by_raw_or_decoded_text() -> None:
    large = bucket(*[[opt("path", "/x"), opt("query", v, name="k")]
                     for v in ["a b", "a%20b", "c", "d", "e", "f", "g", "h", "i"]],
                   protocol="HTTP")
    split = narrowed(large)
    assert isinstance(split, Narrowed) and split.decode is True
    query = lambda v: NativeMessage("HTTP", {"path": "/x", "query": {"k": v}})  # noqa: E731
    assert names(split.narrow(query("a%20b"))) == ["d1", "d0"]
    assert names(split.narrow(query("a b"))) == ["d0"]
    assert names(split.narrow(query("c"))) == ["d2"]
    assert names(split.narrow(query(5))) == []


def test_a_split_by_the_first_segment_of_templates() -> None:
    large = bucket(*[[opt("topic", "t"), opt("key", f"shop{i}/{{s}}/desk")] for i in range(9)],
                   [opt("topic", "t"), opt("key", "{x}/9/desk")])
    split = narrowed(large)
    assert isinstance(split, Narrowed) and split.segment == "/"
    assert sorted(split.by_text) == [f"shop{i}" for i in range(9)]
    assert names(split.others) == ["d9"]
    key = lambda k: NativeMessage("KAFKA", {"key": k})  # noqa: E731
    assert names(split.narrow(key("shop3/1/desk"))) == ["d3", "d9"]
    assert names(split.narrow(key("shop3"))) == ["d3", "d9"]
    assert names(split.narrow(key("shop33/1/desk"))) == ["d9"]
    assert names(split.narrow(key(b"shop3/1".decode()))) == ["d3", "d9"]
    assert all(c.narrowed_checks == () for c in large)  # the template is still to match
    only = bucket(*[[opt("topic", "t"), opt("key", f"shop{i}/{{s}}")] for i in range(9)])
    split = narrowed(only)
    assert isinstance(split, Narrowed) and split.others == []
    assert names(split.narrow(key("shop3/1"))) == ["d3"]
    assert names(split.narrow(key("shop3/1/x"))) == ["d3"]  # the first segment, not more
    assert split.narrow(key("shop99/1")) == []
    assert names(split.narrow(NativeMessage("KAFKA", {"key": 7}))) == []


@pytest.mark.parametrize(("constraint", "protocol", "keyed"), [
    (opt("key", "k"), "KAFKA", True),
    (opt("key", 5, type="integer"), "KAFKA", True),
    (opt("key", {"a": 1}, type="any"), "KAFKA", False),  # an object: no text to key on
    (opt("key", [1], type="any"), "KAFKA", False),
    (opt("key", "{x}"), "KAFKA", False),
    (opt("key", required=True), "KAFKA", False),
    (opt("query", "q", name="k"), "HTTP", True),
])
def test_constant_keys(constraint: OptionConstraint, protocol: str, keyed: bool) -> None:
    [check] = compile_definition(define("d", protocol, [constraint])).protocol_checks
    key = _constant_key(check)
    assert (key is not None) is keyed
    if keyed:
        assert key == (check.access, check.decode)


def test_constant_keys_of_envelope_checks() -> None:
    [check] = compile_definition(define("d", None, None, {
        "type": Property(value="x", has_value=True)})).envelope_checks
    assert _constant_key(check) is None and _segment_key(check) is None


@pytest.mark.parametrize(("constraint", "protocol", "keyed"), [
    (opt("key", "shop/{x}"), "KAFKA", True),
    (opt("key", "a/b/{x}"), "KAFKA", True),
    (opt("key", "shop{x}/y"), "KAFKA", False),  # a placeholder in the first segment
    (opt("key", "{x}/y"), "KAFKA", False),
    (opt("key", "shop"), "KAFKA", False),  # a constant
    (opt("query", "a/{x}", name="k"), "HTTP", False),  # percent-encoded
    (opt("headers", "a.{x}", name="h"), "NATS", None),
])
def test_segment_keys(constraint: OptionConstraint, protocol: str, keyed: bool | None
                      ) -> None:
    [check] = compile_definition(define("d", protocol, [constraint])).protocol_checks
    key = _segment_key(check)
    if keyed is None:
        assert check.template is not None
        keyed = check.template.separator in check.template.literal_prefix
    assert (key is not None) is keyed
    if keyed:
        assert check.template is not None
        assert key == (check.access, "segment", check.template.separator)


def test_object_constants_do_not_split_a_bucket() -> None:
    large = bucket(*[[opt("topic", "t"), opt("key", {"n": i}, type="any")] for i in range(9)])
    assert narrowed(large) is large
    assert all(c.narrowed_checks == () for c in large)


def test_the_first_segment_is_the_text_before_the_first_separator() -> None:
    large = bucket(*[[opt("topic", "t"), opt("key", f"a{i}/b/{{x}}")] for i in range(9)])
    split = narrowed(large)
    assert isinstance(split, Narrowed)
    assert sorted(split.by_text) == [f"a{i}" for i in range(9)]
    assert names(split.narrow(NativeMessage("KAFKA", {"key": "a4/b/c"}))) == ["d4"]


def test_two_templated_fields_are_two_candidate_splits() -> None:
    # every definition: its own first key segment, and the same header template
    large = bucket(*[[opt("topic", "t"), opt("key", f"shop{i}/{{x}}"),
                      opt("headers", "h/{y}", name="h")] for i in range(9)])
    split = narrowed(large)
    assert isinstance(split, Narrowed)
    assert sorted(split.by_text) == [f"shop{i}" for i in range(9)]
    assert split.narrow(NativeMessage("KAFKA", {"key": "h/1"})) == []


def test_splits_of_the_others_stop_three_levels_down() -> None:
    # groups told apart by headers a, b, c, d; each group large enough to split off
    sizes = {"a": 44, "b": 22, "c": 11, "d": 9}
    constraints = [[opt("topic", "t"), opt("headers", f"{field}{i}", name=field)]
                   for field, size in sizes.items() for i in range(size)]
    large = bucket(*constraints)
    split = narrowed(large)
    assert isinstance(split, Narrowed)
    assert isinstance(split.others, Narrowed)
    assert isinstance(split.others.others, Narrowed)
    last = split.others.others.others
    assert last.__class__ is list and len(last) == 9
    assert names(split.narrow(headers(("d", "d3")))) == [f"d{i}" for i in range(77, 86)]
    assert names(split.narrow(headers(("c", "c3")))) == ["d69", *[f"d{i}" for i in range(77, 86)]]
