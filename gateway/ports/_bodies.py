"""Whether a consumer parses the bodies it receives at once: part of the consumer
contract, optional.

Every received body is tried as JSON (the body rule, `NativeMessage.from_wire`). Parsed
as it arrives, the bytes are still in the processor's caches; parsed later, when the
route first reads the value, they are not, and that parse cost a Kafka -> NATS route
more than the early one (measured with the passthrough harness: bench/README). So an
adapter parses at once unless the route tells it that its fast path may never read the
values: a route whose every output takes a received body as its bytes (binary
CloudEvents to Kafka or NATS, `runtime/wirepath.py`). Its records with a body declared
JSON then parse when first read (`ReceivedRecord`), which a definition that reads the
body, a dead letter or the tap still may; a body with no content type is parsed at once
all the same, as only parsing tells whether it is JSON, and every conversion must know
(`NativeMessage.from_wire`). Every adapter's consumer can (Kafka, NATS, MQTT, AMQP,
HTTP).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from gateway.ports._optional import tell


@runtime_checkable
class DefersBodies(Protocol):
    """A consumer that can leave its bodies unparsed until they are read."""

    def defer_bodies(self) -> None:
        """From now on, make records whose bodies are parsed when first read."""
        ...


def defer_bodies(consumer: object) -> bool:
    """Tell `consumer` to leave its bodies unparsed, if it can; whether it can."""
    return tell(consumer, "defer_bodies")
