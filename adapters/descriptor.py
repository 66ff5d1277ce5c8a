"""What one adapter package gives the factory (`adapters/registry.py`): its option spec,
its consumer and producer, and what it derives from the definitions.

Each protocol package (`adapters/<protocol>/`) builds one `Adapter` in its `__init__`; the
registry lists the packages. The preparation helpers here are the protocol-neutral part
of deriving a subscription from the address templates the core hands over
(`AdapterEndpoint.addresses`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from adapters._preflight import Destination
from gateway.ports import AdapterEndpoint, Consumer, EndpointSettings, Producer
from gateway.ports.options import OptionSpec
from gateway.protocols import ProtocolProfile

__all__ = ["Adapter", "Prepare", "addresses", "filters", "nothing",
           "refuse_observer", "strings", "uri_of"]

# What the definitions imply for an endpoint's settings, per adapter: a consumer's
# subscription (filters, topics, paths) from the messages' address templates
# (`AdapterEndpoint.addresses`), the MQTT version, the AMQP node. It edits the canonical
# options in place.
Prepare = Callable[[ProtocolProfile, AdapterEndpoint, dict[str, object]], None]


def nothing(prof: ProtocolProfile, endpoint: AdapterEndpoint, opts: dict[str, object]) -> None:
    return None


def refuse_observer(prof: ProtocolProfile, endpoint: AdapterEndpoint,
                    opts: dict[str, object]) -> None:
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


def addresses(endpoint: AdapterEndpoint) -> list[str]:
    """The messages' addresses as written (fixed ones and templates)."""
    return [address.text for address in endpoint.addresses]


def filters(endpoint: AdapterEndpoint, wildcard: str) -> list[str]:
    """Broker subscription filters for the messages' address templates: each
    placeholder becomes `wildcard` over one level (`/` for MQTT topics, `.` for NATS
    subjects); a template that does not parse gives none."""
    out: dict[str, None] = {}
    for address in endpoint.addresses:
        found = address.wildcard_filter(wildcard)
        if found is not None:
            out.setdefault(found, None)
    return list(out)


def uri_of(endpoint: AdapterEndpoint) -> str:
    if endpoint.uri:
        return endpoint.uri
    if endpoint.bootstrap_servers:
        return "kafka://" + ",".join(endpoint.bootstrap_servers)
    raise ValueError(f"endpoint {endpoint.endpoint_id}: no address")
