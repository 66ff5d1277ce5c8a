"""Prometheus metrics of the gateway (prefix `xrgw_`), one registry per gateway instance.

Names and labels are part of the product's contract: the Helm chart's dashboard and
alert rules use them, and a test scrapes a running gateway to check they exist.
Credentials never appear in labels; endpoint labels are endpoint ids from the config.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.received = Counter(
            "xrgw_messages_received", "Messages received from consumer endpoints",
            ["endpoint", "protocol"], registry=r)
        self.matched = Counter(
            "xrgw_messages_matched", "Messages that matched a message definition",
            ["endpoint", "message"], registry=r)
        self.unmatched = Counter(
            "xrgw_messages_unmatched", "Messages that matched no message definition",
            ["endpoint"], registry=r)
        self.published = Counter(
            "xrgw_messages_published", "Messages confirmed by producer endpoints",
            ["endpoint"], registry=r)
        self.publish_errors = Counter(
            "xrgw_publish_errors", "Failed publish attempts (each retry counts)",
            ["endpoint", "reason"], registry=r)
        self.deadletter = Counter(
            "xrgw_deadletter", "Messages sent to the dead letter, by reason",
            ["reason"], registry=r)
        self.dropped = Counter(
            "xrgw_messages_dropped",
            "Messages that could not even be dead-lettered (no dead letter configured)",
            ["reason"], registry=r)
        self.processing = Histogram(
            "xrgw_processing_seconds", "Receive to confirmed (or dead-lettered)",
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5,
                     5, 10), registry=r)
        self.inflight = Gauge(
            "xrgw_inflight", "Messages received and not yet settled", ["route"], registry=r)
        self.connected = Gauge(
            "xrgw_endpoint_connected", "1 when the endpoint's connection is up",
            ["endpoint"], registry=r)
        self.definitions = Gauge(
            "xrgw_definitions_loaded", "Message definitions compiled into the matcher",
            registry=r)
        self.reloads = Counter(
            "xrgw_config_reloads", "Configuration reloads by result (ok / rejected)",
            ["result"], registry=r)

    def render(self) -> bytes:
        return generate_latest(self.registry)
