"""What an observing consumer (shadow mode) changes in the endpoint's settings, per
adapter: never the real consumer's group, shared subscription, queue group, durable or
client id; AMQP refused."""

from __future__ import annotations

import pytest

from adapters.registry import ADAPTERS, REGISTRY
from gateway.config import EndpointConfig, for_adapter
from gateway.protocols import AMQP, KAFKA, MQTT5, NATS, PROFILES, profile
from tests.unit.core.defs import define, opt


def _observer_options(protocol: str, field: str, address: str,
                      options: dict[str, object]) -> dict[str, object]:
    prof = profile(protocol)
    messages = [define("m", protocol, [opt(field, address)])]
    endpoint = for_adapter(EndpointConfig("e", protocol, ("consumer",), ("x://h:1",)),
                           messages)
    opts = dict(options)
    adapter = ADAPTERS[prof.family]
    adapter.prepare_observer(prof, endpoint, opts)
    adapter.prepare_consumer(prof, endpoint, opts)
    return opts


def test_mqtt_observer_plain_subscription_clean_session() -> None:
    opts = _observer_options(MQTT5, "topic_name", "a/{x}",
                             {"sharedsubscriptiongroup": "real", "cleanstart": False})
    assert opts["topicfilter"] == ["a/+"]
    assert opts["cleanstart"] is True and opts["sessionexpiryinterval"] == 0


def test_kafka_observer_own_group_from_latest() -> None:
    opts = _observer_options(KAFKA, "topic", "t", {"consumergroup": "real"})
    assert str(opts["consumergroup"]).startswith("xrgw-observe-e-")
    assert opts["autooffsetreset"] == "latest"
    told = _observer_options(KAFKA, "topic", "t", {"observeoffset": "earliest"})
    assert told["autooffsetreset"] == "earliest"
    again = _observer_options(KAFKA, "topic", "t", {})
    assert again["consumergroup"] != opts["consumergroup"]  # one group per observer


def test_nats_observer_no_queue_group() -> None:
    opts = _observer_options(NATS, "subject", "a.{x}", {"queuegroup": "real"})
    assert "queuegroup" not in opts and opts["observe"] is True


def test_amqp_observer_refused_and_every_profile_says_how_or_why() -> None:
    with pytest.raises(ValueError, match="cannot be observed"):
        _observer_options(AMQP, "subject", "s", {})
    for prof in PROFILES:
        assert prof.observe.how or prof.observe.refused, prof.name


def test_observer_gets_its_own_client_id() -> None:
    endpoint = for_adapter(EndpointConfig("e", MQTT5, ("consumer",), ("mqtt://h:1883",),
                                          client_id="real", options={"topicfilter": "a/#"}))
    real = REGISTRY.consumer(endpoint)
    observer = REGISTRY.consumer(endpoint, observe=True)
    assert real.client_id == "real"  # type: ignore[attr-defined]
    assert observer.client_id.startswith("xrgw-observe-")  # type: ignore[attr-defined]
