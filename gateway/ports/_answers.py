"""Whether a consumer makes answer hooks for the senders that wait for a reply: part of
the consumer contract, optional.

A consumer gives each delivery whose sender names where to answer (a Kafka reply-topic
header, an MQTT 5 response topic) an `Answer` hook, which only a request-reply route
(`reply: true`) ever calls (`runtime/reply.py`). Finding out costs per message: the
Kafka consumer looked through every record's headers for the reply topic, 2% of a
Kafka -> NATS route's instructions per message (`bench_instructions --whole`, when it
stopped: `451d13f`). So a route that never answers tells its consumer so, and the
consumer stops looking. A consumer that cannot tell still works: its hooks go unused.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from gateway.ports._optional import tell


@runtime_checkable
class AnswersSenders(Protocol):
    """A consumer that makes answer hooks for senders waiting for a reply."""

    def answer_nobody(self) -> None:
        """From now on, make no answer hooks: the route never answers a sender."""
        ...


def answer_nobody(consumer: object) -> bool:
    """Tell `consumer` that nobody is answered, if it makes answer hooks; whether it did."""
    return tell(consumer, "answer_nobody")
