"""`Matcher(validate_schema=True)`: a true tie is broken by validating the body against
each tied definition's schema (the resolved `schema`, or an inline JSON Schema
`dataschema`); a definition whose schema cannot be checked stays a candidate."""

from __future__ import annotations

from gateway.definitions.schema_model import SchemaDocument, SchemaResolution
from gateway.matching.matcher import Matcher
from gateway.record import NativeMessage

from .defs import define, opt

NEEDS_A = {"type": "object", "required": ["a"]}
NEEDS_B = {"type": "object", "required": ["b"]}


def _inline(mid: str, schema: object, fmt: str | None = "JsonSchema/draft-07"):
    return define(mid, "NATS", [opt("subject", "s")], dataschemaformat=fmt, dataschema=schema)


def _resolved(mid: str, schema: dict[str, object]):
    document = SchemaDocument("JsonSchema/draft-07", schema, f"test:{mid}")
    return define(mid, "NATS", [opt("subject", "s")], schema=SchemaResolution(document))


def _picked(matcher: Matcher, record: NativeMessage) -> str:
    result = matcher.match(record)
    assert result.definition is not None, result
    return result.definition.message_id


def test_resolved_schema_breaks_the_tie_on_every_match_not_only_the_first():
    matcher = Matcher([_resolved("a", NEEDS_A), _resolved("b", NEEDS_B)], validate_schema=True)
    record = NativeMessage("NATS", {"subject": "s"}, data={"b": 1})
    # The second match reads the validators the first one compiled.
    assert [_picked(matcher, record) for _ in range(3)] == ["b", "b", "b"]
    assert _picked(matcher, NativeMessage("NATS", {"subject": "s"}, data={"a": 1})) == "a"


def test_inline_schema_is_checked_against_a_raw_json_payload():
    matcher = Matcher([_inline("a", NEEDS_A), _inline("b", NEEDS_B)], validate_schema=True)
    record = NativeMessage("NATS", {"subject": "s"}, payload=b'{"b": 1}')
    assert _picked(matcher, record) == "b"
    assert _picked(matcher, record) == "b"
    assert _picked(matcher, NativeMessage("NATS", {"subject": "s"},
                                          payload=b'{"a": 2}')) == "a"


def test_a_payload_that_is_not_json_fails_an_inline_json_schema():
    # `a` has a JSON Schema the body cannot satisfy (not JSON at all); `b` has no schema
    # and stays a candidate, so it wins although `a` is declared first.
    matcher = Matcher([_inline("a", NEEDS_A), _inline("b", None, fmt=None)],
                      validate_schema=True)
    for payload in (b"not json", b"\xff\xfe"):
        assert _picked(matcher, NativeMessage("NATS", {"subject": "s"},
                                              payload=payload)) == "b"


def test_an_inline_schema_of_another_format_is_not_validated_as_json_schema():
    # `a` declares an Avro schema inline: the matcher does not check it (it stays a
    # candidate), even though the body would fail it read as a JSON Schema.
    avro_a = _inline("a", {"type": "object", "required": ["zzz"]}, fmt="Avro/1.11")
    matcher = Matcher([avro_a, _inline("b", NEEDS_B)], validate_schema=True)
    result = matcher.match(NativeMessage("NATS", {"subject": "s"}, data={"b": 1}))
    assert result.definition is not None and result.definition.message_id == "a"
    assert [d.message_id for d in result.tied] == ["a", "b"]


def test_a_json_schema_format_without_an_inline_schema_stays_a_candidate():
    no_inline = _inline("a", None)  # a JSON Schema format, but no schema to check
    matcher = Matcher([no_inline, _inline("b", NEEDS_B)], validate_schema=True)
    result = matcher.match(NativeMessage("NATS", {"subject": "s"}, data={"b": 1}))
    assert result.definition is not None and result.definition.message_id == "a"
    assert [d.message_id for d in result.tied] == ["a", "b"]


def test_without_validation_the_first_declared_wins():
    matcher = Matcher([_inline("a", NEEDS_A), _inline("b", NEEDS_B)])
    result = matcher.match(NativeMessage("NATS", {"subject": "s"}, payload=b'{"b": 1}'))
    assert result.definition is not None and result.definition.message_id == "a"


def test_a_tie_with_an_event_is_broken_by_the_body_too():
    matcher = Matcher([_inline("a", NEEDS_A), _inline("b", NEEDS_B)], validate_schema=True)
    record = NativeMessage("NATS", {"subject": "s"}, data={"b": 1})
    result = matcher.match(record, {"type": "t"})
    assert result.status == "matched" and result.tied == ()
    assert result.definition is not None and result.definition.message_id == "b"
