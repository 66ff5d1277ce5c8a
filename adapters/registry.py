"""The adapter factory the daemon finds through the `xrgw.adapters` entry point.

Turns a configured endpoint (`gateway.ports.AdapterEndpoint`, which the core builds from
the config: the xRegistry endpoint's protocoloptions overlaid by the deployment's
overrides, with the address templates of its messages) into adapter settings, with what
the definitions imply (each package's `prepare` module: MQTT topic filters from
`topic_name` templates, NATS subject filters, Kafka topics, HTTP paths, the AMQP node).
Producer endpoints give the address fields every outgoing record gets (`output_defaults`).

The adapters are the packages listed in `INSTALLED`: one import line per protocol.
"""

from __future__ import annotations

import uuid
from dataclasses import replace

from adapters import amqp, http, kafka, mqtt, nats
from adapters._preflight import Finding, preflight
from adapters.descriptor import Adapter, uri_of
from gateway.json.values import JSON
from gateway.ports import AdapterEndpoint, Consumer, EndpointSettings, Producer
from gateway.ports.options import OptionSpec
from gateway.protocols import PROFILES, ProtocolProfile, find_profile

#: The installed adapter packages. A new protocol adds its package here (docs/protocols.md).
INSTALLED: tuple[Adapter, ...] = (mqtt.ADAPTER, amqp.ADAPTER, kafka.ADAPTER, nats.ADAPTER,
                                  http.ADAPTER)

#: The adapter of each protocol family (`ProtocolProfile.family`); MQTT 3.1.1 and 5.0
#: share one adapter.
ADAPTERS: dict[str, Adapter] = {adapter.family: adapter for adapter in INSTALLED}

#: One option spec per protocol.
OPTION_SPECS: dict[str, OptionSpec] = {
    p.name: ADAPTERS[p.family].options for p in PROFILES if p.family in ADAPTERS}


def settings_for(endpoint: AdapterEndpoint, options: dict[str, object]) -> EndpointSettings:
    return EndpointSettings(
        uri=uri_of(endpoint),
        username=endpoint.username,
        password=endpoint.password.reveal() if endpoint.password is not None else None,
        client_id=endpoint.client_id,
        options=options,
        tls=endpoint.tls,
    )


class AdapterRegistry:
    def option_spec(self, protocol: str | None) -> OptionSpec | None:
        """The option spec of the adapter serving `protocol` (None: no adapter does)."""
        return OPTION_SPECS.get(protocol or "")

    def _options(self, endpoint: AdapterEndpoint) -> dict[str, object]:
        spec = self.option_spec(endpoint.protocol)
        return dict(endpoint.options) if spec is None else spec.canonical(endpoint.options)

    def _adapter(self, endpoint: AdapterEndpoint) -> tuple[ProtocolProfile, Adapter]:
        prof = find_profile(endpoint.protocol)
        adapter = None if prof is None else ADAPTERS.get(prof.family)
        if prof is None or adapter is None:
            raise ValueError(
                f"endpoint {endpoint.endpoint_id}: no adapter for {endpoint.protocol!r}")
        return prof, adapter

    def consumer(self, endpoint: AdapterEndpoint, *, observe: bool = False) -> Consumer:
        """A consumer subscribed for `endpoint.addresses` (the messages the routes reading
        it expect)."""
        prof, adapter = self._adapter(endpoint)
        opts = self._options(endpoint)
        if observe:
            adapter.prepare_observer(prof, endpoint, opts)
        adapter.prepare_consumer(prof, endpoint, opts)
        settings = settings_for(endpoint, opts)
        if observe:
            # A client id of its own: the real consumer's (MQTT session, NATS name) would
            # take over its connection.
            settings = replace(settings, client_id=f"xrgw-observe-{uuid.uuid4().hex[:12]}")
        return adapter.consumer(settings)

    def producer(self, endpoint: AdapterEndpoint) -> Producer:
        prof, adapter = self._adapter(endpoint)
        opts = self._options(endpoint)
        adapter.prepare_producer(prof, endpoint, opts)
        return adapter.producer(settings_for(endpoint, opts))

    async def preflight(self, endpoint: AdapterEndpoint, *, source: bool,
                        timeout: float = 5.0) -> list[Finding]:
        """`validate --connect`: DNS, TCP, TLS, login and destination of one endpoint
        (a listening source: its address can be bound); see adapters/_preflight.py."""
        prof, adapter = self._adapter(endpoint)
        return await preflight(prof, endpoint, listens=source and prof.endpoint.uris.listens,
                               make=self.producer, destination=adapter.destination,
                               timeout=timeout)

    def output_defaults(self, endpoint: AdapterEndpoint) -> dict[str, JSON]:
        """Record fields every outgoing record of this endpoint gets unless it has its own:
        the endpoint's fixed address (topic, subject) and Kafka key and partition
        (`ProtocolProfile.endpoint.output_fields`)."""
        opts = self._options(endpoint)
        prof = find_profile(endpoint.protocol)
        out: dict[str, JSON] = {}
        for option, record_field in () if prof is None else prof.endpoint.output_fields:
            value = opts.get(option)
            if isinstance(value, (str, int)) and not isinstance(value, bool):
                out[record_field] = value
        return out


REGISTRY = AdapterRegistry()
