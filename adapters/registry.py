"""The adapter factory the daemon finds through the `xrgw.adapters` entry point.

Turns a configured endpoint (`gateway.config.EndpointConfig`: the xRegistry endpoint's
protocoloptions overlaid by the deployment's overrides) into adapter settings, deriving
what the definitions imply: MQTT topic filters from `topic_name` templates (`{x}` -> `+`)
unless `topicfilter` is given, NATS subject filters (`{x}` -> `*`), Kafka topics, HTTP
paths. Producer endpoints give the address fields every outgoing record gets
(`output_defaults`).
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import urlsplit

from adapters import _amqp_options, _http_options, _kafka_options, _mqtt_options, _nats_options
from adapters.amqp import AmqpConsumer, AmqpProducer
from adapters.http import HttpConsumer, HttpProducer
from adapters.kafka import KafkaConsumer, KafkaProducer
from adapters.mqtt import MqttConsumer, MqttProducer
from adapters.nats import NatsConsumer, NatsProducer
from gateway.config import EndpointConfig
from gateway.definitions.model import MessageDefinition
from gateway.jsontypes import JSON
from gateway.options import OptionSpec
from gateway.ports import Consumer, EndpointSettings, Producer
from gateway.protocols import AMQP, HTTP, KAFKA, MQTT5, MQTT311, NATS
from gateway.templates import Template, TemplateError, to_wildcard_filter


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


def _filters(values: list[str], wildcard: str, separator: str) -> list[str]:
    out: dict[str, None] = {}
    for value in values:
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


#: One option spec per adapter; MQTT 3.1.1 and 5.0 share one adapter.
OPTION_SPECS: dict[str, OptionSpec] = {
    MQTT5: _mqtt_options.OPTIONS,
    MQTT311: _mqtt_options.OPTIONS,
    AMQP: _amqp_options.OPTIONS,
    KAFKA: _kafka_options.OPTIONS,
    NATS: _nats_options.OPTIONS,
    HTTP: _http_options.OPTIONS,
}


class AdapterRegistry:
    def option_spec(self, protocol: str | None) -> OptionSpec | None:
        """The option spec of the adapter serving `protocol` (None: no adapter does)."""
        return OPTION_SPECS.get(protocol or "")

    def _options(self, endpoint: EndpointConfig) -> dict[str, object]:
        spec = self.option_spec(endpoint.protocol)
        return dict(endpoint.options) if spec is None else spec.canonical(endpoint.options)

    def consumer(self, endpoint: EndpointConfig,
                 messages: Sequence[MessageDefinition]) -> Consumer:
        opts = self._options(endpoint)
        protocol = endpoint.protocol
        if protocol in (MQTT5, MQTT311):
            filters = _strings(opts.get("topicfilter")) or _filters(
                _address_values(messages, "topic_name"), "+", "/") or _strings(
                opts.get("topic"))
            group = opts.get("sharedsubscriptiongroup")
            if group:
                filters = [f"$share/{group}/{f}" for f in filters]
            opts["topicfilter"] = filters
            opts["protocol"] = "3.1.1" if protocol == MQTT311 else "5.0"
            return MqttConsumer(settings_for(endpoint, opts))
        if protocol == KAFKA:
            topics = _strings(opts.get("topics")) or _strings(opts.get("topic")) or [
                t for t in _address_values(messages, "topic") if "{" not in t]
            opts["topics"] = list(dict.fromkeys(topics))
            opts.setdefault("consumergroup", f"xrgw-{endpoint.endpoint_id}")
            return KafkaConsumer(settings_for(endpoint, opts))
        if protocol == NATS:
            opts["subjectfilter"] = _strings(opts.get("subjectfilter")) or _strings(
                opts.get("subject")) or _filters(_address_values(messages, "subject"), "*", ".")
            return NatsConsumer(settings_for(endpoint, opts))
        if protocol == AMQP:
            if "node" not in opts:
                opts["node"] = urlsplit(_uri(endpoint)).path or endpoint.endpoint_id
            return AmqpConsumer(settings_for(endpoint, opts))
        if protocol == HTTP:
            if "paths" not in opts:
                paths = _address_values(messages, "path")
                if paths:
                    opts["paths"] = paths
            return HttpConsumer(settings_for(endpoint, opts))
        raise ValueError(f"endpoint {endpoint.endpoint_id}: no adapter for {protocol!r}")

    def producer(self, endpoint: EndpointConfig) -> Producer:
        opts = self._options(endpoint)
        protocol = endpoint.protocol
        if protocol in (MQTT5, MQTT311):
            opts["protocol"] = "3.1.1" if protocol == MQTT311 else "5.0"
            return MqttProducer(settings_for(endpoint, opts))
        if protocol == KAFKA:
            return KafkaProducer(settings_for(endpoint, opts))
        if protocol == NATS:
            return NatsProducer(settings_for(endpoint, opts))
        if protocol == AMQP:
            if "node" not in opts:
                opts["node"] = urlsplit(_uri(endpoint)).path or endpoint.endpoint_id
            return AmqpProducer(settings_for(endpoint, opts))
        if protocol == HTTP:
            return HttpProducer(settings_for(endpoint, opts))
        raise ValueError(f"endpoint {endpoint.endpoint_id}: no adapter for {protocol!r}")

    def output_defaults(self, endpoint: EndpointConfig) -> dict[str, JSON]:
        """Record fields every outgoing record of this endpoint gets unless it has its own:
        the endpoint's fixed address (topic, subject) and Kafka key and partition."""
        opts = self._options(endpoint)
        protocol = endpoint.protocol
        fields: tuple[tuple[str, str], ...] = ()
        if protocol in (MQTT5, MQTT311):
            fields = (("topic", "topic_name"),)
        elif protocol == KAFKA:
            fields = (("topic", "topic"), ("key", "key"), ("partition", "partition"))
        elif protocol == NATS:
            fields = (("subject", "subject"),)
        out: dict[str, JSON] = {}
        for option, record_field in fields:
            value = opts.get(option)
            if isinstance(value, (str, int)) and not isinstance(value, bool):
                out[record_field] = value
        return out


REGISTRY = AdapterRegistry()
