import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.record import NativeMessage, RecordError

EXAMPLES = [
    {"protocol": "MQTT/5.0", "topic_name": "/store/1/cashierdesk/2", "qos": 1, "retain": False,
     "user_properties": [{"name": "eventType", "value": "sale"}], "data": {"amount": 1.5}},
    {"protocol": "MQTT/3.1.1", "topic_name": "a/b", "qos": 0, "data_base64": "AAEC"},
    {"protocol": "AMQP/1.0", "properties": {"message-id": "m1", "subject": "S"},
     "application-properties": {"k": 1}, "header": {"durable": True}, "data": [1, 2]},
    {"protocol": "KAFKA", "topic": "t", "partition": 0, "offset": 7, "key": "k",
     "headers": [{"name": "h", "value": "v"}, {"name": "h", "value": "w"}], "data": "text"},
    {"protocol": "KAFKA", "topic": "t", "key_base64": "/w=="},
    {"protocol": "NATS", "subject": "a.b", "reply-to": "r", "headers": [], "data": None},
    {"protocol": "HTTP", "method": "POST", "path": "/x%20y", "query": {"a": "b"},
     "headers": [{"name": "Content-Type", "value": "application/json"}], "data": {},
     "received_at": "2026-01-01T00:00:00Z"},
]


@pytest.mark.parametrize("obj", EXAMPLES)
def test_json_form_round_trips_exactly(obj):
    record = NativeMessage.from_json(obj)
    assert record.to_json() == obj
    assert NativeMessage.from_line(record.to_line()) == record


def test_body_forms():
    r = NativeMessage.from_json(EXAMPLES[1])
    assert r.payload == b"\x00\x01\x02" and not r.has_json_data
    n = NativeMessage.from_json(EXAMPLES[5])
    assert n.has_json_data and n.data is None and n.body_bytes() == b"null"
    assert not NativeMessage("NATS", {}).has_body


@pytest.mark.parametrize(
    "obj, path",
    [
        ({"topic_name": "x"}, "$.protocol"),
        ({"protocol": "SMTP"}, "$.protocol"),
        ({"protocol": "MQTT/5.0", "qos": "1"}, "$.qos"),
        ({"protocol": "MQTT/5.0", "topic": "x"}, "$.topic"),
        ({"protocol": "MQTT/5.0", "user_properties": [{"name": "a"}]}, "$.user_properties[0]"),
        ({"protocol": "KAFKA", "key": "a", "key_base64": "YQ=="}, "$.key_base64"),
        ({"protocol": "HTTP", "data": 1, "data_base64": "YQ=="}, "$.data_base64"),
        ({"protocol": "HTTP", "data_base64": "***"}, "$.data_base64"),
        ({"protocol": "HTTP", "query": {"a": 1}}, "$.query"),
        # A bool is no integer; each kind refuses the other JSON types.
        ({"protocol": "MQTT/5.0", "qos": True}, "$.qos"),
        ({"protocol": "MQTT/5.0", "retain": 1}, "$.retain"),
        ({"protocol": "MQTT/5.0", "topic_name": None}, "$.topic_name"),
        ({"protocol": "AMQP/1.0", "properties": []}, "$.properties"),
        ({"protocol": "MQTT/5.0", "user_properties": {}}, "$.user_properties"),
        # Entries are name and value, nothing more, nothing less.
        ({"protocol": "MQTT/5.0", "user_properties": [
            {"name": "a", "value": "b"}, {"name": "a", "value": "b", "x": 1}]},
         "$.user_properties[1]"),
        ({"protocol": "MQTT/5.0", "user_properties": [{"name": "a", "x": "b"}]},
         "$.user_properties[0]"),
        ({"protocol": "MQTT/5.0", "user_properties": [{"name": 1, "value": "b"}]},
         "$.user_properties[0]"),
        ({"protocol": "mqtt/5.0", "qos": True}, "$.qos"),  # a spelling, normalised
    ],
)
def test_bad_records_name_the_path(obj, path):
    with pytest.raises(RecordError) as info:
        NativeMessage.from_json(obj)
    assert info.value.path == path


def test_content_type_per_protocol():
    assert NativeMessage("MQTT/5.0", {"content_type": "a/b"}).content_type == "a/b"
    assert NativeMessage("AMQP/1.0", {"properties": {"content-type": "a/c"}}).content_type == "a/c"
    kafka = NativeMessage("KAFKA", {"headers": [{"name": "Content-Type", "value": "a/d"}]})
    assert kafka.content_type == "a/d"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner,
                                                                  max_size=3),
    max_leaves=8,
)


@given(st.dictionaries(st.sampled_from(["protocol", "topic_name", "qos", "data", "headers",
                                        "data_base64", "subject", "x"]), json_values))
def test_from_json_raises_only_record_error(obj):
    try:
        record = NativeMessage.from_json(obj)
    except RecordError:
        return
    assert NativeMessage.from_json(json.loads(record.to_line())) == record


@pytest.mark.parametrize(
    "body, ctype, expect",
    [
        (b"", "application/json", ("none", None)),
        (b'{"a":1}', "application/json; charset=utf-8", ("data", {"a": 1})),
        (b'{"a":1}', "application/cloudevents+json", ("data", {"a": 1})),
        (b"not json", "application/json", ("payload", b"not json")),
        (b'{"a":1}', "text/plain", ("payload", b'{"a":1}')),
        (b"[1,2]", None, ("data", [1, 2])),
        (b"21.5", None, ("payload", b"21.5")),
        (b"\xff\xfe", None, ("payload", b"\xff\xfe")),
    ],
)
def test_the_one_body_rule(body, ctype, expect):
    record = NativeMessage.from_wire("KAFKA", {"topic": "t"}, body, ctype)
    kind, value = expect
    if kind == "none":
        assert not record.has_body
    elif kind == "data":
        assert record.has_json_data and record.data == value
    else:
        assert not record.has_json_data and record.payload == value


# Bodies a sender may send: JSON of every kind, text that is not JSON, what `json.loads`
# reads and orjson refuses (NaN, a BOM, UTF-16, 19-digit integers), bytes that are not
# UTF-8, nesting deeper than the recursion limit.
BODIES = st.one_of(
    st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                 lambda inner: st.lists(inner, max_size=3)
                 | st.dictionaries(st.text(max_size=4), inner, max_size=3),
                 max_leaves=6).map(lambda v: json.dumps(v).encode()),
    st.sampled_from([b"21.5", b"NaN", b"\xef\xbb\xbf{}", '{"a":1}'.encode("utf-16"),
                     b"12345678901234567890123", b"{bad", b"\xff\xfe\x00", b" [1] ",
                     b"[" * 5000, b"\x00{}"]),
    st.binary(min_size=1, max_size=12),
)
CONTENT_TYPES = st.sampled_from([None, "application/json", "text/json; charset=utf-8",
                                 "application/x+json", "text/plain", "application/xml"])


def eager_body(body: bytes, content_type: str | None) -> tuple[object, ...]:
    """The body rule, written out with `json.loads` (what the record reads as data)."""
    if not body:
        return ("none",)
    declared = content_type is not None
    if declared and not (content_type.split(";")[0].strip() in ("application/json",
                                                                 "text/json")
                         or content_type.split(";")[0].strip().endswith("+json")):
        return ("payload", body)
    try:
        value = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return ("payload", body)
    if not declared and not isinstance(value, (dict, list)):
        return ("payload", body)
    return ("data", value, body)


def body_of(record: NativeMessage) -> tuple[object, ...]:
    if not record.has_json_data and record.payload is None:
        return ("none",)
    if record.has_json_data:
        return ("data", record.data, record.raw)
    return ("payload", record.payload)


@given(BODIES, CONTENT_TYPES)
def test_a_body_parsed_when_first_read_is_the_body_rule(body, ctype):
    """`from_wire` leaves the body to be parsed when first read; what is read is the
    rule's answer whichever part is read first, and the bytes, their length and whether
    there is a body are known without parsing."""
    expected = eager_body(body, ctype)
    for first in ("data", "payload", "raw", "has_json_data", "to_json"):
        record = NativeMessage.from_wire("KAFKA", {"topic": "t"}, body, ctype, parse=False)
        assert record.body_bytes() == body
        assert record.has_body == bool(body)
        assert record.body_length() == len(body)
        unparsed = record.unparsed_body()
        if unparsed is not None:  # nothing above parsed it
            assert unparsed is body
            assert ctype is not None  # only a body declared JSON is left unparsed
            copy = record.replace_fields({"topic": "u"})
            assert copy.unparsed_body() is body and copy.fields == {"topic": "u"}
            assert body_of(copy) == expected
        read = getattr(record, first)
        if callable(read):
            read()
        assert record.unparsed_body() is None
        assert type(record) is NativeMessage  # parsed: a plain record from then on
        assert body_of(record) == expected
        assert record.body_bytes() == body and record.body_length() == len(body)


def test_an_unparsed_record_answers_like_a_parsed_one():
    lazy = NativeMessage.from_wire("KAFKA", {"topic": "t"}, b'{"a":1}', "application/json",
                                   parse=False)
    eager = NativeMessage("KAFKA", {"topic": "t"}, data={"a": 1}, raw=b'{"a":1}')
    assert lazy.unparsed_body() is not None
    assert lazy.replace_fields({"topic": "u"}).unparsed_body() is not None
    assert lazy == eager and lazy.to_line() == eager.to_line()
    assert lazy.data == {"a": 1} and lazy.unparsed_body() is None
    assert lazy.replace_fields({"topic": "u"}).raw == b'{"a":1}'


@given(BODIES, CONTENT_TYPES)
def test_a_body_is_parsed_at_once_unless_deferred(body, ctype):
    """By default `from_wire` parses as the body arrives (a plain record); deferred,
    the record reads the same once parsed."""
    eager = NativeMessage.from_wire("KAFKA", {"topic": "t"}, body, ctype)
    assert type(eager) is NativeMessage and eager.unparsed_body() is None
    assert body_of(eager) == eager_body(body, ctype)
    deferred = NativeMessage.from_wire("KAFKA", {"topic": "t"}, body, ctype, parse=False)
    assert body_of(deferred) == body_of(eager) and deferred == eager
