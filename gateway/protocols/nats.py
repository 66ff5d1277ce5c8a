"""NATS core and JetStream: subjects, headers, and the JetStream delivery identity."""

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

NATS = "NATS"

_WEBSOCKETS = "NATS over websockets is not implemented"

NATS_OBSERVING = Observing(
    "core: a plain subscription (no queue group); JetStream: an ephemeral push consumer "
    "delivering new messages with ack policy none, so nothing durable is acknowledged")

NATS_PROFILE = ProtocolProfile(
    name=NATS,
    family=NATS,
    version="",
    spelling=Spelling((NATS,)),
    definitions=DefinitionRules(
        (
            FieldSpec("subject", "scalar", "uritemplate", separator="."),
            FieldSpec("reply-to", "scalar", "uritemplate"),
            FieldSpec("headers", "list", "string"),
        ),
        renames={"reply": "reply-to", "reply_to": "reply-to"},
        quiet_renames=frozenset({"reply"}),  # the spec's prose says reply, its model reply-to
    ),
    record_fields={
        "subject": "string",
        "reply-to": "string",
        "headers": "pairs",
        # JetStream delivery identity (gateway extension, used for deterministic ids).
        "stream": "string",
        "sequence": "integer",
    },
    endpoint=EndpointRules(
        ("subject", "subjectfilter", "queuegroup"),
        UriSchemes(("nats", "tls"), "nats://host:4222", tls=("tls",),
                   unsupported={"ws": _WEBSOCKETS, "wss": _WEBSOCKETS}),
        output_fields=(("subject", "subject"),),
    ),
    address=FieldRef("subject"),
    ordering=Ordering(source_key=(FieldRef("subject"),)),
    identity=Identity("nats", (IdentityPart(FieldRef("stream")),
                               IdentityPart(FieldRef("sequence")))),
    metadata=Metadata("headers", "pairs", ignore_case=True, text_values=True),
    content_type=FieldRef("headers", "content-type"),
    request_reply=RequestReply("a reply subject", not_with=("stream", "jetstream"),
                               reply_to=FieldRef("reply-to")),
    redelivery=Redelivery("JetStream: a -NAK, the server delivers it again after "
                          "`nak_delay`", needs=("stream",)),
    observe=NATS_OBSERVING,
)
