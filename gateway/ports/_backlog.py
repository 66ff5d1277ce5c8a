"""How far a consumer is behind its source: what autoscalers (KEDA, an HPA on external
metrics) scale on. Optional: a consumer whose protocol keeps no backlog (MQTT, core NATS,
HTTP) does not implement `BacklogReporter`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class PartitionLag:
    """Kafka: records of one assigned partition that this member has not settled yet
    (the partition's end offset minus the first offset not yet acknowledged)."""

    topic: str
    partition: int
    messages: int


@dataclass(frozen=True)
class StreamPending:
    """JetStream: messages of a durable consumer not yet acknowledged (waiting to be
    delivered plus delivered and unacknowledged), as the server counts them."""

    stream: str
    consumer: str
    messages: int


Backlog = PartitionLag | StreamPending


@runtime_checkable
class BacklogReporter(Protocol):
    """A consumer that can say how much is waiting for it at the source."""

    async def backlog(self) -> Sequence[Backlog]:
        """The current backlog, one entry per partition or durable; raises NotConnected
        when there is no connection to ask on. May ask the broker (a network round trip):
        the caller bounds it with a timeout."""
        ...
