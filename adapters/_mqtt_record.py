"""MQTT PUBLISH <-> native message record, both directions, no I/O.

Body rule (receive):
* empty payload -> no body;
* a content type is given (MQTT 5): JSON-family types (`application/json`, `text/json`,
  `*/*+json`) become `data` when the payload parses; anything else stays `payload` bytes,
  so a declared non-JSON type is never reinterpreted;
* no content type (always so in 3.1.1): `data` only when the payload parses as a JSON
  object or array. Bare scalars (`21.5`, `true`, `"x"`) stay bytes: sensors send those as
  plain text, and guessing would change the type a definition's schema sees.
A JSON-family payload that does not parse stays bytes (the matcher reports it, nothing is
lost here).

`correlation_data` is binary in MQTT but a string in the record: valid UTF-8 is kept as
text, other bytes become base64 (documented lossy spot; the producer encodes UTF-8).
"""

from __future__ import annotations

import base64

import paho.mqtt.client as paho
from paho.mqtt.packettypes import PacketTypes

from adapters._paho_loop import PublishArgs, new_properties
from gateway.jsontypes import JSON
from gateway.protocols import MQTT5, MQTT311
from gateway.record import NativeMessage
from gateway.record import is_json_media_type as is_json_type

__all__ = ["PublishArgs", "is_json_type", "to_publish", "to_record"]

#: MQTT 5 PUBLISH properties copied as they are: (paho attribute, record field).
_SIMPLE_PROPERTIES = (
    ("PayloadFormatIndicator", "payload_format"),
    ("MessageExpiryInterval", "message_expiry_interval"),
    ("ResponseTopic", "response_topic"),
    ("ContentType", "content_type"),
)


def _text(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return base64.b64encode(raw).decode("ascii")


def to_record(message: paho.MQTTMessage, v5: bool, received_at: str | None = None) -> NativeMessage:
    """The record of one received PUBLISH; total (never raises on odd input)."""
    fields: dict[str, JSON] = {
        "topic_name": message.topic,
        "qos": int(message.qos),
        "retain": bool(message.retain),
    }
    content_type: str | None = None
    props = message.properties if v5 else None
    if props is not None:
        # paho keeps the properties present as instance attributes: one dict look-up
        # each instead of a getattr raising AttributeError for every absent one.
        present = vars(props)
        content_type = present.get("ContentType")
        for attr, name in _SIMPLE_PROPERTIES:
            value = present.get(attr)
            if value is not None:
                fields[name] = value
        correlation = present.get("CorrelationData")
        if correlation is not None:
            fields["correlation_data"] = _text(bytes(correlation))
        pairs = present.get("UserProperty")
        if pairs:
            fields["user_properties"] = [{"name": n, "value": v} for n, v in pairs]
    protocol = MQTT5 if v5 else MQTT311
    payload = message.payload
    return NativeMessage.from_wire(
        protocol, fields, payload if type(payload) is bytes else bytes(payload), content_type,
        received_at)


def _int(value: JSON, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def to_publish(record: NativeMessage, v5: bool, default_qos: int,
               default_retain: bool = False) -> PublishArgs:
    """PUBLISH arguments for a record; raises ValueError when it cannot be sent.

    On a 3.1.1 connection the MQTT 5 properties are dropped: the protocol has no place
    for them (the caller chose the protocol version).
    """
    topic = record.get("topic_name")
    if not isinstance(topic, str) or not topic:
        raise ValueError("record has no topic_name")
    qos = _int(record.get("qos"), default_qos)
    if qos not in (0, 1, 2):
        raise ValueError(f"invalid qos {qos}")
    own_retain = record.get("retain")
    retain = own_retain if isinstance(own_retain, bool) else default_retain
    if not v5:
        return PublishArgs(topic, record.body_bytes(), qos, retain, None)
    values: dict[str, object] = {}
    content_type = record.get("content_type")
    if isinstance(content_type, str):
        values["ContentType"] = content_type
    elif record.has_json_data:
        # Say so, so that a consumer (ours included) reads the body back as JSON.
        values["ContentType"] = "application/json"
    for name, attr in (
        ("payload_format", "PayloadFormatIndicator"),
        ("message_expiry_interval", "MessageExpiryInterval"),
    ):
        value = record.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            values[attr] = value
    response_topic = record.get("response_topic")
    if isinstance(response_topic, str):
        values["ResponseTopic"] = response_topic
    correlation = record.get("correlation_data")
    if isinstance(correlation, str):
        values["CorrelationData"] = correlation.encode()
    pairs = record.pairs("user_properties")
    if pairs:
        values["UserProperty"] = pairs
    props = new_properties(PacketTypes.PUBLISH, **values) if values else None
    return PublishArgs(topic, record.body_bytes(), qos, retain, props)
