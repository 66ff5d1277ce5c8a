"""Protocol bindings: wire layout per protocol, decoding hand-written messages, detection,
round trips of every valid vector event, and leniency on input."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from ce_testdata import (
    GOLDEN,
    SAMPLE_EXTENSION_TYPES,
    valid_events,
    yaml_documents,
    yaml_wire_attributes,
)

from gateway.cloudevents.bindings import (
    decode,
    decode_batch,
    detect_mode,
    encode,
    encode_batch,
)
from gateway.cloudevents.errors import CloudEventError
from gateway.cloudevents.event import CloudEvent
from gateway.cloudevents.headercodec import encode_header_value
from gateway.cloudevents.jsonformat import serialize_event
from gateway.json.values import JSON
from gateway.protocols import AMQP, HTTP, KAFKA, MQTT5, MQTT311, NATS
from gateway.record import NativeMessage

ALL = [HTTP, KAFKA, MQTT5, MQTT311, AMQP, NATS]
COMBINATIONS = [
    (p, m) for p in ALL for m in ("binary", "structured") if (p, m) != (MQTT311, "binary")
]
VALID_EVENTS = valid_events() + list(GOLDEN.values())


def expected_after(event: CloudEvent, mode: str) -> CloudEvent:
    """What a round trip must give back: binary mode writes the implied JSON content type."""
    if (
        mode == "binary"
        and event.has_data
        and not isinstance(event.data, bytes)
        and event.datacontenttype is None
    ):
        return event.with_attributes(datacontenttype="application/json")
    return event


def headers(record: NativeMessage) -> dict[str, str]:
    return dict(record.pairs("headers"))


# -- round trips of the vector events -----------------------------------------------------------
@pytest.mark.parametrize(("protocol", "mode"), COMBINATIONS)
@pytest.mark.parametrize("index", range(len(VALID_EVENTS)))
def test_vector_events_round_trip(protocol: str, mode: str, index: int) -> None:
    event = VALID_EVENTS[index]
    record = encode(event, protocol, mode)  # type: ignore[arg-type]
    assert detect_mode(record) == mode
    types = event.attribute_types()
    assert decode(record, types) == expected_after(event, mode)
    # The record survives its own JSON form (what adapters exchange).
    again = NativeMessage.from_line(record.to_line())
    assert decode(again, types) == expected_after(event, mode)


def test_mqtt311_has_no_binary_mode() -> None:
    with pytest.raises(ValueError, match=r"MQTT 3\.1\.1"):
        encode(GOLDEN["minimal"], MQTT311, "binary")


def test_unknown_protocol_and_mode() -> None:
    with pytest.raises(ValueError):
        encode(GOLDEN["minimal"], "SMTP", "binary")
    with pytest.raises(ValueError):
        encode(GOLDEN["minimal"], HTTP, "batch")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        detect_mode(NativeMessage("SMTP"))


def test_protocol_names_are_normalised() -> None:
    assert encode(GOLDEN["minimal"], "mqtt", "binary").protocol == MQTT5
    assert encode(GOLDEN["minimal"], "amqp", "binary").protocol == AMQP


def test_typed_extensions_need_their_types_over_string_bindings() -> None:
    event = GOLDEN["allExtensionTypes"]
    record = encode(event, HTTP, "binary")
    untyped = decode(record)
    assert untyped is not None and untyped != event
    assert untyped.attributes["extinteger"] == "10"
    assert decode(record, SAMPLE_EXTENSION_TYPES) == event


# -- wire layout per protocol ---------------------------------------------------------------------
ALL_CORE = GOLDEN["allCore"]
TEXT_EVENT = GOLDEN["simpleTextData"]


def test_http_binary_layout() -> None:
    record = encode(ALL_CORE, HTTP, "binary")
    assert record.get("method") == "POST"
    assert headers(record) == {
        "ce-specversion": "1.0",
        "ce-id": "allCore",
        "ce-type": "io.cloudevents.test",
        "ce-source": "https://cloudevents.io",
        "ce-dataschema": "https://cloudevents.io/dataschema",
        "ce-subject": "tests",
        "ce-time": "2018-04-05T17:31:00Z",
        "content-type": "text/plain",
    }
    assert not record.has_body


def test_http_binary_percent_encodes_every_ce_header() -> None:
    event = CloudEvent.create(
        {"specversion": "1.0", "id": "a b", "type": "t", "source": "/a%20b", "subject": "Euro €"}
    )
    wire = headers(encode(event, HTTP, "binary"))
    assert (wire["ce-id"], wire["ce-source"], wire["ce-subject"]) == (
        "a%20b",
        "/a%2520b",
        "Euro%20%E2%82%AC",
    )


def test_http_binary_text_body_is_raw_bytes() -> None:
    record = encode(TEXT_EVENT, HTTP, "binary")
    assert record.payload == b"Simple text" and not record.has_json_data


def test_http_binary_json_string_body_keeps_its_quotes() -> None:
    event = CloudEvent.create(
        {"specversion": "1.0", "id": "1", "type": "t", "source": "/s"}, "I'm just a string"
    )
    record = encode(event, HTTP, "binary")
    assert record.body_bytes() == b'"I\'m just a string"'
    assert headers(record)["content-type"] == "application/json"


def test_http_binary_bytes_without_content_type_sends_none() -> None:
    event = CloudEvent.create(
        {"specversion": "1.0", "id": "1", "type": "t", "source": "/s"}, b"\x00"
    )
    record = encode(event, HTTP, "binary")
    assert "content-type" not in headers(record) and record.payload == b"\x00"


def test_structured_layout_is_the_json_format() -> None:
    for protocol in ALL:
        record = encode(TEXT_EVENT, protocol, "structured")
        assert record.data == json.loads(serialize_event(TEXT_EVENT))
        if protocol != MQTT311:
            assert record.content_type == "application/cloudevents+json; charset=utf-8"


def test_kafka_binary_layout_and_key() -> None:
    event = ALL_CORE.with_attributes(partitionkey="k-1")
    record = encode(event, KAFKA, "binary")
    wire = headers(record)
    assert wire["ce_partitionkey"] == "k-1" and wire["content-type"] == "text/plain"
    assert "ce_datacontenttype" not in wire and wire["ce_id"] == "allCore"
    assert record.get("key") == "k-1"
    assert not record.has_body  # no data: a tombstone
    structured = encode(event, KAFKA, "structured")
    assert structured.get("key") == "k-1" and structured.has_body
    assert encode(ALL_CORE, KAFKA, "binary").get("key") is None


def test_kafka_values_are_not_percent_encoded() -> None:
    event = CloudEvent.create({"specversion": "1.0", "id": "a b%", "type": "t", "source": "/s"})
    assert headers(encode(event, KAFKA, "binary"))["ce_id"] == "a b%"


def test_kafka_key_is_not_turned_into_an_attribute() -> None:
    record = encode(ALL_CORE, KAFKA, "binary")
    keyed = NativeMessage(KAFKA, {**record.fields, "key": "some-key"})
    decoded = decode(keyed)
    assert decoded is not None and "partitionkey" not in decoded.attributes


def test_mqtt5_binary_layout() -> None:
    record = encode(TEXT_EVENT, MQTT5, "binary")
    names = [name for name, _ in record.pairs("user_properties")]
    assert names == ["specversion", "id", "type", "source"]
    assert record.get("content_type") == "text/plain"
    assert record.payload == b"Simple text"


def test_amqp_binary_layout() -> None:
    event = GOLDEN["allExtensionTypes"].with_attributes(
        time=datetime(2018, 4, 5, 17, 31, 0, 123456, tzinfo=UTC), datacontenttype="text/plain"
    )
    record = encode(event, AMQP, "binary")
    properties = record.get("application-properties")
    assert isinstance(properties, dict)
    assert properties["cloudEvents_extinteger"] == 10
    assert properties["cloudEvents_extboolean"] is True
    assert properties["cloudEvents_extbinary"] == "TWE="
    assert properties["cloudEvents_time"] == "2018-04-05T17:31:00.123456Z"
    assert "cloudEvents_datacontenttype" not in properties
    assert record.get("properties") == {"content-type": "text/plain"}


def test_nats_binary_layout() -> None:
    record = encode(TEXT_EVENT, NATS, "binary")
    wire = headers(record)
    assert wire["ce-datacontenttype"] == "text/plain"
    assert "content-type" not in {name.lower() for name in wire}
    assert wire["ce-id"] == "simpleTextData"


# -- decoding hand-written messages: the conformance YAML ---------------------------------------
V1_MINIMUM = yaml_documents("v1.0/v1_minimum.yaml")
V1 = yaml_documents("v1.yaml")


def _wire_message(protocol: str, document: dict[str, Any]) -> NativeMessage:
    """The binary-mode message the upstream tool would send, written without our encoder."""
    attributes = yaml_wire_attributes(document)
    content_type = attributes.pop("datacontenttype", None)
    body = document["Data"].encode()
    fields: dict[str, Any]
    if protocol == HTTP:
        pairs = [
            {"name": f"ce-{k}", "value": encode_header_value(v)} for k, v in attributes.items()
        ]
        pairs += [
            {"name": k, "value": v} for k, v in (document.get("TransportExtensions") or {}).items()
        ]
        if content_type:
            pairs.append({"name": "Content-Type", "value": content_type})
        fields = {"method": "POST", "headers": pairs}
    elif protocol == KAFKA:
        pairs = [{"name": f"ce_{k}", "value": v} for k, v in attributes.items()]
        if content_type:
            pairs.append({"name": "content-type", "value": content_type})
        fields = {"headers": pairs}
    elif protocol == MQTT5:
        fields = {"user_properties": [{"name": k, "value": v} for k, v in attributes.items()]}
        if content_type:
            fields["content_type"] = content_type
    elif protocol == AMQP:
        # The legacy ':' separator, as sdk-go and sdk-java still send it.
        fields = {"application-properties": {f"cloudEvents:{k}": v for k, v in attributes.items()}}
        if content_type:
            fields["properties"] = {"content-type": content_type}
    else:
        pairs = [
            {"name": f"ce-{k}", "value": encode_header_value(v)} for k, v in attributes.items()
        ]
        if content_type:
            pairs.append({"name": "ce-datacontenttype", "value": encode_header_value(content_type)})
        fields = {"headers": pairs}
    return NativeMessage(protocol, fields, payload=body)


BINARY_PROTOCOLS = [HTTP, KAFKA, MQTT5, AMQP, NATS]


@pytest.mark.parametrize("protocol", BINARY_PROTOCOLS)
@pytest.mark.parametrize("index", range(len(V1_MINIMUM)))
def test_yaml_minimum_events_decode_from_hand_written_messages(protocol: str, index: int) -> None:
    document = V1_MINIMUM[index]
    event = decode(_wire_message(protocol, document))
    assert event is not None
    assert event.canonical_strings() == yaml_wire_attributes(document)
    content_type = document["ContextAttributes"]["datacontenttype"]
    if content_type.startswith("application/json"):
        assert event.data == json.loads(document["Data"])
    else:  # text and XML in UTF-8 are handed over as text, byte for byte
        assert event.data == document["Data"]


@pytest.mark.parametrize("protocol", BINARY_PROTOCOLS)
def test_yaml_v1_binary_event_decodes(protocol: str) -> None:
    document = next(d for d in V1 if d["Mode"] == "binary")
    event = decode(_wire_message(protocol, document))
    assert event is not None
    # The extension ends in a newline: carried raw on Kafka/MQTT/AMQP, as %0A on HTTP/NATS.
    assert event.attributes["comexampleextension2"] == '{"othervalue": 5}\n'
    assert event.attributes["time"] == datetime(2018, 4, 5, 3, 56, 24, tzinfo=UTC)
    # No content type: the body is not assumed to be JSON.
    assert event.data == document["Data"].encode() and "datacontenttype" not in event.attributes
    assert "user-agent" not in event.attributes


def test_yaml_v1_structured_event_decodes_over_http() -> None:
    document = next(d for d in V1 if d["Mode"] == "structured")
    # The upstream renderer embeds Data as raw JSON inside the structured body.
    body = dict(yaml_wire_attributes(document), data=json.loads(document["Data"]))
    record = NativeMessage(
        HTTP,
        {"headers": [{"name": "content-type", "value": "application/cloudevents+json"}]},
        payload=json.dumps(body).encode(),
    )
    event = decode(record)
    assert event is not None and event.data == {"world": "hello"}
    assert event.canonical_strings() == yaml_wire_attributes(document)


@pytest.mark.parametrize("relative", ["v03.yaml", "v0.3/v03_minimum.yaml"])
@pytest.mark.parametrize("protocol", BINARY_PROTOCOLS)
def test_yaml_v03_events_are_rejected(relative: str, protocol: str) -> None:
    for document in yaml_documents(relative):
        with pytest.raises(CloudEventError) as caught:
            decode(_wire_message(protocol, document))
        assert any(p.startswith("specversion:") for p in caught.value.problems)


@pytest.mark.parametrize(("protocol", "mode"), COMBINATIONS)
@pytest.mark.parametrize("index", range(len(V1_MINIMUM) + len(V1)))
def test_yaml_events_round_trip(protocol: str, mode: str, index: int) -> None:
    document = (V1_MINIMUM + V1)[index]
    original = decode(_wire_message(HTTP, document))
    assert original is not None
    assert decode(encode(original, protocol, mode), original.attribute_types()) == original  # type: ignore[arg-type]


# -- detection -------------------------------------------------------------------------------------
def _http(
    content_type: str | None, *more: tuple[str, str], body: bytes | None = b"{}"
) -> NativeMessage:
    pairs: list[JSON] = [{"name": n, "value": v} for n, v in more]
    if content_type is not None:
        pairs.append({"name": "Content-Type", "value": content_type})
    return NativeMessage(HTTP, {"headers": pairs}, payload=body)


@pytest.mark.parametrize(
    ("record", "mode"),
    [
        (_http("application/cloudevents-batch+json"), "batch"),
        (_http("Application/CloudEvents-Batch+JSON; charset=UTF-8"), "batch"),
        (_http("application/cloudevents+json"), "structured"),
        (
            _http("APPLICATION/CLOUDEVENTS+JSON; charset=utf-8", ("ce-specversion", "1.0")),
            "structured",
        ),
        (_http(" application/cloudevents+avro"), "structured"),
        (_http("application/json", ("ce-specversion", "1.0")), "binary"),
        (_http(None, ("CE-SpecVersion", "1.0")), "binary"),
        (_http("application/json"), None),
        (_http(None, ("ce-id", "1"), ("ce-type", "t"), ("ce-source", "/s")), None),
        (
            NativeMessage(
                KAFKA,
                {"headers": [{"name": "content-type", "value": "Application/CloudEvents+Json"}]},
            ),
            "structured",
        ),
        (NativeMessage(KAFKA, {"headers": [{"name": "ce_specversion", "value": "1.0"}]}), "binary"),
        (NativeMessage(KAFKA, {"headers": [{"name": "ce-specversion", "value": "1.0"}]}), None),
        (NativeMessage(KAFKA, {}, payload=b"{}"), None),
        (NativeMessage(MQTT5, {"content_type": "application/cloudevents+json"}), "structured"),
        (
            NativeMessage(MQTT5, {"user_properties": [{"name": "specversion", "value": "1.0"}]}),
            "binary",
        ),
        (
            NativeMessage(MQTT5, {"user_properties": [{"name": "ce-specversion", "value": "1.0"}]}),
            "binary",
        ),
        (NativeMessage(MQTT5, {"user_properties": [{"name": "eventType", "value": "x"}]}), None),
        (NativeMessage(MQTT5, {}, data={"specversion": "1.0"}), None),
        (NativeMessage(MQTT311, {}, data={"specversion": "1.0"}), "structured"),
        (NativeMessage(MQTT311, {}, payload=b' {"specversion": "1.0"}'), "structured"),
        (NativeMessage(MQTT311, {}, data={"id": "1"}), None),
        (NativeMessage(MQTT311, {}, payload=b"temperature=5"), None),
        (NativeMessage(MQTT311, {}, payload=b"{not json"), None),
        (NativeMessage(MQTT311, {}), None),
        (
            NativeMessage(AMQP, {"properties": {"content-type": "application/cloudevents+json"}}),
            "structured",
        ),
        (
            NativeMessage(AMQP, {"application-properties": {"cloudEvents_specversion": "1.0"}}),
            "binary",
        ),
        (
            NativeMessage(AMQP, {"application-properties": {"cloudEvents:specversion": "1.0"}}),
            "binary",
        ),
        (NativeMessage(AMQP, {"application-properties": {"specversion": "1.0"}}), None),
        (
            NativeMessage(
                NATS,
                {"headers": [{"name": "Content-Type", "value": "application/cloudevents+json"}]},
            ),
            "structured",
        ),
        (NativeMessage(NATS, {"headers": [{"name": "ce-specversion", "value": "1.0"}]}), "binary"),
        (NativeMessage(NATS, {}, data={"specversion": "1.0"}), "structured"),
        (
            NativeMessage(
                NATS,
                {"headers": [{"name": "Content-Type", "value": "application/json"}]},
                data={"specversion": "1.0"},
            ),
            None,
        ),
        (NativeMessage(NATS, {}, payload=b"hello"), None),
    ],
)
def test_detect_mode(record: NativeMessage, mode: str | None) -> None:
    assert detect_mode(record) == mode
    if mode is None:
        assert decode(record) is None
        assert decode_batch(record) == []


def test_detect_matches_every_encoding() -> None:
    for protocol, mode in COMBINATIONS:
        assert detect_mode(encode(TEXT_EVENT, protocol, mode)) == mode  # type: ignore[arg-type]


# -- batches --------------------------------------------------------------------------------
def test_http_batch_round_trip() -> None:
    events = [GOLDEN["minimal"], GOLDEN["allCore"], TEXT_EVENT]
    record = encode_batch(events)
    assert detect_mode(record) == "batch"
    assert record.content_type == "application/cloudevents-batch+json; charset=utf-8"
    assert decode_batch(record) == events
    assert decode_batch(NativeMessage.from_line(record.to_line())) == events
    with pytest.raises(CloudEventError) as caught:
        decode(record)
    assert caught.value.reason == "unexpected-batch"


def test_decode_batch_of_a_single_event() -> None:
    assert decode_batch(encode(TEXT_EVENT, KAFKA, "binary")) == [TEXT_EVENT]


def test_batch_only_exists_on_http() -> None:
    with pytest.raises(ValueError):
        encode_batch([], KAFKA)


def test_invalid_batch_member_fails_the_batch() -> None:
    record = _http(
        "application/cloudevents-batch+json",
        body=b'[{"specversion":"1.0","id":"1","type":"t","source":"/s"},{"id":"2"}]',
    )
    with pytest.raises(CloudEventError) as caught:
        decode_batch(record)
    assert caught.value.reason == "batch-invalid"


# -- claims to be a CloudEvent but is not valid ----------------------------------------
def test_binary_missing_required_attributes_lists_them_all() -> None:
    with pytest.raises(CloudEventError) as caught:
        decode(_http(None, ("ce-specversion", "1.0")))
    assert {p.split(":")[0] for p in caught.value.problems} == {"id", "type", "source"}


def test_repeated_attribute_is_rejected() -> None:
    record = _http(
        None,
        ("ce-specversion", "1.0"),
        ("ce-id", "1"),
        ("CE-ID", "2"),
        ("ce-type", "t"),
        ("ce-source", "/s"),
    )
    with pytest.raises(CloudEventError) as caught:
        decode(record)
    assert caught.value.problems == ["id: appears more than once (CE-ID)"]


def test_kafka_repeated_attribute_is_rejected() -> None:
    pairs: list[JSON] = [
        {"name": name, "value": value}
        for name, value in [
            ("ce_specversion", "1.0"),
            ("ce_id", "1"),
            ("ce_type", "t"),
            ("ce_type", "u"),
            ("ce_source", "/s"),
        ]
    ]
    with pytest.raises(CloudEventError) as caught:
        decode(NativeMessage(KAFKA, {"headers": pairs}))
    assert caught.value.problems == ["type: appears more than once (ce_type)"]


def test_undecodable_header_names_the_attribute() -> None:
    record = _http(
        None, ("ce-specversion", "1.0"), ("ce-id", "%C0%A0"), ("ce-type", "t"), ("ce-source", "/s")
    )
    with pytest.raises(CloudEventError) as caught:
        decode(record)
    assert caught.value.problems[0].startswith("id: header ce-id:")


def test_unsupported_structured_format() -> None:
    with pytest.raises(CloudEventError) as caught:
        decode(_http("application/cloudevents+avro"))
    assert caught.value.reason == "unsupported-format"


def test_structured_body_that_is_not_json() -> None:
    with pytest.raises(CloudEventError) as caught:
        decode(_http("application/cloudevents+json", body=b"<xml/>"))
    assert caught.value.reason == "not-json"


def test_mqtt311_json_with_specversion_but_invalid_raises() -> None:
    with pytest.raises(CloudEventError):
        decode(NativeMessage(MQTT311, {}, data={"specversion": "1.0", "id": "1"}))


def test_bad_time_on_every_binding() -> None:
    event = CloudEvent.create(
        {
            "specversion": "1.0",
            "id": "1",
            "type": "t",
            "source": "/s",
            "time": datetime(2018, 4, 5, tzinfo=UTC),
        }
    )
    for protocol, mode in COMBINATIONS:
        line = encode(event, protocol, mode).to_line()  # type: ignore[arg-type]
        broken = NativeMessage.from_line(line.replace("2018-04-05T00:00:00Z", "2018-04-05T00:00Z"))
        with pytest.raises(CloudEventError) as caught:
            decode(broken)
        assert caught.value.problems[0].startswith("time:"), (protocol, mode)


# -- leniency on input ----------------------------------------------------------------------
MIN_HEADERS = (("ce-specversion", "1.0"), ("ce-type", "t"), ("ce-source", "/s"))


def test_http_quoted_header_values_and_lowercase_hex() -> None:
    event = decode(_http(None, *MIN_HEADERS, ("ce-id", '"a b"'), ("ce-subject", "caf%c3%a9")))
    assert event is not None
    assert (event.attributes["id"], event.attributes["subject"]) == ("a b", "café")


def test_http_structured_trusts_the_body_over_ce_headers() -> None:
    body = serialize_event(TEXT_EVENT)
    record = _http("application/cloudevents+json", ("ce-id", "other"), body=body)
    assert decode(record) == TEXT_EVENT


def test_http_empty_body_means_no_data() -> None:
    event = decode(_http(None, *MIN_HEADERS, ("ce-id", "1"), body=b""))
    assert event is not None and not event.has_data


def test_http_ce_datacontenttype_is_tolerated_when_consistent() -> None:
    event = decode(
        _http(
            "text/plain",
            *MIN_HEADERS,
            ("ce-id", "1"),
            ("ce-datacontenttype", "text/plain"),
            body=b"x",
        )
    )
    assert event is not None and event.data == "x"
    with pytest.raises(CloudEventError):
        decode(
            _http("text/plain", *MIN_HEADERS, ("ce-id", "1"), ("ce-datacontenttype", "text/html"))
        )


def test_amqp_accepts_colon_and_milliseconds_timestamps() -> None:
    record = NativeMessage(
        AMQP,
        {
            "application-properties": {
                "cloudEvents:specversion": "1.0",
                "cloudEvents:id": "1",
                "cloudEvents:type": "t",
                "cloudEvents:source": "/s",
                "cloudEvents:time": 1522949460000,
                "cloudEvents:n": 7,
                "x-opt-other": "ignored",
            }
        },
    )
    event = decode(record)
    assert event is not None
    assert event.attributes["time"] == datetime(2018, 4, 5, 17, 31, tzinfo=UTC)
    assert event.attributes["n"] == 7 and "x-opt-other" not in event.attributes


def test_amqp_rejects_both_separators_for_one_attribute_and_non_integer_numbers() -> None:
    record = NativeMessage(
        AMQP,
        {
            "application-properties": {
                "cloudEvents_specversion": "1.0",
                "cloudEvents_id": "1",
                "cloudEvents:id": "2",
                "cloudEvents_type": "t",
                "cloudEvents_source": "/s",
                "cloudEvents_n": 1.5,
            }
        },
    )
    with pytest.raises(CloudEventError) as caught:
        decode(record)
    assert [p.split(":")[0] for p in caught.value.problems] == ["id", "n"]


def test_mqtt5_accepts_ce_prefixed_properties_and_ignores_transport_metadata() -> None:
    go_style = NativeMessage(
        MQTT5,
        {
            "user_properties": [
                {"name": "ce-specversion", "value": "1.0"},
                {"name": "ce-id", "value": "1"},
                {"name": "ce-type", "value": "t"},
                {"name": "ce-source", "value": "/s"},
                {"name": "traceparent-X", "value": "z"},
            ]
        },
    )
    event = decode(go_style)
    assert event is not None and dict(event.attributes) == {
        "specversion": "1.0",
        "id": "1",
        "type": "t",
        "source": "/s",
    }
    bare = NativeMessage(
        MQTT5,
        {
            "user_properties": [
                {"name": "specversion", "value": "1.0"},
                {"name": "id", "value": "1"},
                {"name": "type", "value": "t"},
                {"name": "source", "value": "/s"},
                {"name": "Region", "value": "eu"},
                {"name": "ce-id", "value": "ignored"},
            ]
        },
    )
    event = decode(bare)
    assert event is not None and "Region" not in event.attributes and event.attributes["id"] == "1"


def test_mqtt5_datacontenttype_user_property() -> None:
    base: list[JSON] = [
        {"name": "specversion", "value": "1.0"},
        {"name": "id", "value": "1"},
        {"name": "type", "value": "t"},
        {"name": "source", "value": "/s"},
        {"name": "datacontenttype", "value": "text/plain"},
    ]
    event = decode(NativeMessage(MQTT5, {"user_properties": base}, payload=b"hi"))
    assert event is not None and event.data == "hi" and event.datacontenttype == "text/plain"
    with pytest.raises(CloudEventError):
        decode(NativeMessage(MQTT5, {"user_properties": base, "content_type": "text/html"}))
    dup: list[JSON] = [*base, {"name": "id", "value": "2"}]
    with pytest.raises(CloudEventError):
        decode(NativeMessage(MQTT5, {"user_properties": dup}))


def test_nats_accepts_plain_content_type_and_structured_without_headers() -> None:
    record = NativeMessage(
        NATS,
        {
            "headers": [
                {"name": "ce-specversion", "value": "1.0"},
                {"name": "ce-id", "value": "1"},
                {"name": "ce-type", "value": "t"},
                {"name": "ce-source", "value": "/s"},
                {"name": "Content-Type", "value": "application/json"},
            ]
        },
        payload=b'{"a":1}',
    )
    event = decode(record)
    assert event is not None and event.data == {"a": 1}
    legacy = NativeMessage(NATS, {}, payload=serialize_event(TEXT_EVENT))
    assert decode(legacy) == TEXT_EVENT


def test_kafka_ce_datacontenttype_is_tolerated() -> None:
    record = NativeMessage(
        KAFKA,
        {
            "headers": [
                {"name": "ce_specversion", "value": "1.0"},
                {"name": "ce_id", "value": "1"},
                {"name": "ce_type", "value": "t"},
                {"name": "ce_source", "value": "/s"},
                {"name": "ce_datacontenttype", "value": "application/json"},
            ]
        },
        payload=b"[1]",
    )
    event = decode(record)
    assert event is not None and event.data == [1]


def test_json_content_type_with_a_body_that_is_not_json_keeps_the_bytes() -> None:
    event = decode(_http("application/json", *MIN_HEADERS, ("ce-id", "1"), body=b"{oops"))
    assert event is not None and event.data == b"{oops"
    again = decode(encode(event, HTTP, "binary"))
    assert again == event


def test_non_utf8_text_stays_bytes() -> None:
    event = decode(_http("text/plain", *MIN_HEADERS, ("ce-id", "1"), body=b"\xff"))
    assert event is not None and event.data == b"\xff"


def test_nan_in_a_record_body_is_not_json() -> None:
    record = NativeMessage(
        HTTP,
        {
            "headers": [
                {"name": "ce-specversion", "value": "1.0"},
                {"name": "ce-id", "value": "1"},
                {"name": "ce-type", "value": "t"},
                {"name": "ce-source", "value": "/s"},
                {"name": "content-type", "value": "text/plain"},
            ]
        },
        data=[float("nan")],
    )
    with pytest.raises(CloudEventError) as caught:
        decode(record)
    assert caught.value.reason == "not-json"


def test_header_name_cache_is_bounded_and_names_stay_right() -> None:
    from gateway.cloudevents.bindings import headers as header_binding

    base = {"specversion": "1.0", "id": "1", "source": "/s", "type": "t",
            "datacontenttype": "text/plain", "time": datetime(2026, 1, 2, 3, 4, 5, 60, UTC)}
    for batch in range(3):
        extensions = {f"ext{batch}n{i}": str(i) for i in range(header_binding._NAMES_MAX)}
        event = CloudEvent.trusted({**base, **extensions}, "x", True)
        pairs: list[tuple[str, str]] = []
        written = header_binding.write(event, "ce-", False, pairs=pairs)
        assert len(header_binding._NAMES["ce-"]) <= header_binding._NAMES_MAX
        assert pairs[:5] == [("ce-specversion", "1.0"), ("ce-id", "1"), ("ce-source", "/s"),
                             ("ce-type", "t"), ("ce-time", "2026-01-02T03:04:05.00006Z")]
        assert pairs[5:] == [(f"ce-{name}", value) for name, value in extensions.items()]
        assert written == [{"name": n, "value": v} for n, v in pairs]
