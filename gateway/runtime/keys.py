"""Partition keys of outputs that partition by key (Kafka), so that order survives to the
consumer of the output.

A route keeps the order of each source unit (MQTT topic, NATS subject, Kafka key, AMQP
group or subject) inside the gateway, but a keyless Kafka record lands on any partition:
the events of one MQTT topic would spread over partitions and a consumer would see them
out of order. So a record without a key (its event has no `partitionkey`, which the Kafka
binding maps to the key) gets one, chosen by `routes[].partitionkey`:

    source      the source's unit of order (`Ordering.source_key` of its profile); the
                default. A source without one (HTTP) leaves the record keyless.
    none        no key: records spread over partitions (the producer's choice).
    a template  e.g. `{storeid}`: filled from the match context; a placeholder without a
                value leaves the record keyless.
"""

from __future__ import annotations

from collections.abc import Mapping

from gateway.jsontypes import JSON
from gateway.partitioning import NONE, SOURCE, check_policy
from gateway.protocols import find_profile
from gateway.protocols.profile import FieldRef
from gateway.record import NativeMessage
from gateway.templates import Template

__all__ = ["NONE", "SOURCE", "PartitionKeys", "check_policy", "keyed"]

class PartitionKeys:
    """The key policy of one route."""

    def __init__(self, policy: str = SOURCE) -> None:
        problem = check_policy(policy)
        if problem is not None:
            raise ValueError(f"partitionkey: {problem}")
        self.policy = policy
        self._template = None if policy in (SOURCE, NONE) else Template.parse(policy)

    @property
    def enabled(self) -> bool:
        return self.policy != NONE

    def key(self, source: NativeMessage, context: Mapping[str, JSON]) -> str | None:
        """The key for the outputs of one source message, or None (keyless)."""
        if self._template is not None:
            try:
                return self._template.expand(context)
            except KeyError:
                return None
        if self.policy == NONE:
            return None
        prof = find_profile(source.protocol)
        if prof is None:
            return None
        for ref in prof.ordering.source_key:
            value = _text_at(source.fields, ref)
            if value:
                return value
        return None


def keyed(record: NativeMessage, place: FieldRef, key: str | None) -> NativeMessage:
    """`record` with `key` at `place`, unless it has a key there already (the event's
    `partitionkey` wins) or there is no key."""
    if key is None or record.fields.get(place.field) is not None:
        return record
    # The constructor, not dataclasses.replace: this runs once per Kafka record.
    return NativeMessage(record.protocol, {**record.fields, place.field: key}, record.data,
                         record.payload, record.received_at, record.raw)


def _text_at(fields: Mapping[str, JSON], ref: FieldRef) -> str | None:
    value = fields.get(ref.field)
    if ref.name is not None:
        value = value.get(ref.name) if isinstance(value, dict) else None
    return value if isinstance(value, str) else None
