"""What the core hands an adapter for one endpoint (`gateway.ports.AdapterEndpoint`): the
endpoint as the config resolved it, and the address templates of the messages read from
it, each split into the levels a broker subscription matches. Adapters derive their
subscriptions from these and never read the config, the definitions or the templates."""

from __future__ import annotations

from collections.abc import Sequence

from gateway.config._model import EndpointConfig
from gateway.definitions.model import MessageDefinition
from gateway.ports import AdapterEndpoint, AddressTemplate
from gateway.protocols import find_profile, token_separator
from gateway.templates.template import Template, TemplateError, wildcard_levels


def for_adapter(endpoint: EndpointConfig,
                messages: Sequence[MessageDefinition] = ()) -> AdapterEndpoint:
    """The endpoint for the adapter factory; `messages`: the definitions a consumer
    subscribes for (a producer: none)."""
    return AdapterEndpoint(
        endpoint_id=endpoint.endpoint_id, protocol=endpoint.protocol, uris=endpoint.uris,
        bootstrap_servers=endpoint.bootstrap_servers, username=endpoint.username,
        password=endpoint.password, client_id=endpoint.client_id, tls=endpoint.tls,
        options=endpoint.options, addresses=address_templates(endpoint.protocol, messages))


def address_templates(protocol: str | None,
                      messages: Sequence[MessageDefinition]) -> tuple[AddressTemplate, ...]:
    """The fixed values the messages give the profile's address field (MQTT `topic_name`,
    NATS `subject`, Kafka `topic`, HTTP `path`), in order, with their wildcard levels."""
    prof = find_profile(protocol)
    if prof is None or prof.address is None:
        return ()
    field = prof.address.field
    separator = token_separator(prof.name, field)
    out = []
    for message in messages:
        for constraint in message.protocol_options:
            value = constraint.prop.value
            if constraint.field == field and constraint.name is None and isinstance(value, str):
                out.append(AddressTemplate(value, _levels(value, separator), separator))
    return tuple(out)


def _levels(text: str, separator: str) -> tuple[str | None, ...] | None:
    try:
        return wildcard_levels(Template.parse(text), separator)
    except TemplateError:
        return None
