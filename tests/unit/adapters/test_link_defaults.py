"""Defaults an adapter derives from its other options: the AMQP terminus durability of a
`/queue/` address, the MQTT session of a shared subscription."""

from __future__ import annotations

import pytest
from proton import Terminus

from adapters.amqp import AmqpConsumer, AmqpOptions
from adapters.amqp.terminus import AutoDurability, apply_terminus, durability_for
from adapters.mqtt import MqttOptions
from gateway.ports import EndpointSettings


@pytest.mark.parametrize(("address", "expected"), [
    ("/queue/orders", "configuration"),  # RabbitMQ 3.x declares it: durable
    ("/exchange/amq.topic/k", "none"),  # RabbitMQ's own per-attach queue: not kept
    ("/topic/k", "none"),
    ("/amq/queue/orders", "none"),  # an existing queue, nothing is declared
    ("orders", "none"),
])
def test_auto_durability_asks_for_a_durable_queue_on_queue_addresses(address, expected):
    assert durability_for("auto", address) == expected


@pytest.mark.parametrize("setting", ["none", "configuration", "unsettled-state"])
def test_an_explicit_durability_is_kept(setting):
    assert durability_for(setting, "/queue/orders") == setting
    assert durability_for(setting, "/topic/k") == setting


def test_apply_terminus_sets_durability_and_expiry():
    class Spy:  # the two attributes a proton Terminus has for them
        durability = Terminus.NONDURABLE
        expiry_policy = Terminus.EXPIRE_WITH_SESSION

    spy = Spy()
    apply_terminus(spy, "auto", "never", "/queue/orders")  # type: ignore[arg-type]
    assert (spy.durability, spy.expiry_policy) == (Terminus.CONFIGURATION,
                                                    Terminus.EXPIRE_NEVER)
    apply_terminus(spy, "unsettled-state", "link-detach", "/topic/x")  # type: ignore[arg-type]
    assert (spy.durability, spy.expiry_policy) == (Terminus.DELIVERIES,
                                                    Terminus.EXPIRE_WITH_LINK)


_REFUSED = ("amqp:precondition-failed: PRECONDITION_FAILED - inequivalent arg 'durable' for "
            "queue 'q' in vhost '/': received 'true' but current is 'false'")


def test_auto_follows_an_existing_transient_queue_once_refused(caplog):
    durability = AutoDurability("auto")
    assert durability.for_address("/queue/q") == "configuration"
    with caplog.at_level("WARNING", logger="adapters.amqp"):
        assert durability.refused("/queue/q", _REFUSED)
        assert not durability.refused("/queue/q", _REFUSED)  # already transient
    assert durability.for_address("/queue/q") == "none"
    assert durability.for_address("/queue/other") == "configuration"
    assert [r.getMessage().split(" exists")[0] for r in caplog.records] == ["AMQP /queue/q"]


@pytest.mark.parametrize(("setting", "address", "why"), [
    ("configuration", "/queue/q", _REFUSED),  # an explicit choice is kept
    ("none", "/queue/q", _REFUSED),
    ("auto", "/exchange/x/k", _REFUSED),  # asked transient already
    ("auto", "/queue/q", "amqp:precondition-failed: inequivalent arg 'x-max-length'"),
    ("auto", "/queue/q", "amqp:not-found: no queue 'durable'"),
])
def test_other_refusals_are_not_retried(setting, address, why):
    durability = AutoDurability(setting)
    before = durability.for_address(address)
    assert not durability.refused(address, why)
    assert durability.for_address(address) == before


def test_amqp_options_read_terminus_settings():
    opts = AmqpOptions.parse(EndpointSettings("amqp://h", options={
        "node": "/queue/q", "terminus-durability": "none", "expiry_policy": "never"}))
    assert (opts.terminus_durability, opts.expiry_policy) == ("none", "never")
    default = AmqpOptions.parse(EndpointSettings("amqp://h", options={"node": "/queue/q"}))
    assert (default.terminus_durability, default.expiry_policy) == ("auto", "session-end")
    with pytest.raises(ValueError, match="terminus-durability"):
        AmqpOptions.parse(EndpointSettings("amqp://h", options={
            "node": "/queue/q", "terminus-durability": "forever"}))


def _mqtt(protocol: str = "5.0", **options: object) -> MqttOptions:
    return MqttOptions.parse(EndpointSettings("mqtt://h", options={
        "protocol": protocol, "topicfilter": "a/+", **options}))


def test_a_plain_subscription_keeps_a_persistent_session():
    opts = _mqtt()
    assert (opts.sessionexpiryinterval, opts.cleanstart) == (86400, False)
    opts = _mqtt("3.1.1")
    assert opts.cleanstart is False


@pytest.mark.parametrize("group_options", [{"sharedsubscriptiongroup": "g"},
                                           {"topicfilter": "$share/g/a/+"}])
def test_a_shared_subscription_session_ends_with_the_connection(group_options):
    opts = _mqtt(**group_options)
    assert (opts.sessionexpiryinterval, opts.cleanstart) == (0, False)
    opts = _mqtt("3.1.1", **group_options)
    assert opts.cleanstart is True  # 3.1.1 has no expiry: only a clean session ends


def test_a_shared_subscription_keeps_what_the_operator_wrote():
    opts = _mqtt(sharedsubscriptiongroup="g", session_expiry=600)
    assert opts.sessionexpiryinterval == 600
    opts = _mqtt("3.1.1", sharedsubscriptiongroup="g", cleansession=False)
    assert opts.cleanstart is False


def test_asking_for_a_transient_queue_is_logged_once(caplog):
    with caplog.at_level("WARNING", logger="adapters.amqp"):
        AmqpConsumer(EndpointSettings("amqp://h", options={
            "node": "/queue/q", "terminus-durability": "none"}))
        AmqpConsumer(EndpointSettings("amqp://h", options={"node": "/queue/q"}))
        AmqpConsumer(EndpointSettings("amqp://h", options={
            "node": "/exchange/x/k", "terminus-durability": "none"}))
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "transient queue" in warnings[0], warnings
