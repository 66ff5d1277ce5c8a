"""The NATS adapter says, while it reads a message's headers, whether the message carries
a CloudEvent (`NativeMessage.event_mode`), or that only its body can tell; the binding's
`detect` then takes its word instead of reading the headers again. What it says is what
the binding's own look at the message finds, for any headers and body a sender may send."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from nats.aio.msg import Msg

from adapters.nats.record import to_record
from gateway.cloudevents.bindings import nats
from gateway.record import UNDETECTED, NativeMessage


def _record(data: bytes, headers: list[tuple[str, str]] | None) -> NativeMessage:
    """The record the adapter makes of nats-py's own message."""
    msg = Msg(None, subject="s", reply="", data=data,  # type: ignore[arg-type]
              headers=dict(headers) if headers is not None else None)
    return to_record(msg, jetstream=False)


NAMES = st.sampled_from(["content-type", "Content-Type", "ce-specversion", "Ce-SpecVersion",
                         "CE-SPECVERSION", "ce_specversion", "ce-specversio", "ce-type",
                         "x-message-id", "specversion", "ce-specversionx"])
VALUES = st.sampled_from(["application/json", "application/cloudevents+json",
                          "Application/CloudEvents-Batch+JSON; charset=utf-8", "1.0",
                          "text/plain", ""])
BODIES = st.sampled_from([b"{}", b"x", b"", b'{"specversion": "1.0", "id": "1", '
                          b'"source": "/s", "type": "t"}'])


@given(st.none() | st.lists(st.tuples(NAMES, VALUES), max_size=4), BODIES)
def test_the_adapter_says_what_the_binding_finds(headers: list[tuple[str, str]] | None,
                                                 body: bytes) -> None:
    record = _record(body, headers)
    looked = record.replace_fields(dict(record.fields))  # not marked: the binding looks
    assert looked.event_mode == UNDETECTED
    assert nats.detect(record) == nats.detect(looked)


def test_the_usual_messages_are_marked_and_only_a_bare_one_is_left_to_its_body() -> None:
    plain = _record(b"{}", [("content-type", "application/json")])
    binary = _record(b"{}", [("ce-specversion", "1.0")])
    structured = _record(b"{}", [("Content-Type", "application/cloudevents+json")])
    bare = _record(b"{}", None)
    assert (plain.event_mode, binary.event_mode, structured.event_mode, bare.event_mode) == (
        None, "binary", "structured", UNDETECTED)


FACT_NAMES = st.sampled_from(["content-type", "Content-Type", "traceparent", "TRACEPARENT",
                              "traceparentx", "ce-specversion", "x-message-id"])
FACT_VALUES = st.sampled_from(["00-" + "a" * 32 + "-" + "b" * 16 + "-01", "not-a-trace",
                               "application/json", "text/plain", ""])


@given(st.none() | st.lists(st.tuples(FACT_NAMES, FACT_VALUES), max_size=5))
def test_the_adapter_says_the_content_type_and_trace_parent_the_entries_hold(
        headers: list[tuple[str, str]] | None) -> None:
    """`header_facts` is what a look at the entries finds: the first value of each name,
    compared ignoring case (`fastrender` then skips its look)."""
    record = _record(b"{}", headers)
    assert record.header_facts == (record.header("content-type", True),
                                   record.header("traceparent", True))


@given(st.none() | st.lists(st.tuples(NAMES, VALUES), max_size=4), BODIES, st.booleans())
def test_a_record_reads_as_the_one_made_with_its_entries_up_front(
        headers: list[tuple[str, str]] | None, body: bytes, parse: bool) -> None:
    """The adapter's record makes its `headers` field when first read (`PairsRecord`),
    parsed body or not: it reads, compares and serialises as the record made with the
    field up front, with the entries after the other fields, and `head` is its fields
    without them."""
    from gateway.record import ENTRY_FIELDS

    msg = Msg(None, subject="s", reply="r.1", data=body,  # type: ignore[arg-type]
              headers=dict(headers) if headers is not None else None)
    record = to_record(msg, False, "2026-01-01T00:00:00Z", parse=parse)
    head = dict(record.head)
    assert "headers" not in head
    whole = dict(record.fields)  # made now
    assert {k: v for k, v in whole.items() if k not in ENTRY_FIELDS} == head
    entries = [{"name": n, "value": v} for n, v in (dict(headers) if headers else {}).items()]
    if entries:
        assert list(whole) == [*head, "headers"] and whole["headers"] == entries
    else:
        assert whole == head
    eager = NativeMessage.from_wire("NATS", whole, body, record.header("content-type", True),
                                    "2026-01-01T00:00:00Z")
    assert record == eager and record.to_json() == eager.to_json()
    assert record.data == eager.data and record.payload == eager.payload  # parses now
    assert dict(record.fields) == whole
