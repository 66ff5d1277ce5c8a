"""The adapter factory the daemon finds through the `xrgw.adapters` entry point.

Turns a configured endpoint (`gateway.config.EndpointConfig`: the xRegistry endpoint's
protocoloptions overlaid by the deployment's overrides) into adapter settings, deriving
what the definitions imply: MQTT topic filters from `topic_name` templates (`{x}` -> `+`)
unless `topicfilter` is given, NATS subject filters (`{x}` -> `*`), Kafka topics, HTTP
paths. Producer endpoints give the address fields every outgoing record gets
(`output_defaults`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from urllib.parse import urlsplit

from adapters import _amqp_options, _http_options, _kafka_options, _mqtt_options, _nats_options
from adapters._preflight import (
    Destination,
    Finding,
    jetstream_streams,
    kafka_topics,
    preflight,
)
from adapters.amqp import AmqpConsumer, AmqpProducer
from adapters.http import HttpConsumer, HttpProducer
from adapters.kafka import KafkaConsumer, KafkaProducer
from adapters.mqtt import MqttConsumer, MqttProducer
from adapters.nats import NatsConsumer, NatsProducer
from gateway.config import EndpointConfig
from gateway.definitions.model import MessageDefinition
from gateway.json.values import JSON
from gateway.options import OptionSpec
from gateway.ports import Consumer, EndpointSettings, Producer
from gateway.protocols import (
    AMQP,
    HTTP,
    KAFKA,
    MQTT_FAMILY,
    NATS,
    PROFILES,
    ProtocolProfile,
    find_profile,
    token_separator,
)
from gateway.templates.template import Template, TemplateError, to_wildcard_filter


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    return []


def _address_values(messages: Sequence[MessageDefinition], field: str) -> list[str]:
    out: list[str] = []
    for message in messages:
        for constraint in message.protocol_options:
            if constraint.field == field and constraint.name is None and isinstance(
                constraint.prop.value, str
            ):
                out.append(constraint.prop.value)
    return out


def _filters(prof: ProtocolProfile, messages: Sequence[MessageDefinition],
             wildcard: str) -> list[str]:
    """Broker subscription filters for the messages' address templates: each
    placeholder becomes `wildcard` over one level (`FieldSpec.separator` of the address
    field: `/` for MQTT topics, `.` for NATS subjects)."""
    if prof.address is None:
        return []
    separator = token_separator(prof.name, prof.address.field)
    out: dict[str, None] = {}
    for value in _address_values(messages, prof.address.field):
        try:
            template = Template.parse(value)
        except TemplateError:
            continue
        out.setdefault(to_wildcard_filter(template, wildcard, separator), None)
    return list(out)


def _uri(endpoint: EndpointConfig) -> str:
    if endpoint.uri:
        return endpoint.uri
    if endpoint.bootstrap_servers:
        return "kafka://" + ",".join(endpoint.bootstrap_servers)
    raise ValueError(f"endpoint {endpoint.endpoint_id}: no address")


def settings_for(endpoint: EndpointConfig, options: dict[str, object]) -> EndpointSettings:
    return EndpointSettings(
        uri=_uri(endpoint),
        username=endpoint.username,
        password=endpoint.password.reveal() if endpoint.password is not None else None,
        client_id=endpoint.client_id,
        options=options,
        tls=endpoint.tls,
    )


# What the definitions imply for an endpoint's settings, per adapter: a consumer's
# subscription (filters, topics, paths) from the messages' address templates, the MQTT
# version, the AMQP node.
Prepare = Callable[[ProtocolProfile, EndpointConfig, dict[str, object],
                    Sequence[MessageDefinition]], None]


def _nothing(prof: ProtocolProfile, endpoint: EndpointConfig, opts: dict[str, object],
             messages: Sequence[MessageDefinition]) -> None:
    return None


def _addresses(prof: ProtocolProfile, messages: Sequence[MessageDefinition]) -> list[str]:
    return [] if prof.address is None else _address_values(messages, prof.address.field)


def _mqtt_version(prof: ProtocolProfile, endpoint: EndpointConfig, opts: dict[str, object],
                  messages: Sequence[MessageDefinition]) -> None:
    opts["protocol"] = prof.version  # one adapter speaks 3.1.1 and 5.0


def _mqtt_subscription(prof: ProtocolProfile, endpoint: EndpointConfig,
                       opts: dict[str, object], messages: Sequence[MessageDefinition]) -> None:
    filters = _strings(opts.get("topicfilter")) or _filters(
        prof, messages, "+") or _strings(opts.get("topic"))
    group = opts.get("sharedsubscriptiongroup")
    if group:
        filters = [f"$share/{group}/{f}" for f in filters]
    opts["topicfilter"] = filters
    _mqtt_version(prof, endpoint, opts, messages)


def _kafka_subscription(prof: ProtocolProfile, endpoint: EndpointConfig,
                        opts: dict[str, object], messages: Sequence[MessageDefinition]) -> None:
    topics = _strings(opts.get("topics")) or _strings(opts.get("topic")) or [
        t for t in _addresses(prof, messages) if "{" not in t]
    opts["topics"] = list(dict.fromkeys(topics))
    opts.setdefault("consumergroup", f"xrgw-{endpoint.endpoint_id}")


def _nats_subscription(prof: ProtocolProfile, endpoint: EndpointConfig,
                       opts: dict[str, object], messages: Sequence[MessageDefinition]) -> None:
    opts["subjectfilter"] = _strings(opts.get("subjectfilter")) or _strings(
        opts.get("subject")) or _filters(prof, messages, "*")


def _amqp_node(prof: ProtocolProfile, endpoint: EndpointConfig, opts: dict[str, object],
               messages: Sequence[MessageDefinition]) -> None:
    if "node" not in opts:
        opts["node"] = urlsplit(_uri(endpoint)).path or endpoint.endpoint_id


def _http_paths(prof: ProtocolProfile, endpoint: EndpointConfig, opts: dict[str, object],
                messages: Sequence[MessageDefinition]) -> None:
    if "paths" not in opts:
        paths = _addresses(prof, messages)
        if paths:
            opts["paths"] = paths


# Shadow mode (`routes[].observe`): how an observing consumer differs from the real
# one, per adapter, so that it takes nothing from the endpoint's real consumers
# (`ProtocolProfile.observe` says the same in words, for validate and the docs). It runs
# before the consumer's own preparation, which then derives the subscription.
def _kafka_observer(prof: ProtocolProfile, endpoint: EndpointConfig, opts: dict[str, object],
                    messages: Sequence[MessageDefinition]) -> None:
    opts["consumergroup"] = f"xrgw-observe-{endpoint.endpoint_id}-{uuid.uuid4().hex[:8]}"
    opts["autooffsetreset"] = opts.get("observeoffset") or "latest"


def _mqtt_observer(prof: ProtocolProfile, endpoint: EndpointConfig, opts: dict[str, object],
                   messages: Sequence[MessageDefinition]) -> None:
    opts.pop("sharedsubscriptiongroup", None)  # a plain subscription gets every message
    opts["cleanstart"] = True
    opts["sessionexpiryinterval"] = 0


def _nats_observer(prof: ProtocolProfile, endpoint: EndpointConfig, opts: dict[str, object],
                   messages: Sequence[MessageDefinition]) -> None:
    opts.pop("queuegroup", None)  # a queue group member would share, not copy
    opts["observe"] = True


def _refuse_observer(prof: ProtocolProfile, endpoint: EndpointConfig,
                     opts: dict[str, object], messages: Sequence[MessageDefinition]) -> None:
    # The config check refuses this first; the adapter never consumes destructively.
    raise ValueError(f"endpoint {endpoint.endpoint_id}: cannot be observed: "
                     f"{prof.observe.refused}")


@dataclass(frozen=True)
class Adapter:
    """One adapter: its option spec, its consumer and producer, and what it derives."""

    options: OptionSpec
    consumer: Callable[[EndpointSettings], Consumer]
    producer: Callable[[EndpointSettings], Producer]
    prepare_consumer: Prepare = _nothing
    prepare_producer: Prepare = _nothing
    prepare_observer: Prepare = _refuse_observer
    # `validate --connect`: checks that the destination exists after a login
    destination: Destination | None = None


#: The adapter of each protocol family (`ProtocolProfile.family`); MQTT 3.1.1 and 5.0
#: share one adapter.
ADAPTERS: dict[str, Adapter] = {
    MQTT_FAMILY: Adapter(_mqtt_options.OPTIONS, MqttConsumer, MqttProducer,
                         _mqtt_subscription, _mqtt_version, _mqtt_observer),
    AMQP: Adapter(_amqp_options.OPTIONS, AmqpConsumer, AmqpProducer, _amqp_node, _amqp_node),
    KAFKA: Adapter(_kafka_options.OPTIONS, KafkaConsumer, KafkaProducer, _kafka_subscription,
                   prepare_observer=_kafka_observer, destination=kafka_topics),
    NATS: Adapter(_nats_options.OPTIONS, NatsConsumer, NatsProducer, _nats_subscription,
                  prepare_observer=_nats_observer, destination=jetstream_streams),
    # HTTP ingress: the observing route acknowledges (202) and forwards nothing.
    HTTP: Adapter(_http_options.OPTIONS, HttpConsumer, HttpProducer, _http_paths,
                  prepare_observer=_nothing),
}

#: One option spec per protocol.
OPTION_SPECS: dict[str, OptionSpec] = {
    p.name: ADAPTERS[p.family].options for p in PROFILES if p.family in ADAPTERS}


class AdapterRegistry:
    def option_spec(self, protocol: str | None) -> OptionSpec | None:
        """The option spec of the adapter serving `protocol` (None: no adapter does)."""
        return OPTION_SPECS.get(protocol or "")

    def _options(self, endpoint: EndpointConfig) -> dict[str, object]:
        spec = self.option_spec(endpoint.protocol)
        return dict(endpoint.options) if spec is None else spec.canonical(endpoint.options)

    def _adapter(self, endpoint: EndpointConfig) -> tuple[ProtocolProfile, Adapter]:
        prof = find_profile(endpoint.protocol)
        adapter = None if prof is None else ADAPTERS.get(prof.family)
        if prof is None or adapter is None:
            raise ValueError(
                f"endpoint {endpoint.endpoint_id}: no adapter for {endpoint.protocol!r}")
        return prof, adapter

    def consumer(self, endpoint: EndpointConfig,
                 messages: Sequence[MessageDefinition], *, observe: bool = False) -> Consumer:
        prof, adapter = self._adapter(endpoint)
        opts = self._options(endpoint)
        if observe:
            adapter.prepare_observer(prof, endpoint, opts, messages)
        adapter.prepare_consumer(prof, endpoint, opts, messages)
        settings = settings_for(endpoint, opts)
        if observe:
            # A client id of its own: the real consumer's (MQTT session, NATS name) would
            # take over its connection.
            settings = replace(settings, client_id=f"xrgw-observe-{uuid.uuid4().hex[:12]}")
        return adapter.consumer(settings)

    def producer(self, endpoint: EndpointConfig) -> Producer:
        prof, adapter = self._adapter(endpoint)
        opts = self._options(endpoint)
        adapter.prepare_producer(prof, endpoint, opts, ())
        return adapter.producer(settings_for(endpoint, opts))

    async def preflight(self, endpoint: EndpointConfig, *, source: bool,
                        timeout: float = 5.0) -> list[Finding]:
        """`validate --connect`: DNS, TCP, TLS, login and destination of one endpoint
        (a listening source: its address can be bound); see adapters/_preflight.py."""
        prof, adapter = self._adapter(endpoint)
        return await preflight(prof, endpoint, listens=source and prof.endpoint.uris.listens,
                               make=self.producer, destination=adapter.destination,
                               timeout=timeout)

    def output_defaults(self, endpoint: EndpointConfig) -> dict[str, JSON]:
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
