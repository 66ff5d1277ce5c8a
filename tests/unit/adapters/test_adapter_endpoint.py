"""What the core hands the adapter factory (`gateway.config.for_adapter` ->
`gateway.ports.AdapterEndpoint`): the endpoint's connection facts and the address
templates of the messages a consumer subscribes for, split into the levels a broker
subscription matches."""

from __future__ import annotations

from gateway.config import EndpointConfig, Secret, for_adapter
from gateway.ports import AddressTemplate
from gateway.protocols import AMQP, HTTP, MQTT5, NATS
from tests.unit.core.defs import define, opt


def test_address_templates_of_the_profile_address_field_only() -> None:
    messages = [define("a", MQTT5, [opt("topic_name", "s/{id}/t"), opt("qos", 1)]),
                define("b", MQTT5, [opt("topic_name", "fixed/x")])]
    endpoint = for_adapter(EndpointConfig("e", MQTT5, ("consumer",), ("mqtt://h",)), messages)
    assert endpoint.addresses == (AddressTemplate("s/{id}/t", ("s", None, "t"), "/"),
                                  AddressTemplate("fixed/x", ("fixed", "x"), "/"))
    assert [a.fixed for a in endpoint.addresses] == [False, True]
    assert endpoint.addresses[0].wildcard_filter("+") == "s/+/t"


def test_levels_split_on_the_address_field_separator() -> None:
    messages = [define("a", NATS, [opt("subject", "o.{region}-x.created")])]
    endpoint = for_adapter(EndpointConfig("e", NATS, ("consumer",), ("nats://h",)), messages)
    assert endpoint.addresses[0].wildcard_filter("*") == "o.*.created"


def test_a_template_that_does_not_parse_keeps_its_text_and_gives_no_filter() -> None:
    messages = [define("a", HTTP, [opt("path", "/a/{unclosed")])]
    endpoint = for_adapter(EndpointConfig("e", HTTP, ("consumer",), ("http://h",)), messages)
    [address] = endpoint.addresses
    assert address.text == "/a/{unclosed" and address.levels is None
    assert address.wildcard_filter("+") is None


def test_no_address_field_and_producers_give_no_templates() -> None:
    messages = [define("a", AMQP, [opt("subject", "s")])]
    assert for_adapter(EndpointConfig("e", AMQP, ("consumer",), ("amqp://h",)),
                       messages).addresses == ()
    assert for_adapter(EndpointConfig("e", MQTT5, ("producer",), ("mqtt://h",))).addresses == ()


def test_repr_shows_no_password() -> None:
    endpoint = for_adapter(EndpointConfig("e", MQTT5, ("consumer",), ("mqtt://u:pw1@h",),
                                          username="u", password=Secret("pw2")))
    assert "pw1" not in repr(endpoint) and "pw2" not in repr(endpoint)
    assert endpoint.uri == "mqtt://u:pw1@h" and endpoint.password == Secret("pw2")
