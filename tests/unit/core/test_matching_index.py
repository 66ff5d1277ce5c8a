"""`gateway.matching.index`: definitions keyed by their address (constant, `/`-segmented
template by shape, other template by literal prefix, else always a candidate), and the
candidates a key (and a record, for split buckets) finds."""

from __future__ import annotations

from typing import Any

from gateway.definitions.model import OptionConstraint
from gateway.matching.compiled import CompiledDefinition, compile_definition
from gateway.matching.index import WILD, KeyIndex, _shape_key
from gateway.matching.narrow import Narrowed
from gateway.record import NativeMessage

from .defs import define, opt


def compiled(mid: str, *constraints: OptionConstraint) -> CompiledDefinition:
    return compile_definition(define(mid, "KAFKA", list(constraints)))


def index_of(*defs: CompiledDefinition) -> KeyIndex:
    index = KeyIndex()
    for c in defs:
        key_check = next((k for k in c.protocol_checks if k.label == "topic"), None)
        index.add(c, key_check)
    return index


def names(found: Any) -> list[str]:
    return [c.definition.message_id for c in found]


def test_where_definitions_are_kept() -> None:
    index = index_of(
        compiled("exact", opt("topic", "a.b")),
        compiled("exact2", opt("topic", "a.b")),
        compiled("shape", opt("topic", "a/{x}/c")),
        compiled("shape2", opt("topic", "a/{y}/c")),
        compiled("other_shape", opt("topic", "{x}/b/c")),
        compiled("prefix", opt("topic", "a.{x}")),
        compiled("prefix2", opt("topic", "ab{x}")),
        compiled("lone", opt("topic", "{x}")),
        compiled("none", opt("key", "k")),
        compiled("required", opt("topic", required=True)),
        compiled("typed", opt("topic", 5, type="integer")),
        compiled("typed_text", opt("topic", "5", type="integer")),
    )
    assert {k: names(v) for k, v in index.exact.items()} == {
        "a.b": ["exact", "exact2"], "5": ["typed_text"]}
    assert list(index.shapes) == [3]
    [first, second] = index.shapes[3]
    assert first.literal_positions == (0, 2) and second.literal_positions == (1, 2)
    assert {k: names(v) for k, v in first.buckets.items()} == {("a", "c"): ["shape",
                                                                              "shape2"]}
    assert {k: names(v) for k, v in second.buckets.items()} == {("b", "c"): ["other_shape"]}
    assert {n: {p: names(v) for p, v in b.items()} for n, b in index.prefixes.items()} == {
        2: {"a.": ["prefix"], "ab": ["prefix2"]}}
    assert names(index.rest) == ["lone", "none", "required", "typed"]
    assert names(index.all()) == ["exact", "exact2", "typed_text", "shape", "shape2",
                                  "other_shape", "prefix", "prefix2", "lone", "none",
                                  "required", "typed"]


def test_lookup_finds_every_kind_in_order() -> None:
    index = index_of(
        compiled("rest", opt("key", "k")),
        compiled("prefix", opt("topic", "ab{x}")),
        compiled("shape", opt("topic", "a/{x}")),
        compiled("exact", opt("topic", "abc")),
        compiled("short", opt("topic", "a{x}")),
    )
    assert names(index.lookup("abc")) == ["exact", "prefix", "short", "rest"]
    assert names(index.lookup("a/x")) == ["shape", "short", "rest"]
    assert names(index.lookup("abd")) == ["prefix", "short", "rest"]
    assert names(index.lookup("zzz")) == ["rest"]
    assert names(index.lookup(None)) == ["rest"]
    assert names(index.lookup_split("a/x", None)) == ["short", "rest"]
    assert names(index.lookup_split("a/x", ["a", "x"])) == ["shape", "short", "rest"]
    assert names(index.lookup_split("abc", ["a", "x"])) == ["exact", "shape", "prefix",
                                                            "short", "rest"]


def test_one_kind_alone() -> None:
    exact = index_of(compiled("e", opt("topic", "t")))
    assert names(exact.lookup("t")) == ["e"] and exact.lookup("u") == []
    assert exact.lookup(None) == []
    shaped = index_of(compiled("s", opt("topic", "x/{a}")), compiled("s2", opt("topic",
                                                                                "{a}/{b}")))
    assert names(shaped.lookup("x/1")) == ["s", "s2"]
    assert names(shaped.lookup("y/1")) == ["s2"]
    assert shaped.lookup("x/1/2") == [] and shaped.lookup("x") == []
    prefixed = index_of(compiled("p", opt("topic", "x.{a}")))
    assert names(prefixed.lookup("x.1")) == ["p"] and prefixed.lookup("y.1") == []
    assert prefixed.lookup("x") == []


def test_segments_with_placeholders_and_literals_are_wildcards() -> None:
    index = index_of(compiled("mixed", opt("topic", "a/b{x}/c")),
                     compiled("all", opt("topic", "{x}/{y}")))
    [mixed] = index.shapes[3]
    assert mixed.literal_positions == (0, 2)
    assert names(index.lookup("a/bz/c")) == ["mixed"]
    assert names(index.lookup("a/q/c")) == ["mixed"]  # the template itself then decides
    [every] = index.shapes[2]
    assert every.literal_positions == () and list(every.buckets) == [()]
    assert names(index.lookup("p/q")) == ["all"]
    assert WILD == "\0"


def test_shape_keys() -> None:
    segments = ["a", "b", "c"]
    assert _shape_key(())(segments) == ()
    assert _shape_key((1,))(segments) == "b"
    assert _shape_key((0, 2))(segments) == ("a", "c")


def test_large_buckets_are_narrowed_by_the_record() -> None:
    def many(template: str | None, count: int = 9) -> list[CompiledDefinition]:
        address = [] if template is None else [opt("topic", template)]
        return [compiled(f"{template}-{i}", *address, opt("headers", f"v{i}", name="h"))
                for i in range(count)]

    index = index_of(*many("t"), *many("s/{x}"), *many("p.{x}"), *many(None))
    index.narrow_large_buckets()
    assert isinstance(index.exact["t"], Narrowed)
    assert isinstance(index.shapes[2][0].buckets["s"], Narrowed)
    assert isinstance(index.prefixes[2]["p."], Narrowed)
    assert isinstance(index.rest, Narrowed)
    record = NativeMessage("KAFKA", {"headers": [{"name": "h", "value": "v3"}]})
    assert names(index.lookup("t", record)) == ["t-3", "None-3"]
    assert names(index.lookup("s/1", record)) == ["s/{x}-3", "None-3"]
    assert names(index.lookup("p.1", record)) == ["p.{x}-3", "None-3"]
    assert names(index.lookup(None, record)) == ["None-3"]
    assert names(index.lookup_split("s/1", ["s", "1"], record)) == ["s/{x}-3", "None-3"]
    # without a record the whole buckets are candidates
    assert len(index.lookup("t")) == 18
    assert len(index.lookup("s/1")) == 18
    assert len(index.lookup("p.1")) == 18
    assert len(index.lookup(None)) == 9
    # a small bucket stays a plain list
    small = index_of(*many("t", 3))
    small.narrow_large_buckets()
    assert small.exact["t"].__class__ is list


def test_a_narrowed_bucket_that_keeps_nothing_adds_nothing() -> None:
    index = index_of(*[compiled(f"d{i}", opt("topic", "t"), opt("headers", f"v{i}", name="h"))
                       for i in range(9)], compiled("shape", opt("topic", "{x}")))
    index.narrow_large_buckets()
    record = NativeMessage("KAFKA", {"headers": [{"name": "h", "value": "zz"}]})
    assert names(index.lookup("t", record)) == ["shape"]
