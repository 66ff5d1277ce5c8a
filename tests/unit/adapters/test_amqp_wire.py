"""The AMQP source's own reading of a message (`adapters/amqp/wire.py`) gives the record
proton's `Message.decode` gives, or declines (None) and proton decodes it.

Messages are built and encoded by proton itself (every property, header member, map of
annotations and application properties, each kind of body), and then mangled byte by
byte: whatever `decoded` accepts must be read exactly as proton reads it.
"""

from __future__ import annotations

import json
import uuid

from hypothesis import assume, given, settings
from hypothesis import strategies as st
from proton import Described, Message, symbol, timestamp, ulong

from adapters.amqp import wire
from adapters.amqp.record import to_record
from gateway.record import NativeMessage

# Now and then past 255 bytes: the 32-bit size forms (str32, vbin32).
TEXT = st.one_of(st.text(max_size=20), st.text(min_size=256, max_size=270))
BINARY = st.one_of(st.binary(max_size=12), st.binary(min_size=256, max_size=270))
ASCII = st.characters(max_codepoint=127)
SYMBOLS = st.one_of(st.text(ASCII, max_size=12),
                    st.text(ASCII, min_size=256, max_size=260)).map(symbol)
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-2**63, 2**63 - 1), TEXT,
    st.floats(allow_nan=False), BINARY, st.uuids(),
    st.integers(0, 2**40).map(timestamp), SYMBOLS,
    st.integers(0, 2**64 - 1).map(ulong))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(TEXT, inner, max_size=3)), max_leaves=8)
IDS = st.one_of(st.none(), TEXT, st.uuids(), st.binary(max_size=8),
                st.integers(0, 2**64 - 1).map(ulong))
BODIES = st.one_of(st.none(), st.binary(max_size=40), TEXT,
                   st.just(b'{"storeid": "12", "amount": 3.5}'), VALUES)


@st.composite
def messages(draw: st.DrawFn) -> Message:
    msg = Message()
    msg.id = draw(IDS)
    msg.correlation_id = draw(IDS)
    if draw(st.booleans()):
        msg.user_id = draw(st.binary(min_size=1, max_size=8))
    for name in ("address", "subject", "reply_to", "group_id", "reply_to_group_id"):
        value = draw(st.one_of(st.none(), TEXT))
        if value is not None:
            setattr(msg, name, value)
    for name in ("content_type", "content_encoding"):
        value = draw(st.one_of(st.none(), st.sampled_from(
            ["application/json", "text/plain", "application/octet-stream", "",
             "application/vnd." + "x" * 250 + "+json"])))  # the last one: a sym32
        if value is not None:
            setattr(msg, name, symbol(value))
    for name in ("expiry_time", "creation_time"):
        if draw(st.booleans()):
            setattr(msg, name, draw(st.integers(0, 2**41)) / 1000)
    if draw(st.booleans()):
        msg.group_sequence = draw(st.integers(0, 2**31 - 1))
    msg.durable = draw(st.booleans())
    msg.priority = draw(st.integers(0, 255))
    if draw(st.booleans()):
        msg.ttl = draw(st.integers(0, 2**31)) / 1000
    msg.first_acquirer = draw(st.booleans())
    msg.delivery_count = draw(st.integers(0, 2**31))
    if draw(st.booleans()):
        msg.properties = draw(st.dictionaries(TEXT, SCALARS, max_size=4))
    if draw(st.booleans()):
        msg.annotations = draw(st.dictionaries(SYMBOLS, VALUES, max_size=3))
    if draw(st.booleans()):
        msg.instructions = draw(st.dictionaries(SYMBOLS, SCALARS, max_size=2))
    body = draw(BODIES)
    if isinstance(body, bytes) and draw(st.booleans()):
        msg.inferred = True  # a data section rather than an amqp-value
    msg.body = body
    return msg


def _proton(encoded: bytes) -> NativeMessage:
    msg = Message()
    msg.decode(encoded)
    return to_record(msg)


def _same(ours: NativeMessage, theirs: NativeMessage) -> None:
    def form(record: NativeMessage) -> str:
        # Type-strict (true is not 1) and NaN-tolerant: compared as JSON text.
        return json.dumps(record.to_json(), sort_keys=True, default=repr)

    assert form(ours) == form(theirs)
    assert (ours.raw, ours.payload) == (theirs.raw, theirs.payload)


@settings(max_examples=400, deadline=None)
@given(messages())
def test_a_message_proton_encoded_reads_as_proton_reads_it(msg: Message) -> None:
    encoded = bytes(msg.encode())
    reading = wire.decoded(encoded)
    # Nothing these messages hold is on the list the docstring declines: all are read.
    assert reading is not None
    _same(to_record(reading), _proton(encoded))


def test_the_usual_message_is_read_without_proton() -> None:
    msg = Message(subject="store/12/cashierdesk/3", content_type=symbol("application/json"),
                  properties={"x-message-id": "r-1"}, durable=True,
                  annotations={symbol("x-opt-routing-key"): "k"},
                  body=b'{"amount": 12.5}', inferred=True)
    msg.creation_time = 1_700_000_000.123
    msg.id = uuid.UUID(int=7)
    encoded = bytes(msg.encode())
    reading = wire.decoded(encoded)
    assert reading is not None
    record = to_record(reading)
    _same(record, _proton(encoded))
    assert record.data == {"amount": 12.5}
    assert record.fields["properties"] == {  # type: ignore[comparison-overlap]
        "message-id": "00000000-0000-0000-0000-000000000007",
        "subject": "store/12/cashierdesk/3", "content-type": "application/json",
        "creation-time": "2023-11-14T22:13:20.123Z"}


@settings(max_examples=400, deadline=None)
@given(messages(), st.data())
def test_mangled_bytes_are_declined_or_read_as_proton_reads_them(
        msg: Message, data: st.DataObject) -> None:
    encoded = bytearray(msg.encode())
    assume(encoded)
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(encoded) - 1))
        action = data.draw(st.sampled_from(["flip", "cut", "insert"]))
        if action == "flip":
            encoded[at] = data.draw(st.integers(0, 255))
        elif action == "cut":
            del encoded[at:]
            if not encoded:
                return
        else:
            encoded[at:at] = bytes([data.draw(st.integers(0, 255))])
    reading = wire.decoded(bytes(encoded))
    if reading is None:
        return
    try:
        theirs = _proton(bytes(encoded))
    except Exception as exc:  # proton refuses what was read: a difference
        raise AssertionError(f"read what proton refuses: {exc!r}") from exc
    _same(to_record(reading), theirs)


def test_what_it_declines_goes_to_proton() -> None:
    declined = [
        Message(body=Described(symbol("x"), 1)),
        Message(properties={"a": Described(symbol("x"), 1)}),
        Message(body=[1, 2], inferred=True),  # an amqp-sequence body
    ]
    for msg in declined:
        assert wire.decoded(bytes(msg.encode())) is None
    assert wire.decoded(b"") is not None  # no sections: no body, proton's defaults
    _same(to_record(wire.decoded(b"")), _proton(b""))  # type: ignore[arg-type]
    assert wire.decoded(b"\x00Sp") is None  # truncated




def test_sections_out_of_order_or_repeated_are_declined() -> None:
    data_a, data_b = b"\x00Su\xa0\x01a", b"\x00Su\xa0\x01b"
    subject = b"\x00Ss\xc0\x06\x04@@@\xa1\x00"  # properties: subject ""
    assert wire.decoded(data_a) is not None
    assert wire.decoded(data_a + data_b) is None  # two data sections
    assert wire.decoded(data_a + subject) is None  # properties after the body
    assert wire.decoded(subject + data_a) is not None


def test_a_timestamp_past_year_9999_is_its_milliseconds_not_an_exception() -> None:
    # A sender can write any 64-bit time; `to_record` raised for one past year 9999.
    msg = Message(body=b"x", inferred=True)
    msg.creation_time = 2**50 / 1000
    msg.properties = {"at": timestamp(2**50)}
    encoded = bytes(msg.encode())
    for reading in (wire.decoded(encoded), None):
        record = to_record(reading) if reading is not None else _proton(encoded)
        assert record.fields["properties"] == {"creation-time": str(2**50)}  # type: ignore[comparison-overlap]
        assert record.fields["application-properties"] == {"at": str(2**50)}  # type: ignore[comparison-overlap]


def test_a_footer_is_read_past_and_odd_sections_are_declined() -> None:
    value = b"\x00Sw\xa1\x02hi"  # amqp-value "hi", the last bytes of the message
    footer = b"\x00Sx\xc1\x01\x00"  # an empty footer map (proton's Message ignores it)
    for encoded in (value, value + footer):
        reading = wire.decoded(encoded)
        assert reading is not None
        _same(to_record(reading), _proton(encoded))
    declined = [
        b"\x00Sp\xa1\x01x",  # a header that is not a list
        b"\x00Ss\xa1\x01x",  # properties that are not a list
        b"\x00St\xa1\x01x",  # application properties that are not a map
        b"\x00Sr\xc0\x01\x00",  # message annotations that are not a map
        b"\x00Su\xa1\x01x",  # a data section that is not binary
        b"\x00Su\xa0\x01x" + value,  # a data section and an amqp-value
    ]
    for encoded in declined:
        assert wire.decoded(encoded) is None, encoded


def test_a_nul_in_a_member_proton_reads_as_a_c_string_is_left_to_proton() -> None:
    # proton-c hands to, subject, reply-to, content type/encoding and the group ids over
    # as C strings: they end at a NUL (proton cannot even write one). A message whose
    # sender wrote one is declined, and proton reads it.
    body = b"\x00Su\xa0\x01x"
    subject = b"\x00Ss\xc0\x09\x04@@@\xa1\x03a\x00b"  # subject "a\0b"
    content_type = b"\x00Ss\xc0\x0d\x07@@@@@@\xa3\x04\x00a/b"  # content-type "\0a/b"
    for encoded in (subject + body, content_type + body):
        assert wire.decoded(encoded) is None
    assert _proton(subject + body).fields["properties"] == {  # type: ignore[comparison-overlap]
        "subject": "a"}
    assert "properties" not in _proton(content_type + body).fields


def test_a_symbol_past_255_bytes_is_read_and_one_not_ascii_is_declined() -> None:
    long_type = "application/vnd." + "x" * 250 + "+json"
    msg = Message(content_type=symbol(long_type), body=b"{}", inferred=True,
                  annotations={symbol("k" * 300): symbol("v" * 300)})
    encoded = bytes(msg.encode())
    reading = wire.decoded(encoded)
    assert reading is not None and reading.content_type == long_type
    assert type(reading.content_type) is symbol
    _same(to_record(reading), _proton(encoded))
    def annotations(value: bytes) -> bytes:  # {k: <sym32 value>}, sizes written out
        items = b"\xa3\x01k\xb3" + len(value).to_bytes(4, "big") + value
        return (b"\x00Sr\xd1" + (4 + len(items)).to_bytes(4, "big") + b"\x00\x00\x00\x02"
                + items)

    assert wire.decoded(annotations(b"v" * 300)) is not None
    assert wire.decoded(annotations("é".encode() * 150)) is None  # a symbol is ASCII


def test_the_8_bit_map_form_is_read() -> None:
    # proton writes maps in the 32-bit form; other clients use map8 for small maps.
    encoded = b"\x00St\xc1\x07\x02\xa1\x01a\xa1\x01b" + b"\x00Su\xa0\x01x"
    reading = wire.decoded(encoded)
    assert reading is not None and reading.properties == {"a": "b"}
    _same(to_record(reading), _proton(encoded))


def test_a_list_whose_size_disagrees_with_its_items_is_declined() -> None:
    body = b"\x00Su\xa0\x01x"
    assert wire.decoded(b"\x00Ss\xc0\x02\x01@" + body) is not None  # [null]: 2 bytes
    assert wire.decoded(b"\x00Ss\xc0\x03\x01@" + body) is None  # says 3, holds 2


def test_the_one_byte_boolean_the_group_sequence_bound_and_overlong_lists() -> None:
    body = b"\x00Su\xa0\x01x"

    def header(durable: bytes) -> bytes:  # header [durable]
        return b"\x00Sp\xc0" + bytes([1 + len(durable), 1]) + durable

    for byte, durable in ((b"\x00", False), (b"\x01", True)):
        reading = wire.decoded(header(b"\x56" + byte) + body)
        assert reading is not None and reading.durable is durable
        _same(to_record(reading), _proton(header(b"\x56" + byte) + body))
    assert wire.decoded(header(b"\x56\x02") + body) is None  # not a boolean

    def sequence(value: int) -> bytes:  # properties with group-sequence `value` (a uint)
        items = b"@" * 11 + b"\x70" + value.to_bytes(4, "big")
        return b"\x00Ss\xc0" + bytes([1 + len(items), 12]) + items

    assert wire.decoded(sequence(2**31 - 1) + body) is not None
    assert wire.decoded(sequence(2**31) + body) is None  # proton-c's is a signed int
    too_long = b"\x00Ss\xc0" + bytes([15, 14]) + b"@" * 14  # 14 members, 13 defined
    assert wire.decoded(too_long + body) is None
    assert wire.decoded(b"\x00Sp\xc0\x07\x06" + b"@" * 6 + body) is None  # 6 of 5
