"""Whether a producer holds records back so that more share a request: part of the
producer contract, optional.

A producer that lingers (Kafka's `linger_ms`) waits a little for more records before it
sends a batch. That pays when records keep coming: a stream read from a broker fills
the batch while it waits, and fewer, larger requests cost the broker less (measured:
an AMQP -> Kafka route's Kafka CPU 27 -> 41 us per message without the wait). It does
not pay where each sender waits for its own message before it sends the next (an HTTP
ingress, a request-reply route): once the waiting senders' records are in, nothing more
comes until they are answered, so the whole wait is added to every sender's round trip
and, for a fixed number of senders, taken from the throughput (measured with the
passthrough harness on HTTP -> Kafka, 32 senders: bench/README.md, "twelfth round").

The route tells its outputs which case it is (`for_waiting_senders`); an option the
operator set on the endpoint still wins.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from gateway.ports._optional import tell


@runtime_checkable
class Lingers(Protocol):
    """A producer that waits briefly for more records before it sends a batch."""

    def for_waiting_senders(self) -> None:
        """From the next connection on: the records come from senders that each wait for
        their message's settlement; wait only as long as such a burst takes to arrive,
        unless the endpoint's configuration says how long to wait."""
        ...


def for_waiting_senders(producer: object) -> bool:
    """Tell `producer` that its senders wait, if it lingers; whether it does."""
    return tell(producer, "for_waiting_senders")
