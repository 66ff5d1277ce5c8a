"""MQTT 5.0 and 3.1.1: one family, so definitions of either apply to records of both."""

from __future__ import annotations

from gateway.protocols.profile import (
    DefinitionRules,
    EndpointRules,
    FieldRef,
    FieldSpec,
    Identity,
    IdentityPart,
    Metadata,
    Observing,
    Ordering,
    ProtocolProfile,
    Redelivery,
    RequestReply,
    Spelling,
    UriSchemes,
)

MQTT5 = "MQTT/5.0"
MQTT311 = "MQTT/3.1.1"
MQTT_FAMILY = "MQTT"

_U32 = 2**32 - 1

_FIELDS = (
    FieldSpec("topic_name", "scalar", "uritemplate"),
    FieldSpec("qos", "scalar", "integer"),
    FieldSpec("retain", "scalar", "boolean"),
)
_FIELDS_5_ONLY = (
    FieldSpec("payload_format", "scalar", "integer"),
    FieldSpec("message_expiry_interval", "scalar", "integer"),
    FieldSpec("response_topic", "scalar", "uritemplate"),
    FieldSpec("correlation_data", "scalar", "binary"),
    FieldSpec("content_type", "scalar", "symbol"),
    FieldSpec("user_properties", "list", "string"),
)
_RENAMES = {
    "topic": "topic_name",
    "topic-name": "topic_name",
    "payload_format_indicator": "payload_format",
    "payload-format-indicator": "payload_format",
}
_OPTIONS_311 = ("topic", "topicfilter", "qos", "retain", "willtopic", "willmessage",
                "cleansession")
_OPTIONS_5 = ("topic", "topicfilter", "qos", "retain", "willtopic", "willmessage", "cleanstart",
              "cleansession", "sessionexpiryinterval", "sharedsubscriptiongroup", "nolocal",
              "retainaspublished", "retainhandling")
_WEBSOCKETS = "MQTT over websockets is not implemented"
# The spec's informal tcp:// (plain) and ssl:// (TLS) mean the same as mqtt:// and mqtts://.
_URIS = UriSchemes(("mqtt", "mqtts", "tcp", "ssl"), "mqtt://host:1883", tls=("mqtts", "ssl"),
                   unsupported={"ws": _WEBSOCKETS, "wss": _WEBSOCKETS})


def _endpoint(options: tuple[str, ...]) -> EndpointRules:
    return EndpointRules(options, _URIS, option_ranges={"qos": (0, 2)},
                         output_fields=(("topic", "topic_name"),))


MQTT_OBSERVING = Observing(
    "a plain (never shared) subscription on a clean session under a client id of its own: "
    "the broker gives it a copy of every message")

MQTT_REDELIVERY = Redelivery(
    "the session: the adapter drops the connection and the broker sends every "
    "unacknowledged QoS 1 message again on the next (cleanstart off, the default)")

MQTT5_PROFILE = ProtocolProfile(
    name=MQTT5,
    family=MQTT_FAMILY,
    version="5.0",
    spelling=Spelling((MQTT_FAMILY,), ("", "5", "5.0")),
    definitions=DefinitionRules(
        _FIELDS + _FIELDS_5_ONLY,
        ranges={("qos", None): (0, 2), ("payload_format", None): (0, 1),
                ("message_expiry_interval", None): (0, _U32)},
        renames=_RENAMES,
        nested=("properties",),  # MQTT has no `properties` field; xrcg nests options there
    ),
    record_fields={
        "topic_name": "string",
        "qos": "integer",
        "retain": "boolean",
        "payload_format": "integer",
        "message_expiry_interval": "integer",
        "response_topic": "string",
        "correlation_data": "string",
        "content_type": "string",
        "user_properties": "pairs",
    },
    endpoint=_endpoint(_OPTIONS_5),
    address=FieldRef("topic_name"),
    ordering=Ordering(source_key=(FieldRef("topic_name"),)),
    identity=Identity("mqtt", (IdentityPart(FieldRef("topic_name"), "optional"),
                               IdentityPart(FieldRef("correlation_data"), "non-empty"))),
    metadata=Metadata("user_properties", "pairs"),
    content_type=FieldRef("content_type"),
    request_reply=RequestReply("a response topic and correlation data",
                               reply_to=FieldRef("response_topic"),
                               correlation=FieldRef("correlation_data")),
    redelivery=MQTT_REDELIVERY,
    observe=MQTT_OBSERVING,
)

MQTT311_PROFILE = ProtocolProfile(
    name=MQTT311,
    family=MQTT_FAMILY,
    version="3.1.1",
    spelling=Spelling((MQTT_FAMILY,), ("3.1.1", "3.1", "3")),
    definitions=DefinitionRules(_FIELDS, ranges={("qos", None): (0, 2)}, renames=_RENAMES,
                                nested=("properties",)),
    record_fields={"topic_name": "string", "qos": "integer", "retain": "boolean"},
    endpoint=_endpoint(_OPTIONS_311),
    address=FieldRef("topic_name"),
    ordering=Ordering(source_key=(FieldRef("topic_name"),)),
    # No metadata at all: no identity, no content type, no binary CloudEvents; a dead
    # letter becomes a JSON document (`gateway/deadletter/format.py`).
    binary_mode=False,
    redelivery=MQTT_REDELIVERY,
    observe=MQTT_OBSERVING,
)
