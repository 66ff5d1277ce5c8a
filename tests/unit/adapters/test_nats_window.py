"""A created JetStream durable's `max_ack_pending` (the NATS consumer's `max_in_flight`)
leaves the server room to send ahead of a route's window: with a limit no larger than the
window, the server stopped at every full window and resumed in small steps per `+ACK`,
twice a plain bridge's CPU per message on the NATS server (bench/README.md, eighteenth
round)."""

from __future__ import annotations

from adapters.nats import NatsOptions
from gateway.config._model import RouteConfig
from gateway.ports import EndpointSettings


def test_the_default_window_of_a_nats_consumer_is_above_a_routes() -> None:
    opts = NatsOptions.parse(EndpointSettings("nats://127.0.0.1:4222",
                                              options={"stream": "s"}))
    assert opts.max_in_flight >= 2 * RouteConfig.inflight  # the field's default


def test_a_configured_window_is_kept() -> None:
    opts = NatsOptions.parse(EndpointSettings("nats://127.0.0.1:4222",
                                              options={"stream": "s", "max_in_flight": 100}))
    assert opts.max_in_flight == 100
