"""What the adapter registry derives for an endpoint from its profile and definitions:
subscriptions from the messages' address templates (one level per placeholder, on the
address field's separator), the MQTT version, the AMQP node, the output fields."""

from __future__ import annotations

import pytest

from adapters.registry import ADAPTERS, REGISTRY
from gateway.config import EndpointConfig, for_adapter
from gateway.definitions.model import MessageDefinition
from gateway.protocols import AMQP, HTTP, KAFKA, MQTT5, MQTT311, NATS, profile
from tests.unit.core.defs import define, opt


def _consumer_options(protocol: str, field: str, addresses: list[str],
                      options: dict[str, object] | None = None,
                      uri: str = "x://h:1") -> dict[str, object]:
    prof = profile(protocol)
    messages: list[MessageDefinition] = [
        define(f"m{i}", protocol, [opt(field, a)]) for i, a in enumerate(addresses)]
    endpoint = for_adapter(EndpointConfig("e", protocol, ("consumer",), (uri,)), messages)
    opts = dict(options or {})
    ADAPTERS[prof.family].prepare_consumer(prof, endpoint, opts)
    return opts


@pytest.mark.parametrize(("protocol", "version"), [(MQTT5, "5.0"), (MQTT311, "3.1.1")])
def test_mqtt_filters_and_version(protocol: str, version: str) -> None:
    opts = _consumer_options(protocol, "topic_name", ["a/{x}/b", "a/{y}/b", "c/{z}"])
    assert opts["topicfilter"] == ["a/+/b", "c/+"]
    assert opts["protocol"] == version
    shared = _consumer_options(protocol, "topic_name", ["a/{x}"],
                               {"sharedsubscriptiongroup": "g"})
    assert shared["topicfilter"] == ["$share/g/a/+"]


def test_nats_filters_are_one_token_per_placeholder() -> None:
    opts = _consumer_options(NATS, "subject", ["orders.{region}.created", "x.{a}"])
    assert opts["subjectfilter"] == ["orders.*.created", "x.*"]


def test_kafka_topics_are_the_constant_ones() -> None:
    opts = _consumer_options(KAFKA, "topic", ["t1", "t-{x}", "t1"])
    assert opts["topics"] == ["t1"] and opts["consumergroup"] == "xrgw-e"


def test_http_paths_and_amqp_node() -> None:
    assert _consumer_options(HTTP, "path", ["/a/{x}"])["paths"] == ["/a/{x}"]
    assert _consumer_options(AMQP, "properties", [], uri="amqp://h:1/q1")["node"] == "/q1"


@pytest.mark.parametrize(("protocol", "options", "fields"), [
    (MQTT5, {"topic": "t", "qos": 1}, {"topic_name": "t"}),
    (KAFKA, {"topic": "t", "key": "k", "partition": 2}, {"topic": "t", "key": "k",
                                                          "partition": 2}),
    (NATS, {"subject": "s"}, {"subject": "s"}),
    (AMQP, {"node": "q"}, {}),
    (HTTP, {"method": "PUT"}, {}),
])
def test_output_defaults(protocol: str, options: dict[str, object],
                         fields: dict[str, object]) -> None:
    endpoint = EndpointConfig("e", protocol, ("producer",), ("x://h:1",),
                              options=options)
    assert REGISTRY.output_defaults(for_adapter(endpoint)) == fields


def test_a_protocol_without_an_adapter_is_refused() -> None:
    endpoint = EndpointConfig("e", "BUNNYMQ/0.9.1", ("producer",), ("x://h:1",))
    with pytest.raises(ValueError, match=r"no adapter for 'BUNNYMQ/0\.9\.1'"):
        REGISTRY.producer(for_adapter(endpoint))
