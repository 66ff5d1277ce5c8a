"""The values of `routes[].partitionkey` and the key each gives a record (see
`gateway/runtime/keys.py` for their effect on a route; the Spark job's Kafka sink keys its
records the same way)."""

from __future__ import annotations

from collections.abc import Mapping

from gateway.json.values import JSON
from gateway.protocols import find_profile
from gateway.protocols.profile import FieldRef
from gateway.record import ENTRY_FIELDS, NativeMessage
from gateway.templates.template import Template, TemplateError

__all__ = ["NONE", "SOURCE", "PartitionKeys", "check_policy"]

#: Key by the source's unit of order (MQTT topic, NATS subject, Kafka key, AMQP group).
SOURCE = "source"
#: No key: records spread over partitions.
NONE = "none"


def check_policy(policy: str) -> str | None:
    """Why `policy` is not a valid `partitionkey` (None when it is): `source`, `none`, or
    a template with at least one placeholder."""
    if policy in (SOURCE, NONE):
        return None
    try:
        template = Template.parse(policy)
    except TemplateError as exc:
        return f"not a template: {exc}"
    if template.is_constant:
        return ("a constant key sends every record to one partition; write source, none "
                "or a template with a placeholder such as {storeid}")
    return None


class PartitionKeys:
    """The key policy of one route."""

    def __init__(self, policy: str = SOURCE) -> None:
        problem = check_policy(policy)
        if problem is not None:
            raise ValueError(f"partitionkey: {problem}")
        self.policy = policy
        self._template = None if policy in (SOURCE, NONE) else Template.parse(policy)
        # Per protocol, where its records keep their source key (its profile's ordering),
        # found once: `key` runs for every message of a keyed output.
        self._places: dict[str, tuple[FieldRef, ...]] = {}

    @property
    def enabled(self) -> bool:
        return self.policy != NONE

    @property
    def reads_source(self) -> bool:
        """Whether `key` reads the source record (else the context alone decides: a
        caller holding the record as text need not parse it)."""
        return self.policy == SOURCE

    def key(self, source: NativeMessage | None, context: Mapping[str, JSON]) -> str | None:
        """The key for the outputs of one source message, or None (keyless). `source` may
        be None when `reads_source` is false, or when the record could not be read."""
        if self._template is not None:
            try:
                return self._template.expand(context)
            except KeyError:
                return None
        if self.policy == NONE or source is None:
            return None
        places = self._places.get(source.protocol)
        if places is None:
            places = self._places_of(source.protocol)
        for ref in places:
            # A scalar field is read where reading it makes no header entries.
            value = _text_at(source.fields if ref.field in ENTRY_FIELDS else source.head, ref)
            if value:
                return value
        return None

    def _places_of(self, protocol: str) -> tuple[FieldRef, ...]:
        """Where records of `protocol` keep their source key (none for a protocol
        without a profile), remembered for the protocols there are profiles of."""
        prof = find_profile(protocol)
        if prof is None:
            return ()
        places = self._places[protocol] = prof.ordering.source_key
        return places


def _text_at(fields: Mapping[str, JSON], ref: FieldRef) -> str | None:
    value = fields.get(ref.field)
    if ref.name is not None:
        value = value.get(ref.name) if isinstance(value, dict) else None
    return value if isinstance(value, str) else None
