"""One output of a route: an endpoint's producer and how the route renders for it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from gateway.definitions.model import MessageDefinition
from gateway.envelope.outgoing import Deliver
from gateway.json.values import JSON
from gateway.ports import Producer


@dataclass
class Output:
    endpoint_id: str
    protocol: str
    producer: Producer
    # Fields every outgoing record gets unless it has them (topic, subject, path ...);
    # string values may hold placeholders filled from the match context.
    defaults: Mapping[str, JSON] = field(default_factory=dict)
    deliver: Deliver = "cloudevent"
    definitions: Sequence[MessageDefinition] = ()  # for deliver: native


__all__ = ["Output"]
