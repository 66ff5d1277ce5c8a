"""What one adapter package gives the factory (`adapters/registry.py`): its option spec,
its consumer and producer, and what it derives from the definitions.

Each protocol package (`adapters/<protocol>/`) builds one `Adapter` in its `__init__`; the
registry lists the packages. The preparation helpers here are the protocol-neutral part
of deriving a subscription from the messages' address templates.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from adapters._preflight import Destination
from gateway.config import EndpointConfig
from gateway.definitions.model import MessageDefinition
from gateway.ports import Consumer, EndpointSettings, Producer
from gateway.ports.options import OptionSpec
from gateway.protocols import ProtocolProfile, token_separator
from gateway.templates.template import Template, TemplateError, to_wildcard_filter

__all__ = ["Adapter", "Prepare", "address_values", "addresses", "filters", "nothing",
           "refuse_observer", "strings", "uri_of"]

# What the definitions imply for an endpoint's settings, per adapter: a consumer's
# subscription (filters, topics, paths) from the messages' address templates, the MQTT
# version, the AMQP node. It edits the canonical options in place.
Prepare = Callable[[ProtocolProfile, EndpointConfig, dict[str, object],
                    Sequence[MessageDefinition]], None]


def nothing(prof: ProtocolProfile, endpoint: EndpointConfig, opts: dict[str, object],
            messages: Sequence[MessageDefinition]) -> None:
    return None


def refuse_observer(prof: ProtocolProfile, endpoint: EndpointConfig,
                    opts: dict[str, object], messages: Sequence[MessageDefinition]) -> None:
    # The config check refuses this first; the adapter never consumes destructively.
    raise ValueError(f"endpoint {endpoint.endpoint_id}: cannot be observed: "
                     f"{prof.observe.refused}")


@dataclass(frozen=True)
class Adapter:
    """One adapter: the protocol family it serves (`ProtocolProfile.family`), its option
    spec, its consumer and producer, and what it derives.

    Shadow mode (`routes[].observe`): `prepare_observer` says how an observing consumer
    differs from the real one, so that it takes nothing from the endpoint's real consumers
    (`ProtocolProfile.observe` says the same in words, for validate and the docs). It runs
    before `prepare_consumer`, which then derives the subscription."""

    family: str
    options: OptionSpec
    consumer: Callable[[EndpointSettings], Consumer]
    producer: Callable[[EndpointSettings], Producer]
    prepare_consumer: Prepare = nothing
    prepare_producer: Prepare = nothing
    prepare_observer: Prepare = refuse_observer
    # `validate --connect`: checks that the destination exists after a login
    destination: Destination | None = None


def strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    return []


def address_values(messages: Sequence[MessageDefinition], field: str) -> list[str]:
    out: list[str] = []
    for message in messages:
        for constraint in message.protocol_options:
            if constraint.field == field and constraint.name is None and isinstance(
                constraint.prop.value, str
            ):
                out.append(constraint.prop.value)
    return out


def addresses(prof: ProtocolProfile, messages: Sequence[MessageDefinition]) -> list[str]:
    return [] if prof.address is None else address_values(messages, prof.address.field)


def filters(prof: ProtocolProfile, messages: Sequence[MessageDefinition],
            wildcard: str) -> list[str]:
    """Broker subscription filters for the messages' address templates: each
    placeholder becomes `wildcard` over one level (`FieldSpec.separator` of the address
    field: `/` for MQTT topics, `.` for NATS subjects)."""
    if prof.address is None:
        return []
    separator = token_separator(prof.name, prof.address.field)
    out: dict[str, None] = {}
    for value in address_values(messages, prof.address.field):
        try:
            template = Template.parse(value)
        except TemplateError:
            continue
        out.setdefault(to_wildcard_filter(template, wildcard, separator), None)
    return list(out)


def uri_of(endpoint: EndpointConfig) -> str:
    if endpoint.uri:
        return endpoint.uri
    if endpoint.bootstrap_servers:
        return "kafka://" + ",".join(endpoint.bootstrap_servers)
    raise ValueError(f"endpoint {endpoint.endpoint_id}: no address")
