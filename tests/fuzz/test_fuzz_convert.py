"""Fuzz: the whole conversion pipeline (`Converter.convert_all`: CloudEvents decoding in
every binding and structured/batch mode, matching, rendering) on hostile native records
of every protocol. It must never raise, and every failure must carry a reason."""

from __future__ import annotations

from fuzz_support import CATALOG, SEEDS, check_conversion, fuzz, hostile_records, nested
from hypothesis import given
from hypothesis import strategies as st

from gateway.convert import Converter
from gateway.protocols import HTTP, KAFKA
from gateway.record import NativeMessage

FIRST = Converter(CATALOG.messages())
STRICT = Converter(CATALOG.messages(), ambiguity="deadletter")


def test_seeds_convert():
    for record in SEEDS:
        for conversion in FIRST.convert_all(record):
            check_conversion(conversion)


@fuzz()
@given(hostile_records(), st.booleans())
def test_convert_all_never_raises_and_always_says_why(record, strict):
    converter = STRICT if strict else FIRST
    conversions = converter.convert_all(record)
    if record.protocol != HTTP:
        assert len(conversions) == 1
    for conversion in conversions:
        check_conversion(conversion)
    # `xrgw match --no-explain` path as well.
    for conversion in converter.convert_all(record, explain=False):
        check_conversion(conversion)


@fuzz(0.2)
@given(st.integers(min_value=1, max_value=3000))
def test_deep_json_data(depth):
    """Parsed JSON near and past the interpreter's recursion limit, as data of a
    matching record and of a structured CloudEvent."""
    for record in (
        NativeMessage(KAFKA, {"topic": "payments", "key": "acc-1", "headers": [
            {"name": "kind", "value": "authorized"}, {"name": "region", "value": "eu"}]},
            nested(depth)),
        NativeMessage(HTTP, {"method": "POST", "path": "/x", "headers": [
            {"name": "Content-Type", "value": "application/cloudevents+json"}]},
            {"specversion": "1.0", "id": "1", "source": "/s", "type": "t",
             "data": nested(depth)}),
    ):
        for conversion in FIRST.convert_all(record):
            check_conversion(conversion)
