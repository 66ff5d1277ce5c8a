"""Request-reply: the records a sender is handed, in the sender's protocol.

- `reply_record`: the service's answer translated into the sender's protocol (a
  CloudEvent re-encoded as a binary CloudEvent, anything else its body and content type);
- `without_status`: an answer without the status the service answered with (HTTP), which
  reaches the sender only through a reply definition that says so;
- `problem_event`: how a sender without a status (NATS, MQTT 5; a member of an HTTP
  batch) is told of a failure: a CloudEvent whose data is the RFC 9457 problem an HTTP
  sender gets;
- `answer_event`: an answer as a CloudEvent (a member of an HTTP batch answer).

Where a protocol carries an answer's status is its profile's fact
(`RequestReply.status`), read by `status_field`.
"""

from __future__ import annotations

import uuid
from http import HTTPStatus
from typing import Any

from gateway.cloudevents.bindings import decode, encode
from gateway.cloudevents.errors import CloudEventError
from gateway.cloudevents.event import CloudEvent
from gateway.json.values import JSON
from gateway.ports import NO_REPLY_PREFIX
from gateway.protocols import find_profile
from gateway.record import NativeMessage

#: The CloudEvents type of the problem a sender is told a failure with (NATS, MQTT 5 with
#: `reply_errors: problem`; a failed member of an HTTP batch). Its data is an RFC 9457
#: problem object, as the HTTP ingress answers it.
PROBLEM_TYPE = "io.xrgw.reply.problem"
PROBLEM_CONTENT_TYPE = "application/problem+json"
#: The CloudEvents type of a native answer (not a CloudEvent, no reply definition made it
#: one) carried as a member of an HTTP batch answer.
ANSWER_TYPE = "io.xrgw.reply"

def reply_record(answer: NativeMessage, protocol: str) -> NativeMessage:
    """`answer` (a record of the service's protocol) as a record of `protocol`, without an
    address: the delivery's answer hook adds it."""
    if answer.protocol == protocol:
        return answer
    try:
        event = decode(answer)
    except CloudEventError:
        event = None
    if event is not None:
        return encode(event, protocol, "binary")
    return native_reply(answer, protocol)


def native_reply(answer: NativeMessage, protocol: str) -> NativeMessage:
    """The answer's body and content type in a record of `protocol`."""
    fields: dict[str, JSON] = {}
    content_type = answer.content_type
    prof = find_profile(protocol)
    ref = None if prof is None else prof.content_type
    if content_type is not None and ref is not None:
        if ref.name is None:
            fields[ref.field] = content_type
        else:
            fields[ref.field] = [{"name": ref.name, "value": content_type}]
    return NativeMessage(protocol, fields, answer.data, answer.payload, None, answer.raw)


def status_field(protocol: str) -> str | None:
    """Where an answer of `protocol` carries its status (HTTP `status`); None: nowhere."""
    prof = find_profile(protocol)
    how = None if prof is None else prof.request_reply
    return None if how is None else how.status


def problem_status(why: str) -> int:
    """The HTTP status of a failure told with `why`: 504 when no answer came in time,
    else 502 (the gateway got no usable answer from the service)."""
    return 504 if why.startswith(NO_REPLY_PREFIX) else 502


def problem_event(why: str, source: str) -> CloudEvent:
    """The problem CloudEvent a sender is told a failure with: an RFC 9457 problem object
    (`about:blank`, the status's phrase as title) as its data, as the HTTP ingress
    answers it."""
    status = problem_status(why)
    problem: dict[str, JSON] = {"type": "about:blank", "title": HTTPStatus(status).phrase,
                                "status": status, "detail": why}
    return CloudEvent.create({"specversion": "1.0", "id": uuid.uuid4().hex,
                              "source": source, "type": PROBLEM_TYPE,
                              "datacontenttype": PROBLEM_CONTENT_TYPE}, problem)


def answer_event(answer: NativeMessage, source: str) -> CloudEvent:
    """`answer` as a CloudEvent: itself when it is one, else its body in one of type
    `ANSWER_TYPE` (a member of an HTTP batch answer)."""
    try:
        event = decode(answer)
    except CloudEventError:
        event = None
    if event is not None:
        return event
    attributes: dict[str, Any] = {"specversion": "1.0", "id": uuid.uuid4().hex,
                                  "source": source, "type": ANSWER_TYPE}
    content_type = answer.content_type
    if content_type is not None:
        attributes["datacontenttype"] = content_type
    try:
        if answer.has_json_data:
            return CloudEvent.create(attributes, answer.data, has_data=True)
        return CloudEvent.create(attributes, answer.payload)
    except CloudEventError:  # a content type that is no media type: the bytes, untyped
        attributes.pop("datacontenttype", None)
        return CloudEvent.create(attributes, answer.body_bytes() or None)


def without_status(record: NativeMessage) -> NativeMessage:
    """`record` without the status the service answered with (an HTTP egress call's
    2xx): the sender gets the status of its reply definition, or the default (200)."""
    status = status_field(record.protocol)
    if status is None or status not in record.fields:
        return record
    return record.replace_fields({k: v for k, v in record.fields.items() if k != status})


__all__ = ["ANSWER_TYPE", "PROBLEM_CONTENT_TYPE", "PROBLEM_TYPE", "answer_event",
           "native_reply", "problem_event", "problem_status", "reply_record",
           "status_field", "without_status"]
