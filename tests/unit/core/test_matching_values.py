"""`gateway.matching.values`: how a declared type accepts a value, how a constant compares,
and how a definition's constraint reads the values of a record (scalar fields, sections,
{name, value} lists, HTTP query parameters) and its address."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.matching.values import (
    ADDRESS_FIELD,
    address_of,
    conforms,
    reader_for,
    same_value,
)
from gateway.protocols.accessors import ACCESSORS
from gateway.record import NativeMessage


@pytest.mark.parametrize(("value", "declared", "expected"), [
    # string-like declarations accept anything present
    *[(v, t, True) for t in ("string", "uritemplate", "any", "binary", "")
      for v in ("x", 1, None, [1], {"a": 1}, True)],
    # symbol: alphanumerics and underscore (rc2 Property Definitions)
    ("a_B9", "symbol", True), ("", "symbol", True), ("a-b", "symbol", False),
    ("a b", "symbol", False), ("prüf", "symbol", False), (1, "symbol", False),
    (None, "symbol", False), ("a\n", "symbol", False),
    # integer: 32-bit signed (CloudEvents Integer); uint32: unsigned protocol fields
    (2147483647, "integer", True), ("-2147483648", "integer", True),
    (2147483648, "integer", False), ("-2147483649", "integer", False),
    (4294967295, "uint32", True), ("4294967295", "uint32", True),
    (4294967296, "uint32", False), (-1, "uint32", False), ("x", "uint32", False),
    # ASCII digits only, as Java (the Spark job) reads them
    ("\u0663", "integer", False), ("\u0663", "number", False), ("1\n", "number", False),
    # integer
    (1, "integer", True), (-7, "integer", True), (0, "integer", True),
    ("12", "integer", True), ("-12", "integer", True),
    (True, "integer", False), (False, "integer", False), (1.5, "integer", False),
    ("1.5", "integer", False), ("12a", "integer", False), ("a12", "integer", False),
    ("", "integer", False), ("-", "integer", False), ("12\n", "integer", False),
    (None, "integer", False), ([1], "integer", False), ("+1", "integer", False),
    # number
    (1, "number", True), (1.5, "number", True), (-2, "number", True),
    ("1", "number", True), ("-1.25", "number", True), ("1e5", "number", True),
    ("1.5E-3", "number", True), ("2e+7", "number", True),
    (True, "number", False), (False, "number", False), ("1.", "number", False),
    (".5", "number", False), ("1e", "number", False), ("abc", "number", False),
    ("1.5x", "number", False), (None, "number", False), ("", "number", False),
    # boolean
    (True, "boolean", True), (False, "boolean", True), ("true", "boolean", True),
    ("false", "boolean", True), ("True", "boolean", False), (1, "boolean", False),
    (0, "boolean", False), ("yes", "boolean", False), (None, "boolean", False),
    # uri: an absolute URI (RFC 3986); urireference: also relative references
    ("http://x", "uri", True), ("urn:a", "uri", True), ("a+b.c-d:x", "uri", True),
    ("A1:x", "uri", True), ("/path", "uri", False), ("1a:x", "uri", False),
    ("", "uri", False), (5, "uri", False), ("noscheme", "uri", False),
    ("http:not a uri", "uri", False), ("not a uri", "uri", False),
    ("/path", "urireference", True), ("a/b?c#d", "urireference", True),
    ("not a uri", "urireference", False), (5, "urireference", False),
    # timestamps (RFC 3339)
    ("2024-01-02T03:04:05Z", "timestamp", True),
    ("2024-01-02t03:04:05z", "timestamp", True),
    ("2024-01-02T03:04:05.123+01:00", "timestamp", True),
    ("2024-01-02T03:04:05-05:30", "datetime", True),
    ("2024-01-02 03:04:05Z", "timestamp", False),
    ("2024-01-02T03:04:05", "timestamp", False),
    ("2024-01-02T03:04:05Zjunk", "timestamp", False),
    ("2024-01-02T03:04:05.Z", "timestamp", False),
    (20240102, "timestamp", False), (None, "datetime", False),
    # duration
    ("PT1S", "duration", True), ("-P1D", "duration", True), ("P", "duration", True),
    ("1S", "duration", False), ("pt1s", "duration", False), (5, "duration", False),
    # an unknown declaration accepts anything
    ("x", "map", True), (5, "whatever", True),
])
def test_conforms(value: Any, declared: str, expected: bool) -> None:
    assert conforms(value, declared) is expected


@pytest.mark.parametrize(("actual", "expected", "same"), [
    ("a", "a", True), (1, 1, True), (True, True, True), (None, None, True),
    ("1", 1, True), (1, "1", True), ("true", True, True), (True, "true", True),
    (1.5, "1.5", True), ({"a": 1}, {"a": 1}, True),
    # equal values of one type are the same even when their text differs
    ({"a": 1}, {"a": 1.0}, True), ([1.0], [1], True), (1, 1.0, False),
    ("a", "b", False), (1, 2, False), ("1", 2, False), (True, 1, False), (1, True, False),
    ("True", True, False), ("", None, True), (0, False, False), ("null", None, False),
])
def test_same_value_compares_equal_values_or_equal_text(actual: Any, expected: Any,
                                                        same: bool) -> None:
    assert same_value(actual, expected) is same


def test_scalar_reader_reads_one_field_or_nothing() -> None:
    read = reader_for("KAFKA", "partition", None)
    assert read(NativeMessage("KAFKA", {"partition": 3})) == [3]
    assert read(NativeMessage("KAFKA", {"partition": None})) == [None]
    assert read(NativeMessage("KAFKA", {"topic": "t"})) == []


def test_pairs_reader_reads_every_entry_of_the_name_in_order() -> None:
    headers = [{"name": "k", "value": "1"}, {"name": "K", "value": "2"}, "junk",
               {"name": 5, "value": "3"}, {"name": "k", "value": 4}, {"name": "k"},
               {"name": "j", "value": "5"}]
    kafka = reader_for("KAFKA", "headers", "k")  # names compared exactly
    assert kafka(NativeMessage("KAFKA", {"headers": headers})) == ["1", 4, None]
    assert kafka(NativeMessage("KAFKA", {"headers": {"k": "1"}})) == []
    assert kafka(NativeMessage("KAFKA", {})) == []
    assert reader_for("KAFKA", "headers", "K")(
        NativeMessage("KAFKA", {"headers": headers})) == ["2"]
    http = reader_for("HTTP", "headers", "K")  # HTTP header names ignore case
    assert http(NativeMessage("HTTP", {"headers": headers})) == ["1", "2", 4, None]


def test_section_reader_reads_one_member() -> None:
    read = reader_for("AMQP/1.0", "application-properties", "n")
    assert read(NativeMessage("AMQP/1.0", {"application-properties": {"n": 3}})) == [3]
    assert read(NativeMessage("AMQP/1.0", {"application-properties": {"m": 3}})) == []
    assert read(NativeMessage("AMQP/1.0", {"application-properties": [3]})) == []
    assert read(NativeMessage("AMQP/1.0", {})) == []


def test_query_reader_finds_a_parameter_by_its_decoded_name_and_keeps_the_raw_value(
        ) -> None:
    read = reader_for("HTTP", "query", "a b")
    assert read(NativeMessage("HTTP", {"query": {"a b": "x%2Fy"}})) == ["x%2Fy"]
    assert read(NativeMessage("HTTP", {"query": {"a%20b": "1", "a+b": "2"}})) == ["1"]
    assert read(NativeMessage("HTTP", {"query": {"z": "1", "a%20b": "2",
                                                 "a%20%62": "3"}})) == ["2"]
    assert read(NativeMessage("HTTP", {"query": {"ab": "1"}})) == []
    assert read(NativeMessage("HTTP", {"query": "a b=1"})) == []
    assert read(NativeMessage("HTTP", {})) == []


def test_address_field_per_family() -> None:
    assert ADDRESS_FIELD["KAFKA"] == ("topic", None)
    assert ADDRESS_FIELD["NATS"] == ("subject", None)
    assert ADDRESS_FIELD["HTTP"] == ("path", None)
    assert ADDRESS_FIELD["AMQP/1.0"] == ("properties", "subject")


@pytest.mark.parametrize(("protocol", "fields", "address"), [
    ("KAFKA", {"topic": "orders"}, "orders"),
    ("KAFKA", {"topic": 5}, None),
    ("KAFKA", {}, None),
    ("MQTT/5.0", {"topic_name": "a/b"}, "a/b"),
    ("MQTT/3.1.1", {"topic_name": "a/b"}, "a/b"),
    ("HTTP", {"path": "/a%20b"}, "/a%20b"),  # raw: split before decoding
    ("AMQP/1.0", {"properties": {"subject": "s"}}, "s"),
    ("AMQP/1.0", {"properties": {"subject": 1}}, None),
    ("AMQP/1.0", {"properties": "s"}, None),
    ("AMQP/1.0", {"properties": {"to": "s"}}, None),
    ("AMQP/1.0", {}, None),
    ("NOSUCH", {"topic": "t", "subject": "s"}, None),
])
def test_address_of(protocol: str, fields: dict[str, Any], address: str | None) -> None:
    record = NativeMessage(protocol, fields)
    assert address_of(record) == address
    assert ACCESSORS[protocol].address(fields) == address
    assert ACCESSORS[protocol] is ACCESSORS[protocol]  # compiled once, also for no protocol
