"""How large a message an output takes: part of the producer contract, optional.

A message over a sink's limit can never be delivered there, however often it is sent:
the route dead-letters it as `too-large` before it is sent, instead of retrying it (and
holding the route) or letting the broker close the connection on it. Where the limit
comes from is the adapter's business: NATS `max_payload` from the server's INFO, Kafka
`max_request_size`, MQTT 5 CONNACK Maximum Packet Size (else the protocol's 256 MB), an
HTTP receiver's 413.

Two checks, one cheap and one exact:

- the route compares each rendered record's *body* with `max_message_bytes` (a body over
  the limit is over it whatever the headers add) -- one comparison per record;
- the producer, which has the wire form at hand, refuses what is over the limit once
  headers, topic and framing are counted, with `Outcome.oversize` (also what a receiver's
  own size refusal becomes). The route dead-letters both alike.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class SizeLimited(Protocol):
    """A producer that knows the largest message its sink accepts."""

    @property
    def max_message_bytes(self) -> int | None:
        """The largest message, in bytes as the sink counts them (the body and what the
        protocol adds), the sink takes now; None while unknown (not connected yet)."""
        ...


def size_limit(producer: object) -> int | None:
    """`producer`'s limit, or None when it has none or does not know it."""
    # Not `isinstance(producer, SizeLimited)`: a runtime-checkable Protocol walks its
    # members on every check (~10 µs on 3.11), and the route asks per output per batch.
    limit = getattr(producer, "max_message_bytes", None)
    return limit if isinstance(limit, int) else None
