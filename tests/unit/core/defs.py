"""Hand-built definitions for matcher tests (independent of the document reader)."""

from __future__ import annotations

from typing import Any

from gateway.definitions.model import (
    CLOUDEVENTS,
    MessageDefinition,
    OptionConstraint,
    Property,
    Provenance,
)

_order = iter(range(1_000_000))


def prop(value: Any = None, *, type: str = "string", required: bool = False,
         has_value: bool | None = None) -> Property:
    return Property(type=type, value=value,
                    has_value=(value is not None) if has_value is None else has_value,
                    required=required)


def opt(field: str, value: Any = None, name: str | None = None, **kw: Any) -> OptionConstraint:
    return OptionConstraint(field, name, prop(value, **kw))


def define(mid: str, protocol: str | None = None, options: list[OptionConstraint] | None = None,
           envelope: dict[str, Property] | None = None, **kw: Any) -> MessageDefinition:
    return MessageDefinition(
        xid=f"/messagegroups/g/messages/{mid}",
        message_id=mid,
        group_id="g",
        provenance=Provenance("test", f"$.messagegroups.g.messages.{mid}"),
        protocol=protocol,
        protocol_options=tuple(options or ()),
        envelope=CLOUDEVENTS if envelope is not None else None,
        envelope_metadata=dict(envelope or {}),
        order=next(_order),
        **kw,
    )


CASHIER = define(
    "cashierdesk",
    "MQTT/5.0",
    [
        opt("topic_name", "/store/{storeid}/cashierdesk/{cdid}", type="uritemplate"),
        opt("user_properties", "{eventType}", name="eventType", type="uritemplate"),
    ],
    {
        "type": prop("{eventType}", type="uritemplate"),
        "source": prop("{storeid}", type="uritemplate"),
        "subject": prop("{cdid}", type="uritemplate"),
    },
)
