"""The answers of an AMQP 1.0 source's requests (request-reply, `reply.py`): sent to
each request's reply-to with its correlation, through a producer of the consumer's own
endpoint settings, connected at the first answer."""

from __future__ import annotations

import asyncio

from adapters.amqp.producer import AmqpProducer
from adapters.amqp.reply import answer_target, answered
from gateway.ports import Answer, EndpointSettings, NotConnected
from gateway.record import NativeMessage


class AnswerSender:
    """The answers of an AMQP source's requests, sent through a producer of the same
    endpoint settings, connected at the first answer."""

    def __init__(self, settings: EndpointSettings) -> None:
        self._settings = settings
        self._producer: AmqpProducer | None = None
        self._connecting = asyncio.Lock()

    def answerer(self, request: NativeMessage) -> Answer | None:
        """The answer hook of a received request: None unless it names a reply-to."""
        properties = request.fields.get("properties")
        if not isinstance(properties, dict):
            return None
        reply_to = properties.get("reply-to")
        if not isinstance(reply_to, str) or not reply_to:
            return None
        correlation = properties.get("correlation-id")
        if correlation is None:
            correlation = properties.get("message-id")
        target = answer_target(reply_to)

        async def answer(reply: NativeMessage | None, why: str) -> None:
            # No answer -> nothing is sent: the requester's own timeout tells it.
            if reply is not None:
                await self._send(answered(reply, target, correlation))

        return answer

    async def _send(self, record: NativeMessage) -> None:
        async with self._connecting:
            producer = self._producer
            if producer is None:
                producer = AmqpProducer(self._settings)
                await producer.connect()
                self._producer = producer
        [outcome] = await (await producer.submit([record]))
        if not outcome.delivered:
            raise NotConnected(outcome.reason or "the answer was not accepted")

    async def aclose(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            await producer.aclose()
