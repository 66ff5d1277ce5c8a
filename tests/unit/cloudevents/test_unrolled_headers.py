"""The generated header writers (`bindings/unrolled.py`) write what `headers.write` writes.

For any valid event (extensions, typed values, text that needs percent-encoding) and
every binding's prefix and encoding, the unrolled writer either gives the same entries,
pairs and UTF-8 pairs, or None (and touches nothing) exactly where `headers.write`
percent-encodes a value.
"""

from __future__ import annotations

from ce_strategies import valid_events
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.cloudevents.bindings import headers, layouts, unrolled
from gateway.cloudevents.event import CloudEvent
from gateway.cloudevents.headercodec import needs_no_encoding
from gateway.cloudevents.typesystem import to_canonical

BINDINGS = [("ce-", True), ("ce_", False)]


@settings(max_examples=400, deadline=None)
@given(valid_events(), st.sampled_from(BINDINGS))
def test_an_unrolled_writer_writes_what_headers_write_writes(
        event: CloudEvent, binding: tuple[str, bool]) -> None:
    prefix, percent_encode = binding
    writers = unrolled.Unrolled(prefix, percent_encode)
    pairs: list[tuple[str, str]] = [("before", "x")]
    utf8: list[tuple[str, bytes]] = [("before", b"x")]
    written = unrolled.write(writers, event.get_attributes(), pairs, utf8)
    ref_pairs: list[tuple[str, str]] = [("before", "x")]
    ref_utf8: list[tuple[str, bytes]] = [("before", b"x")]
    reference = headers.write(event, prefix, percent_encode, ref_pairs, ref_utf8)
    texts = "".join(to_canonical(v) for n, v in event.get_attributes().items()
                    if n != "datacontenttype")
    if percent_encode and needs_no_encoding(texts) is None:
        assert written is None
        assert pairs == [("before", "x")] and utf8 == [("before", b"x")]
        return
    assert written == reference
    assert pairs == ref_pairs
    assert utf8 == ref_utf8


def test_one_layout_is_generated_once_and_serves_every_event_of_it() -> None:
    writers = unrolled.Unrolled("ce_", False)
    first = {"specversion": "1.0", "id": "1", "source": "/a", "type": "t"}
    second = {"specversion": "1.0", "id": "2", "source": "/b", "type": "t"}
    assert unrolled.write(writers, first) == [
        {"name": "ce_specversion", "value": "1.0"}, {"name": "ce_id", "value": "1"},
        {"name": "ce_source", "value": "/a"}, {"name": "ce_type", "value": "t"}]
    writer = writers.writer(tuple(first))
    assert writer is not None and writers.writer(tuple(second)) is writer
    assert unrolled.write(writers, second) == [
        {"name": "ce_specversion", "value": "1.0"}, {"name": "ce_id", "value": "2"},
        {"name": "ce_source", "value": "/b"}, {"name": "ce_type", "value": "t"}]


def test_past_the_bound_new_layouts_go_to_headers_write(monkeypatch: object) -> None:
    import pytest

    assert isinstance(monkeypatch, pytest.MonkeyPatch)
    monkeypatch.setattr(layouts, "MAX_LAYOUTS", 2)
    writers = unrolled.Unrolled("ce-", True)
    for n in range(2):
        assert unrolled.write(writers, {"specversion": "1.0", f"x{n}": "v"}) is not None
    assert unrolled.write(writers, {"specversion": "1.0", "x9": "v"}) is None
    assert unrolled.write(writers, {"specversion": "1.0", "x0": "w"}) == [
        {"name": "ce-specversion", "value": "1.0"}, {"name": "ce-x0", "value": "w"}]


def test_an_attribute_name_never_becomes_code() -> None:
    # Names are bound as values: a name that is not an identifier writes its header.
    writers = unrolled.Unrolled("ce-", True)
    odd = {"specversion": "1.0", "a'); import os; ('": "v", "datacontenttype": "x/y"}
    assert unrolled.write(writers, odd) == [
        {"name": "ce-specversion", "value": "1.0"},
        {"name": "ce-a'); import os; ('", "value": "v"}]


def test_a_single_attribute_layout() -> None:
    writers = unrolled.Unrolled("ce_", False)
    pairs: list[tuple[str, str]] = []
    utf8: list[tuple[str, bytes]] = []
    assert unrolled.write(writers, {"id": "1"}, pairs, utf8) == [{"name": "ce_id", "value": "1"}]
    assert pairs == [("ce_id", "1")] and utf8 == [("ce_id", b"1")]
    assert unrolled.write(writers, {"datacontenttype": "a/b"}, pairs, utf8) == []
