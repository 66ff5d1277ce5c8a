"""Kafka: the record's coordinates identify it; headers are a list of pairs."""

from __future__ import annotations

from gateway.protocols.profile import (
    DefinitionRules,
    EndpointRules,
    Exclusion,
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

KAFKA = "KAFKA"

#: The default header names of request-reply (Spring Kafka's `KafkaHeaders.REPLY_TOPIC`,
#: `CORRELATION_ID`, `REPLY_PARTITION`).
KAFKA_REPLY_TOPIC = "kafka_replyTopic"
KAFKA_CORRELATION_ID = "kafka_correlationId"
KAFKA_REPLY_PARTITION = "kafka_replyPartition"

_LISTENER = ("a Kafka listener name, not an address scheme: write kafka://HOST:PORT and "
             "choose TLS with a tls block, SASL with username and password")
# One URI carries every bootstrap server; the security protocol comes from the tls block
# and the credentials (or the security_protocol option), never from a scheme.
_URIS = UriSchemes(("kafka",), "kafka://host1:9092,host2:9092", server_list=True,
                   unsupported=dict.fromkeys(
                       ("plaintext", "ssl", "sasl_plaintext", "sasl_ssl"), _LISTENER))
_HEADERS = FieldRef("headers")

KAFKA_OBSERVING = Observing(
    "a consumer group of its own (`xrgw-observe-<endpoint>-<random>`), starting at the "
    "latest offset unless `observeoffset: earliest`; the real consumers' groups and offsets "
    "are untouched")

KAFKA_PROFILE = ProtocolProfile(
    name=KAFKA,
    family=KAFKA,
    version="",
    spelling=Spelling((KAFKA,)),
    definitions=DefinitionRules(
        (
            FieldSpec("topic", "scalar", "string"),
            FieldSpec("partition", "scalar", "integer"),
            FieldSpec("key", "scalar", "string"),
            FieldSpec("key_base64", "scalar", "binary"),
            FieldSpec("headers", "map", "string"),
        ),
        ranges={("partition", None): (0, 2**31 - 1)},
        exclusive=(Exclusion("key", "key_base64",
                             "keep only one: key (UTF-8 text) or key_base64 (binary)"),),
    ),
    record_fields={
        "topic": "string",
        "partition": "integer",
        "offset": "integer",
        "key": "string",
        "key_base64": "string",
        "headers": "pairs",
        "timestamp": "integer",
    },
    endpoint=EndpointRules(
        ("topic", "acks", "key", "partition", "consumergroup", "headers", "keyserializer",
         "valueserializer", "autooffsetreset", "enableautocommit"),
        _URIS,
        output_fields=(("topic", "topic"), ("key", "key"), ("partition", "partition")),
        subscriber_consumer=False,
    ),
    address=FieldRef("topic"),
    ordering=Ordering(source_key=(FieldRef("key"),)),
    partition_key=FieldRef("key"),
    # Spring Kafka's ReplyingKafkaTemplate convention (header names configurable per
    # endpoint: reply_topic_header, correlation_header); an output reads its reply_topic.
    request_reply=RequestReply("a reply-topic header and a correlation header",
                               output_needs=("reply_topic",),
                               reply_to=FieldRef("headers", KAFKA_REPLY_TOPIC),
                               correlation=FieldRef("headers", KAFKA_CORRELATION_ID)),
    redelivery=Redelivery("the consumer seeks the partition back to the nacked offset"),
    identity=Identity("kafka", (IdentityPart(FieldRef("topic")),
                                IdentityPart(FieldRef("partition")),
                                IdentityPart(FieldRef("offset")))),
    metadata=Metadata("headers", "pairs", ignore_case=True, text_values=True),
    content_type=FieldRef("headers", "content-type"),
    observe=KAFKA_OBSERVING,
)
