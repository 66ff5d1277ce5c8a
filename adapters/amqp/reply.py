"""AMQP 1.0 request-reply with the message format's own fields: a request names the
node to answer to in `properties.reply-to`, and the answer carries the request's
`properties.correlation-id` -- or, when the request has none, its `message-id` (the
convention of JMS and the Qpid / .NET clients: a requester that sets no correlation-id
matches the answer by the id of its request).

As the output (`AmqpProducer.request`): each request gets `reply-to` = the endpoint's
`reply_address` and a correlation token as `correlation-id` (a binary CloudEvent also as
its `correlationid` extension); the producer receives from `reply_address` on its own
connection and hands each answer to the `ReplyTable` by its `correlation-id`. The
address is configured, not dynamic: RabbitMQ 3.x (the tested broker) does not answer a
dynamic receiver attach.

As the source (`answers.AnswerSender`): a received request with `reply-to` gets an `answer`
hook that sends the answer to that node with the request's correlation, through a
producer connection of its own opened at the first answer. The request is settled
(accepted) only after that answer was accepted by the broker, or dead-lettered.

Ids are JSON in a record: a string or ulong correlation comes back as sent; a uuid or
binary one comes back as its text (uuid) or base64 text (binary), a string.
"""

from __future__ import annotations

from gateway.cloudevents import with_extension
from gateway.json.values import JSON
from gateway.ports import CORRELATION_ATTRIBUTE, correlation_of
from gateway.record import NativeMessage

#: The sections an answer keeps (the rest -- header, annotations -- are the service's
#: delivery's, not the answer's).
_KEPT = ("properties", "application-properties")
#: Properties of the service's answer that address it, replaced for the sender.
_ADDRESSING = ("to", "reply-to", "correlation-id", "reply-to-group-id")


def _properties(record: NativeMessage) -> dict[str, JSON]:
    value = record.fields.get("properties")
    return dict(value) if isinstance(value, dict) else {}


def requesting(record: NativeMessage, reply_address: str, token: str) -> NativeMessage:
    """`record` as a request: `reply-to` and `correlation-id` set (replacing its own),
    and the `correlationid` extension when it is a binary CloudEvent."""
    record = with_extension(record, CORRELATION_ATTRIBUTE, token)
    properties = {**_properties(record), "reply-to": reply_address, "correlation-id": token}
    return record.replace_fields({**record.fields, "properties": properties})


def token_of(answer: NativeMessage) -> str | None:
    """The correlation an answer carries: its `correlation-id`, else its `correlationid`
    CloudEvents extension; None when it has neither."""
    value = _properties(answer).get("correlation-id")
    if isinstance(value, str) and value:
        return value
    return correlation_of(answer)


def answer_target(reply_to: str) -> str:
    """Where an answer is sent: the request's reply-to, with RabbitMQ's declaring
    `/queue/NAME` as the non-declaring `/amq/queue/NAME`. The requester's queue exists
    (it receives from it), and declaring it again would fail whenever its durability
    differs from the answer link's terminus (precondition-failed)."""
    if reply_to.startswith("/queue/") and len(reply_to) > len("/queue/"):
        return "/amq/queue/" + reply_to[len("/queue/"):]
    return reply_to


def answered(reply: NativeMessage, target: str, correlation: JSON) -> NativeMessage:
    """The service's `reply` (in AMQP form) addressed to the sender: `to` its reply-to,
    `correlation-id` its request's correlation."""
    fields = {name: value for name, value in reply.fields.items() if name in _KEPT}
    properties = {k: v for k, v in _properties(reply).items() if k not in _ADDRESSING}
    properties["to"] = target
    if correlation is not None:
        properties["correlation-id"] = correlation
    fields["properties"] = properties
    return reply.replace_fields(fields)
