"""The HTTP request -> record conversion on the server's path: `request_record` (target
already split, as the server has it) makes exactly the record `to_record` makes, and the
header-name cache that spares decoding the same names on every request stays bounded and
never changes what a name reads as."""

from __future__ import annotations

from adapters.http import record as _http_record
from adapters.http.record import request_record, split_target, to_record

HEADERS = [
    (b"Host", b"127.0.0.1:8080"),
    (b"Content-Type", b"application/json"),
    (b"Content-Encoding", b"gzip"),  # undone by the server: left out
    (b"X-Message-Id", b"r1-7"),
    (b"X-Caf\xc3\xa9", b"caf\xe9"),  # a UTF-8 name, a latin-1 value
    (b"content-type", b"text/plain"),  # the first Content-Type counts
]


def test_request_record_is_to_record_of_the_split_target() -> None:
    for target in ("/store/1042/cashierdesk/07", "/a?x=1&x=2&=&&y", "http://h/p?q=1#f", "/"):
        path, query = split_target(target)
        body = b'{"n": 1}'
        assert request_record("POST", path, query, HEADERS, body, "t") == to_record(
            "POST", target, HEADERS, body, received_at="t")


def test_header_names_and_values_as_before() -> None:
    record = to_record("POST", "/in?k=v", HEADERS, b'{"n": 1}')
    assert record.pairs("headers") == [
        ("Host", "127.0.0.1:8080"),
        ("Content-Type", "application/json"),
        ("X-Message-Id", "r1-7"),
        ("X-Café", "café"),
        ("content-type", "text/plain"),
    ]
    assert record.data == {"n": 1}  # read as JSON: the first Content-Type
    assert record.get("query") == {"k": "v"}
    assert "query" not in to_record("POST", "/in?&", HEADERS, b"").fields


def test_header_name_cache_is_bounded_and_does_not_change_names() -> None:
    invented = [(b"X-Name-%d" % i, b"v") for i in range(3 * _http_record._NAMES_MAX)]
    record = to_record("POST", "/in", invented, b"")
    assert len(_http_record._NAMES) <= _http_record._NAMES_MAX
    assert [name for name, _ in record.pairs("headers")] == [
        name.decode() for name, _ in invented]
    # A latin-1 name and its cached form read the same on every request.
    for _ in range(2):
        record = to_record("POST", "/in", [(b"X-\xff", b"1")], b"")
        assert record.pairs("headers") == [("X-\xff", "1")]

