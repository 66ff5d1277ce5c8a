"""HTTP/NATS header value percent codec: the digest's section 8.4 vectors and properties."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.cloudevents.headercodec import (
    HeaderValueError,
    decode_header_value,
    encode_header_value,
)

ROUND_TRIP = [
    ("simple", "simple"),
    ("Euro € 😀", "Euro%20%E2%82%AC%20%F0%9F%98%80"),
    ("space encoded", "space%20encoded"),
    ("percent%encoded", "percent%25encoded"),
    ('quote"encoded', "quote%22encoded"),
    ("café", "caf%C3%A9"),
    ("line1\r\nline2", "line1%0D%0Aline2"),
]

DECODE_ONLY = [
    ("lenient decoding %30%31", "lenient decoding 01"),
    ('"  quoted  text  "unquoted', "  quoted  text  unquoted"),
    ('"escaped quote\\"end"', 'escaped quote"end'),
    ('"escaped backslash\\\\end"', "escaped backslash\\end"),
    ("non-escaping backslash\\end", "non-escaping backslash\\end"),
    ("Euro%20%e2%82%ac%20%f0%9F%98%80", "Euro € 😀"),
]

MUST_REJECT = [
    "%",
    "x%0",
    "%g0",
    "%0g",
    "%0$",
    "%ED%B0%80",
    "%ED%A0%80",
    "%ED%A0%80%ED%B0%80",
    "%C0%A0",
    "%E2",
    "%E2%",
    "%E2x",
    "%82",
    "%E2%E2",
    '"unterminated quote',
    '"unterminated escape \\',
]


@pytest.mark.parametrize(("decoded", "encoded"), ROUND_TRIP)
def test_round_trip_vectors(decoded: str, encoded: str) -> None:
    assert encode_header_value(decoded) == encoded
    assert decode_header_value(encoded) == decoded


@pytest.mark.parametrize(("header", "decoded"), DECODE_ONLY)
def test_decode_only_vectors(header: str, decoded: str) -> None:
    assert decode_header_value(header) == decoded


@pytest.mark.parametrize("header", MUST_REJECT)
def test_must_reject_vectors(header: str) -> None:
    with pytest.raises(HeaderValueError):
        decode_header_value(header)


def test_exactly_one_round_of_decoding() -> None:
    # A URI-typed value holding %20 must survive: senders encode the '%' again.
    assert encode_header_value("/a%20b") == "/a%2520b"
    assert decode_header_value("/a%2520b") == "/a%20b"


def test_header_value_error_is_a_value_error() -> None:
    assert issubclass(HeaderValueError, ValueError)


VALID_TEXT = st.text(st.characters(codec="utf-8"))


@given(VALID_TEXT)
def test_encode_then_decode_is_identity(text: str) -> None:
    encoded = encode_header_value(text)
    assert decode_header_value(encoded) == text


@given(VALID_TEXT)
def test_encoded_values_use_only_visible_ascii_without_quotes(text: str) -> None:
    encoded = encode_header_value(text)
    assert all("\x21" <= char <= "\x7e" and char != '"' for char in encoded)
    # Every '%' starts an upper-case escape.
    for index, char in enumerate(encoded):
        if char == "%":
            assert all(c in "0123456789ABCDEF" for c in encoded[index + 1 : index + 3])


@given(st.text())
def test_decode_raises_only_header_value_error(text: str) -> None:
    with contextlib.suppress(HeaderValueError):
        decode_header_value(text)
