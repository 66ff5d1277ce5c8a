"""The values of `routes[].partitionkey` (see `gateway/runtime/keys.py` for their effect)."""

from __future__ import annotations

from gateway.templates import Template, TemplateError

__all__ = ["NONE", "SOURCE", "check_policy"]

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
