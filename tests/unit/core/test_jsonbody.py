"""`loads_body` answers exactly as `json.loads`: the same value of the same types, or the
same class of error. orjson (the fast path) differs from it in known places; each is
pinned here, and random JSON values and random bytes are compared besides."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.json.body import loads_body, loads_text


def _typed(value: object) -> object:
    """A form in which 1 and 1.0, True and 1, or -0.0 and 0.0 differ, and nan equals nan."""
    if isinstance(value, dict):
        return ("dict", [(k, _typed(v)) for k, v in value.items()])
    if isinstance(value, list):
        return ("list", [_typed(v) for v in value])
    if isinstance(value, float):
        return ("float", "nan" if math.isnan(value) else value.hex())
    return (type(value).__name__, value)


def _answer(parse: object, body: bytes) -> object:
    try:
        return ("value", _typed(parse(body)))  # type: ignore[operator]
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        return ("error", "ValueError" if isinstance(exc, ValueError) else type(exc).__name__)


def assert_same(body: bytes) -> None:
    assert _answer(loads_body, body) == _answer(json.loads, body), body[:80]
    for text in _texts(body):
        assert _text_answer(loads_text, text) == _text_answer(json.loads, text), text[:80]


def _texts(body: bytes) -> list[str]:
    """`body` as the texts a reader of lines may hand over: decoded as UTF-8, with any
    byte that is not UTF-8 kept as a lone surrogate (surrogateescape), and as Latin-1."""
    return [body.decode("utf-8", "surrogateescape"), body.decode("latin-1")]


def _text_answer(parse: object, text: str) -> object:
    """As `_answer`, and a refused text's message and position (`NativeMessage.from_line`
    reports them)."""
    try:
        return ("value", _typed(parse(text)))  # type: ignore[operator]
    except json.JSONDecodeError as exc:
        return ("error", exc.msg, exc.pos)
    except (ValueError, RecursionError) as exc:
        return ("error", type(exc).__name__)


@pytest.mark.parametrize("body", [
    # orjson turns integers beyond 64 bits into floats; json.loads keeps them exact
    b"18446744073709551616",
    b"-9223372036854775809",
    b'{"id": 123456789012345678901234567890}',
    b"[9223372036854775807, -9223372036854775808, 18446744073709551615]",
    # orjson refuses, json.loads reads
    b"NaN", b"[Infinity, -Infinity]", b"1e400", b"-1e400", b"1.7976931348623157e309",
    b'"\\ud800"', b'{"a": "\\udfff x"}', b'"\xed\xa0\x80"', b"\xef\xbb\xbf{}",
    '{"a": 1}'.encode("utf-16"), '[1]'.encode("utf-32-le"),
    # both refuse
    b"{}x", b"", b"{", b'"\x01"', b"\xff", b"[1,]", b"{'a': 1}",
    # nesting: orjson's limit is 1,024, json.loads's the interpreter's recursion limit
    b"[" * 1100 + b"]" * 1100, b"[" * 100_000 + b"]" * 100_000, b"[" * 500 + b"]" * 500,
    # both read
    b'{"a": 1, "a": 2}', b" \t\r\n{}\n", b"-0", b"-0.0", b"1E2", b"4.9e-324",
    b"0.30000000000000004", b'"digits in text 1234567890123456789012"',
])
def test_known_differences_answer_as_json_loads(body: bytes) -> None:
    assert_same(body)


def test_a_body_over_64_bit_keeps_its_integer() -> None:
    value = loads_body(b'{"big": 18446744073709551617}')
    assert value == {"big": 18446744073709551617}
    assert isinstance(value["big"], int)


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True)
    | st.text(),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=400)
@given(_json_values, st.booleans())
def test_json_texts_answer_as_json_loads(value: object, ascii_only: bool) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only)
    try:
        body = text.encode()
    except UnicodeEncodeError:  # a lone surrogate, which only escapes can carry
        body = json.dumps(value).encode()
    assert_same(body)


@settings(max_examples=400)
@given(st.binary(max_size=64))
def test_any_bytes_answer_as_json_loads(body: bytes) -> None:
    assert_same(body)


@settings(max_examples=300)
@given(_json_values, st.binary(max_size=3), st.integers(min_value=0, max_value=200))
def test_damaged_json_answers_as_json_loads(value: object, noise: bytes, at: int) -> None:
    body = json.dumps(value).encode()
    at = min(at, len(body))
    assert_same(body[:at] + noise + body[at:])


@settings(max_examples=300)
@given(st.text(max_size=40))
def test_any_text_answers_as_json_loads(text: str) -> None:
    assert _text_answer(loads_text, text) == _text_answer(json.loads, text)


@pytest.mark.parametrize("text", ["\ufeff{}", "\ud800", '"\ud800"', '["\udfff"]', "1" * 19,
                                  '{"a": 1} x', "[1,]"])
def test_texts_orjson_reads_otherwise_answer_as_json_loads(text: str) -> None:
    assert _text_answer(loads_text, text) == _text_answer(json.loads, text)
