"""CloudEvents 1.0 for the gateway: the event type, strict validation, the JSON format,
and the HTTP, Kafka, MQTT, AMQP and NATS protocol bindings over native message records.

Modules, one job each:
  event        CloudEvent (the SDK's v1 type; strict `create`, unchecked `trusted`)
  validation   the spec's rules, reported as lists of "attribute: problem" messages
  typesystem   native values <-> canonical strings, typed extensions
  timestamps   strict RFC 3339 parse/format
  uri          RFC 3986 URI / URI-reference syntax
  mediatype    media type syntax and classification (JSON family, text, CloudEvents)
  datacodec    event data <-> JSON members and binary-mode bodies; content equality
  jsonformat   application/cloudevents+json and the batch format
  headercodec  percent-encoding of HTTP/NATS header values
  bindings     detect/decode/encode per protocol, with a dispatcher
  errors       CloudEventError and its reason codes
"""

from gateway.cloudevents.bindings import (
    decode,
    decode_batch,
    detect_mode,
    encode,
    encode_batch,
    with_extension,
)
from gateway.cloudevents.errors import CloudEventError
from gateway.cloudevents.event import CloudEvent
from gateway.cloudevents.jsonformat import (
    event_to_json,
    parse_batch,
    parse_event,
    serialize_batch,
    serialize_event,
)
from gateway.cloudevents.timestamps import format_rfc3339, parse_rfc3339
from gateway.cloudevents.typesystem import AttributeType, AttributeValue

__all__ = [
    "AttributeType",
    "AttributeValue",
    "CloudEvent",
    "CloudEventError",
    "decode",
    "decode_batch",
    "detect_mode",
    "encode",
    "encode_batch",
    "event_to_json",
    "format_rfc3339",
    "parse_batch",
    "parse_event",
    "parse_rfc3339",
    "serialize_batch",
    "serialize_event",
    "with_extension",
]
