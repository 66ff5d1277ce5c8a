"""Hypothesis strategies for valid CloudEvents and for arbitrary (hostile) records."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from hypothesis import strategies as st

from gateway.cloudevents.event import CloudEvent
from gateway.cloudevents.typesystem import CORE, INT32_MAX, INT32_MIN, AttributeValue
from gateway.protocols import AMQP, HTTP, KAFKA, MQTT5, MQTT311, NATS
from gateway.record import NativeMessage

TEXT = st.text(st.characters(codec="utf-8"), max_size=30)
NON_EMPTY = st.text(st.characters(codec="utf-8"), min_size=1, max_size=30)
OFFSETS = st.integers(min_value=-23 * 60 - 59, max_value=23 * 60 + 59).map(
    lambda minutes: timezone(timedelta(minutes=minutes))
)
TIMESTAMPS = st.datetimes(
    min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=OFFSETS
)
INT32 = st.integers(min_value=INT32_MIN, max_value=INT32_MAX)
URI_REFERENCES = st.sampled_from(
    ["https://cloudevents.io", "/a/b", "#fragment", "urn:x:y", "1-555-123-4567", "/a%20b", "//h/p"]
)
EXTENSION_NAMES = st.from_regex(r"[a-z0-9]{1,20}", fullmatch=True).filter(
    lambda name: name not in CORE and name != "data"
)
EXTENSION_VALUES: st.SearchStrategy[AttributeValue] = st.one_of(
    TEXT, st.booleans(), INT32, st.binary(max_size=20), TIMESTAMPS
)
JSON_VALUES: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=10,
)

# (content type, data, has_data); empty text/bytes are excluded because binary mode
# cannot tell an empty body from no data.
DATA = st.one_of(
    st.just((None, None, False)),
    st.tuples(
        st.sampled_from([None, "application/json", "application/vnd.x+json; charset=utf-8"]),
        JSON_VALUES,
        st.just(True),
    ),
    st.tuples(
        st.sampled_from([None, "application/octet-stream", "text/plain", "application/json"]),
        st.binary(min_size=1, max_size=40),
        st.just(True),
    ),
    st.tuples(
        st.sampled_from(["text/plain; charset=utf-8", "application/xml", "text/csv"]),
        NON_EMPTY,
        st.just(True),
    ),
)


@st.composite
def valid_events(draw: st.DrawFn) -> CloudEvent:
    attributes: dict[str, AttributeValue] = {
        "specversion": "1.0",
        "id": draw(NON_EMPTY),
        "type": draw(NON_EMPTY),
        "source": draw(URI_REFERENCES),
    }
    if draw(st.booleans()):
        attributes["time"] = draw(TIMESTAMPS)
    if draw(st.booleans()):
        attributes["subject"] = draw(NON_EMPTY)
    if draw(st.booleans()):
        attributes["dataschema"] = "https://example.com/schema#v1"
    attributes.update(draw(st.dictionaries(EXTENSION_NAMES, EXTENSION_VALUES, max_size=4)))
    content_type, data, has_data = draw(DATA)
    if content_type is not None:
        attributes["datacontenttype"] = content_type
    return CloudEvent.create(attributes, data, has_data=has_data)


# Text as a route's events carry it: mostly safe as a header value as it is, now and then
# a space, a quote, a percent sign or a non-ASCII letter.
_SAFE = st.text(st.sampled_from("abz09-./:_~!#$&'()*+,;=?@[]^`{|}"), min_size=1, max_size=20)
_UNSAFE = st.text(st.sampled_from('ab %"\u00e9'), min_size=1, max_size=4)
SAFE_TEXT = st.integers(0, 9).flatmap(lambda n: _UNSAFE if n == 0 else _SAFE)
# Mostly the data of a received JSON message or bytes; now and then any other kind.
USUAL_DATA = st.integers(0, 3).flatmap(lambda n: DATA if n == 0 else st.tuples(
    st.sampled_from([None, "application/json"]), JSON_VALUES | st.binary(min_size=1),
    st.just(True)))


@st.composite
def usual_events(draw: st.DrawFn) -> CloudEvent:
    """Valid events of the kinds routes render: text attributes, a `time`, sometimes a
    `partitionkey` or typed extensions, every kind of data `valid_events` has."""
    attributes: dict[str, AttributeValue] = {
        "specversion": "1.0", "type": draw(SAFE_TEXT),
        "source": draw(st.sampled_from(["/stores/1000", "urn:x:y", "/a%20b", "https://h/p"])),
        "id": draw(SAFE_TEXT)}
    if draw(st.booleans()):
        attributes["time"] = draw(TIMESTAMPS)
    if draw(st.booleans()):
        attributes["partitionkey"] = draw(SAFE_TEXT)
    attributes.update(draw(st.dictionaries(
        EXTENSION_NAMES, SAFE_TEXT | st.booleans() | INT32 | st.binary(max_size=8),
        max_size=2)))
    content_type, data, has_data = draw(USUAL_DATA)
    if content_type is not None:
        attributes["datacontenttype"] = content_type
    return CloudEvent.create(attributes, data, has_data=has_data)


# -- hostile records ----------------------------------------------------------------------------
PROTOCOLS = st.sampled_from([HTTP, KAFKA, MQTT5, MQTT311, AMQP, NATS])
CONTENT_TYPES = st.one_of(
    st.sampled_from(
        [
            "application/cloudevents+json",
            "APPLICATION/CLOUDEVENTS-BATCH+JSON",
            "application/cloudevents+avro",
            "application/json",
            "text/plain",
            "",
        ]
    ),
    st.text(max_size=20),
)
HEADER_NAMES = st.one_of(
    st.sampled_from(
        [
            "ce-specversion",
            "CE-ID",
            "ce-source",
            "ce-type",
            "ce-time",
            "ce-datacontenttype",
            "ce_specversion",
            "ce_id",
            "ce_type",
            "ce_source",
            "ce_time",
            "content-type",
            "Content-Type",
            "specversion",
            "id",
            "type",
            "source",
            "time",
            "ce-x",
            "datacontenttype",
        ]
    ),
    st.text(max_size=12),
)
HEADER_VALUES = st.one_of(
    st.sampled_from(["1.0", "x", "/s", "2018-04-05T17:31:00Z", "%E2", '"q', "text/plain"]),
    st.text(max_size=20),
)
# Records hold JSON values, so floats are finite (NaN is covered by its own test).
ANY_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=8,
)
CE_LIKE_BODY = st.fixed_dictionaries(
    {"specversion": st.sampled_from(["1.0", "0.3", 1]), "id": ANY_JSON},
    optional={
        "type": ANY_JSON,
        "source": ANY_JSON,
        "time": st.one_of(st.text(max_size=25), ANY_JSON),
        "data": ANY_JSON,
        "data_base64": ANY_JSON,
        "ext": ANY_JSON,
    },
)
AMQP_KEYS = st.one_of(
    st.sampled_from(
        [
            "cloudEvents_specversion",
            "cloudEvents:specversion",
            "cloudEvents_id",
            "cloudEvents:id",
            "cloudEvents_type",
            "cloudEvents_source",
            "cloudEvents_time",
            "cloudEvents_datacontenttype",
        ]
    ),
    st.text(max_size=12),
)


@st.composite
def hostile_records(draw: st.DrawFn) -> NativeMessage:
    protocol = draw(PROTOCOLS)
    pairs = draw(
        st.lists(st.fixed_dictionaries({"name": HEADER_NAMES, "value": HEADER_VALUES}), max_size=8)
    )
    fields: dict[str, Any] = {}
    content_type = draw(st.one_of(st.none(), CONTENT_TYPES))
    if protocol in (HTTP, KAFKA, NATS):
        if content_type is not None:
            pairs.append({"name": "content-type", "value": content_type})
        fields["headers"] = pairs
    elif protocol == MQTT5:
        fields["user_properties"] = pairs
        if content_type is not None:
            fields["content_type"] = content_type
    elif protocol == AMQP:
        fields["application-properties"] = draw(st.dictionaries(AMQP_KEYS, ANY_JSON, max_size=8))
        if content_type is not None:
            fields["properties"] = {"content-type": content_type}
    body = draw(
        st.one_of(
            st.none(),
            st.binary(max_size=40),
            CE_LIKE_BODY.map(lambda d: ("json", d)),
            st.lists(CE_LIKE_BODY, max_size=2).map(lambda d: ("json", d)),
            ANY_JSON.map(lambda d: ("json", d)),
            CE_LIKE_BODY.map(lambda d: ("text", d)),
        )
    )
    if body is None:
        return NativeMessage(protocol, fields)
    if isinstance(body, bytes):
        return NativeMessage(protocol, fields, payload=body)
    kind, value = body
    if kind == "json":
        return NativeMessage(protocol, fields, data=value)
    import json

    return NativeMessage(protocol, fields, payload=json.dumps(value).encode())


PAIR_FIELDS = ("headers", "user_properties")


@st.composite
def mutated_records(draw: st.DrawFn) -> NativeMessage:
    """A valid event's record with a few random edits: mostly valid, sometimes not."""
    from gateway.cloudevents.bindings import encode

    event = draw(valid_events())
    protocol = draw(PROTOCOLS)
    mode = "structured" if protocol == MQTT311 else draw(st.sampled_from(["binary", "structured"]))
    obj: dict[str, Any] = encode(event, protocol, mode).to_json()  # type: ignore[arg-type]
    for _ in range(draw(st.integers(min_value=0, max_value=3))):
        action = draw(st.sampled_from(["drop", "value", "add", "body", "props", "none"]))
        pairs = next((obj[f] for f in PAIR_FIELDS if isinstance(obj.get(f), list)), None)
        if action == "drop" and pairs:
            del pairs[draw(st.integers(min_value=0, max_value=len(pairs) - 1))]
        elif action == "value" and pairs:
            index = draw(st.integers(min_value=0, max_value=len(pairs) - 1))
            pairs[index]["value"] = draw(HEADER_VALUES)
        elif action == "add" and pairs is not None:
            pairs.append({"name": draw(HEADER_NAMES), "value": draw(HEADER_VALUES)})
        elif action == "body":
            obj.pop("data", None)
            obj.pop("data_base64", None)
            obj["data"] = draw(st.one_of(ANY_JSON, CE_LIKE_BODY))
        elif action == "props" and isinstance(obj.get("application-properties"), dict):
            obj["application-properties"][draw(AMQP_KEYS)] = draw(ANY_JSON)
    return NativeMessage.from_json(obj)
