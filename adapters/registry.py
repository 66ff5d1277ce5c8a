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

from adapters.amqp import AmqpConsumer, AmqpProducer
from adapters.base import Consumer, EndpointSettings, Producer, TlsSettings
from adapters.http import HttpConsumer, HttpProducer
from adapters.kafka import KafkaConsumer, KafkaProducer
from adapters.mqtt import MqttConsumer, MqttProducer
from adapters.nats import NatsConsumer, NatsProducer
from gateway.config import EndpointConfig
from gateway.definitions.model import MessageDefinition
from gateway.jsontypes import JSON
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
    tls = endpoint.tls
    return EndpointSettings(
        uri=_uri(endpoint),
        username=endpoint.username,
        password=endpoint.password.reveal() if endpoint.password is not None else None,
        client_id=endpoint.client_id,
        options=options,
        tls=TlsSettings(tls.ca_file, tls.cert_file, tls.key_file, tls.insecure)
        if tls is not None else None,
    )


class AdapterRegistry:
    def consumer(self, endpoint: EndpointConfig,
                 messages: Sequence[MessageDefinition]) -> Consumer:
        opts: dict[str, object] = dict(endpoint.options)
        protocol = endpoint.protocol
        if protocol in (MQTT5, MQTT311):
            filters = _strings(opts.get("topicfilter")) or _filters(
                _address_values(messages, "topic_name"), "+", "/") or _strings(
                opts.get("topic"))
            group = opts.get("sharedsubscriptiongroup")
            if group:
                filters = [f"$share/{group}/{f}" for f in filters]
            opts["filters"] = filters
            opts["protocol"] = "3.1.1" if protocol == MQTT311 else "5.0"
            if "sessionexpiryinterval" in opts:
                opts["session_expiry"] = opts["sessionexpiryinterval"]
            return MqttConsumer(settings_for(endpoint, opts))
        if protocol == KAFKA:
            topics = _strings(opts.get("topics")) or _strings(opts.get("topic")) or [
                t for t in _address_values(messages, "topic") if "{" not in t]
            opts["topics"] = list(dict.fromkeys(topics))
            opts.setdefault("consumergroup", f"xrgw-{endpoint.endpoint_id}")
            return KafkaConsumer(settings_for(endpoint, opts))
        if protocol == NATS:
            opts["subjects"] = _strings(opts.get("subjectfilter")) or _strings(
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
        opts: dict[str, object] = dict(endpoint.options)
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
        opts = endpoint.options
        protocol = endpoint.protocol
        out: dict[str, JSON] = {}
        if protocol in (MQTT5, MQTT311) and isinstance(opts.get("topic"), str):
            out["topic_name"] = opts["topic"]
        elif protocol == KAFKA:
            if isinstance(opts.get("topic"), str):
                out["topic"] = opts["topic"]
            if isinstance(opts.get("key"), str):
                out["key"] = opts["key"]
        elif protocol == NATS and isinstance(opts.get("subject"), str):
            out["subject"] = opts["subject"]
        return out


REGISTRY = AdapterRegistry()
