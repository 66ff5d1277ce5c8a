"""The exact words of an output's RenderFailed (gateway.envelope.outgoing): the route
dead-letters the message with them, so an operator reads which definition or default
did not render and why."""

from __future__ import annotations

import pytest

from gateway.cloudevents.event import CloudEvent
from gateway.envelope.outgoing import OutputFormat, RenderFailed, with_defaults
from gateway.record import NativeMessage

from .defs import define, opt


def _event() -> CloudEvent:
    return CloudEvent.create({"specversion": "1.0", "id": "e-1", "type": "com.example.sale",
                              "source": "/stores/12"}, {"amount": 1})


def test_no_fitting_definition_names_the_events_type() -> None:
    native = OutputFormat("KAFKA", deliver="native", definitions=())
    with pytest.raises(RenderFailed) as failed:
        native.render(_event(), {})
    assert str(failed.value) == (
        "no message definition of the producer endpoint fits CloudEvent type "
        "'com.example.sale'")


def test_a_native_render_error_is_the_failure_message() -> None:
    native = OutputFormat("KAFKA", deliver="native",
                          definitions=(define("k", "KAFKA", [opt("key", "{orderid}")]),))
    with pytest.raises(RenderFailed) as failed:
        native.render(_event(), {})
    assert str(failed.value) == (
        "/messagegroups/g/messages/k: protocoloptions.key: placeholder {orderid} has no "
        "value in the event or context")


def test_a_default_template_that_does_not_parse_names_the_field_and_the_template() -> None:
    record = NativeMessage("KAFKA", {}, payload=b"x")
    with pytest.raises(RenderFailed) as failed:
        with_defaults(record, {"topic": "orders.{region"}, _event())
    assert str(failed.value) == ("topic template 'orders.{region': no value for unbalanced "
                                 "brace in template 'orders.{region'")
