"""AMQP 1.0: metadata in sections; the message address is `properties.subject`."""

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
    ValueFormat,
)

AMQP = "AMQP/1.0"

_U32 = 2**32 - 1

_PROPERTIES = (
    ("message-id", "any"),
    ("user-id", "binary"),
    ("to", "uritemplate"),
    ("subject", "string"),
    ("reply-to", "uritemplate"),
    ("correlation-id", "string"),
    ("content-type", "symbol"),
    ("content-encoding", "symbol"),
    ("absolute-expiry-time", "timestamp"),
    ("creation-time", "timestamp"),
    ("group-id", "string"),
    ("group-sequence", "integer"),
    ("reply-to-group-id", "uritemplate"),
)
_HEADER = (
    ("durable", "boolean"),
    ("priority", "integer"),
    ("ttl", "integer"),
    ("first-acquirer", "boolean"),
    ("delivery-count", "integer"),
)
# rc2: the names of the open maps "MUST be of type symbol": an AMQP symbol, ASCII (the
# spec's own example names one `my-application-property`, AMQP's own `x-opt-*`), so
# printable ASCII without spaces, not the Property Definitions' alphanumerics.
_SYMBOL_NAME = ValueFormat(r"[\x21-\x7e]+\Z", "an AMQP symbol",
                           "use printable ASCII characters without spaces, e.g. "
                           "my-application-property")
_SECTIONS = ("properties", "application-properties", "message-annotations",
             "delivery-annotations", "header", "footer")

AMQP_OBSERVING = Observing(
    "", "an AMQP 1.0 receiver takes (moves) the messages of the node it attaches to, and "
    "RabbitMQ (the broker xrgw is tested with) has no non-destructive source on queues: "
    "its AMQP 1.0 plugin answers a copy distribution mode at attach yet still consumes "
    "the messages, so observing would take them from the real consumers")

AMQP_PROFILE = ProtocolProfile(
    name=AMQP,
    family=AMQP,
    version="1.0",
    spelling=Spelling(("AMQP",), ("", "1.0", "1")),
    definitions=DefinitionRules(
        (
            FieldSpec("properties", "section", members=_PROPERTIES),
            FieldSpec("application-properties", "section", name_format=_SYMBOL_NAME),
            FieldSpec("message-annotations", "section", name_format=_SYMBOL_NAME),
            FieldSpec("delivery-annotations", "section", name_format=_SYMBOL_NAME),
            FieldSpec("header", "section", members=_HEADER),
            FieldSpec("footer", "section", name_format=_SYMBOL_NAME),
        ),
        ranges={("header", "priority"): (0, 255), ("header", "ttl"): (0, _U32),
                ("header", "delivery-count"): (0, _U32),
                ("properties", "group-sequence"): (0, _U32)},
    ),
    record_fields=dict.fromkeys(_SECTIONS, "object"),
    endpoint=EndpointRules(
        ("node", "durable", "link-properties", "connection-properties", "distribution-mode",
         "capabilities", "source-filters", "dynamic", "terminus-durability", "expiry-policy",
         "timeout", "sender-settle-mode", "receiver-settle-mode"),
        UriSchemes(("amqp", "amqps"), "amqp://host:5672", tls=("amqps",)),
        aliases={"address": "node"},
    ),
    address=FieldRef("properties", "subject"),
    ordering=Ordering(source_key=(FieldRef("properties", "group-id"),
                                          FieldRef("properties", "subject"))),
    identity=Identity("amqp", (IdentityPart(FieldRef("properties", "message-id")),)),
    metadata=Metadata("application-properties", "section"),
    content_type=FieldRef("properties", "content-type"),
    # The message format's own fields; an answer carries the request's correlation-id
    # (its message-id when it has none). An output listens on a configured node:
    # RabbitMQ 3.x has no dynamic (broker-named) nodes.
    request_reply=RequestReply("the reply-to and correlation-id properties",
                               output_needs=("reply_address",),
                               reply_to=FieldRef("properties", "reply-to"),
                               correlation=FieldRef("properties", "correlation-id")),
    redelivery=Redelivery("released: the broker delivers it again on the same link"),
    observe=AMQP_OBSERVING,
)
