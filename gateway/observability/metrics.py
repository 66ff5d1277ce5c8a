"""Prometheus metrics of the gateway (prefix `xrgw_`), one registry per gateway instance.

Names and labels are part of the product's contract: the Helm chart's dashboard and
alert rules use them, and a test scrapes a running gateway to check they exist.
Credentials never appear in labels; endpoint labels are endpoint ids from the config.

Message metrics follow `xrgw_messages_<what happened>`. Renamed metrics keep their old
name as an alias for one release (`Metrics.aliases`): the same samples under both names,
so dashboards and alerts can move at their own pace.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.gc_collector import GCCollector
from prometheus_client.metrics_core import Metric
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from gateway import buildinfo
from gateway.deadletter import reasons
from gateway.ports import Backlog, PartitionLag, StreamPending

#: The release that drops the old names of the metrics renamed in 0.2.0.
ALIAS_REMOVED_IN = "0.3.0"

#: The labels of one backlog series, as the gauge wants them.
BacklogSeries = tuple[str, ...]

_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5,
                    5, 10)


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        # Every counter and histogram child would also export a `<name>_created` series:
        # twice the series, read by no dashboard or alert. prometheus_client's switch is
        # process-wide; the gateway owns its process.
        disable_created_metrics()  # type: ignore[no-untyped-call]  # untyped upstream
        self.registry = registry or CollectorRegistry()
        r = self.registry
        # The private registry does not get prometheus_client's default collectors; the
        # process (memory, CPU, file descriptors) and interpreter ones are what a pod's
        # dashboard shows first.
        _register_runtime_collectors(r)
        self.build_info = Gauge(
            "xrgw_build_info", "Always 1; the labels say which build is running",
            ["version", "revision"], registry=r)
        self.build_info.labels(buildinfo.VERSION, buildinfo.revision()).set(1)
        self.received = Counter(
            "xrgw_messages_received", "Messages received from consumer endpoints",
            ["endpoint", "protocol"], registry=r)
        self.received_bytes = Counter(
            "xrgw_received_bytes", "Body bytes of the messages received from consumer "
            "endpoints", ["endpoint", "protocol"], registry=r)
        self.matched = Counter(
            "xrgw_messages_matched", "Messages that matched a message definition",
            ["endpoint", "message"], registry=r)
        self.invalid_data = Counter(
            "xrgw_messages_invalid_data", "Matched messages whose body failed the "
            "definition's schema (routes with schema: enforce; dead-lettered)",
            ["endpoint", "message"], registry=r)
        self.unmatched = Counter(
            "xrgw_messages_unmatched", "Messages that matched no message definition",
            ["endpoint"], registry=r)
        self.published = Counter(
            "xrgw_messages_published", "Messages confirmed by producer endpoints",
            ["endpoint"], registry=r)
        self.published_bytes = Counter(
            "xrgw_published_bytes", "Body bytes of the messages confirmed by producer "
            "endpoints", ["endpoint"], registry=r)
        self.publish_errors = Counter(
            "xrgw_publish_errors", "Failed publish attempts (each retry counts)",
            ["endpoint", "reason"], registry=r)
        self.deadletter = Counter(
            "xrgw_messages_deadlettered", "Messages sent to the dead letter, by reason",
            ["reason"], registry=r)
        self.deadletter_bytes = Counter(
            "xrgw_deadletter_bytes", "Body bytes of the dead letters the dead-letter "
            "endpoint confirmed (not counted as publishes)", registry=r)
        self.dropped = Counter(
            "xrgw_messages_dropped",
            "Messages that could not even be dead-lettered (no dead letter configured)",
            ["reason"], registry=r)
        # Request-reply routes (`reply: true`), see gateway/runtime/reply.py.
        self.replies = Counter(
            "xrgw_replies", "Requests of reply routes by result (answered / no-reply / "
            "failed / nonconforming)", ["route", "result"], registry=r)
        self.replies_late = Counter(
            "xrgw_replies_late", "Answers that came after their request timed out (or "
            "named no request of this gateway): dropped", ["endpoint"], registry=r)
        self.processing = Histogram(
            "xrgw_processing_seconds", "Receive to confirmed (or dead-lettered), per route",
            ["route"], buckets=_LATENCY_BUCKETS, registry=r)
        self.inflight = Gauge(
            "xrgw_messages_inflight", "Messages received and not yet settled", ["route"],
            registry=r)
        self.inflight_limit = Gauge(
            "xrgw_messages_inflight_limit",
            "The route's in-flight window: intake pauses when this many are unsettled",
            ["route"], registry=r)
        self.route_stalled = Gauge(
            "xrgw_route_stalled", "1 while the route is stalled for this cause "
            "(output-unavailable, deadletter-held, source-failing, no-progress); the "
            "route is not ready meanwhile (see gateway/runtime/stalls.py)",
            ["route", "cause"], registry=r)
        self.consumer_lag = Gauge(
            "xrgw_consumer_lag", "Kafka: records of an assigned partition not yet "
            "settled by this gateway (end offset minus first unsettled offset)",
            ["endpoint", "topic", "partition"], registry=r)
        self.consumer_pending = Gauge(
            "xrgw_consumer_pending", "JetStream: messages of the durable consumer not yet "
            "acknowledged (waiting plus delivered and unacknowledged)",
            ["endpoint", "stream", "consumer"], registry=r)
        self.connected = Gauge(
            "xrgw_endpoint_connected", "1 when the endpoint's connection is up",
            ["endpoint"], registry=r)
        self.definitions = Gauge(
            "xrgw_definitions_loaded", "Message definitions compiled into the matcher",
            registry=r)
        self.reloads = Counter(
            "xrgw_config_reloads", "Configuration reloads by result (ok / rejected)",
            ["result"], registry=r)
        self.reload_ok = Gauge(
            "xrgw_config_last_reload_successful", "1 when the last configuration load "
            "(start-up or reload) succeeded, 0 when the last reload was rejected (the "
            "previous configuration keeps serving)", registry=r)
        self.reload_ok.set(1)
        # Counters start at 0 for the label values known up front, so rate() and
        # absence alerts see them before the first event.
        for result in ("ok", "rejected"):
            self.reloads.labels(result)
        for reason in reasons.ALL:
            self.deadletter.labels(reason)
            self.dropped.labels(reason)
        self.aliases = (RenamedAlias("xrgw_deadletter", self.deadletter),
                        RenamedAlias("xrgw_inflight", self.inflight))
        for alias in self.aliases:
            r.register(alias)

    def render(self) -> bytes:
        """The exposition: every `endpoint` label also as `xrgw_endpoint` (see
        `EndpointLabel`)."""
        return generate_latest(EndpointLabel(self.registry))

    def known_source(self, endpoint: str, protocol: str) -> None:
        """A consumer endpoint's counters at 0 before its first message."""
        self.received.labels(endpoint, protocol)
        self.received_bytes.labels(endpoint, protocol)
        self.unmatched.labels(endpoint)

    def show_backlog(self, endpoint: str, backlog: Iterable[Backlog],
                     shown: set[BacklogSeries]) -> set[BacklogSeries]:
        """Set the backlog gauges of `endpoint` and remove the series it no longer reports
        (a revoked partition must not keep its last lag forever); returns what is shown
        now, for the next call."""
        now: set[BacklogSeries] = set()
        for entry in backlog:
            if isinstance(entry, PartitionLag):
                series = ("lag", endpoint, entry.topic, str(entry.partition))
            else:
                assert isinstance(entry, StreamPending)
                series = ("pending", endpoint, entry.stream, entry.consumer)
            self._backlog_gauge(series).labels(*series[1:]).set(entry.messages)
            now.add(series)
        for gone in shown - now:
            self._backlog_gauge(gone).remove(*gone[1:])
        return now

    def _backlog_gauge(self, series: BacklogSeries) -> Gauge:
        return self.consumer_lag if series[0] == "lag" else self.consumer_pending


#: The label every endpoint series carries; `endpoint` stays beside it until
#: ALIAS_REMOVED_IN (deprecated: it collides with the Prometheus Operator's target label,
#: which made `honorLabels: true` necessary).
ENDPOINT_LABEL = "xrgw_endpoint"
DEPRECATED_ENDPOINT_LABEL = "endpoint"


class EndpointLabel:
    """The registry as scraped: each sample with an `endpoint` label gets the same value
    as `xrgw_endpoint`, first. The metrics are declared and updated with `endpoint` (one
    label, one place); the second name costs only at scrape time."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def collect(self) -> Iterator[Metric]:
        for family in self.registry.collect():
            if not any(DEPRECATED_ENDPOINT_LABEL in s.labels for s in family.samples):
                yield family
                continue
            copy = Metric(family.name, family.documentation, family.type, family.unit)
            for sample in family.samples:
                labels = sample.labels
                if DEPRECATED_ENDPOINT_LABEL in labels:
                    labels = {ENDPOINT_LABEL: labels[DEPRECATED_ENDPOINT_LABEL], **labels}
                copy.samples.append(sample._replace(labels=labels))
            yield copy


class RenamedAlias(Collector):
    """Exports a metric's samples again under its old name (deprecated): one source of
    truth, two names, for one release."""

    def __init__(self, old_name: str, metric: Counter | Gauge) -> None:
        self.old_name = old_name
        self.metric = metric

    def collect(self) -> Iterator[Metric]:
        for family in self.metric.collect():
            alias = Metric(self.old_name, f"Deprecated alias of {family.name}, removed in "
                           f"{ALIAS_REMOVED_IN}: {family.documentation}", family.type)
            for sample in family.samples:
                suffix = sample.name[len(family.name):]  # `_total` of a counter
                alias.add_sample(self.old_name + suffix, sample.labels, sample.value,
                                 sample.timestamp)
            yield alias


def _register_runtime_collectors(registry: CollectorRegistry) -> None:
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)


def observe_many(histogram: Histogram, value: float, count: int) -> None:
    """`count` observations of the same `value` (the messages of one batch finish
    together) at the cost of one. prometheus_client has no weighted observe, so this adds
    to the child's bucket and sum the way `observe` does, `count` at a time; a client
    without those internals gets `count` plain observations."""
    if count <= 0:
        return
    buckets = getattr(histogram, "_buckets", None)
    bounds = getattr(histogram, "_upper_bounds", None)
    total = getattr(histogram, "_sum", None)
    if buckets is None or bounds is None or total is None:
        for _ in range(count):
            histogram.observe(value)
        return
    total.inc(value * count)
    for index, bound in enumerate(bounds):
        if value <= bound:
            buckets[index].inc(count)
            break


def route_children(metrics: Metrics, route: str, window: int) -> tuple[Gauge, Histogram]:
    """The in-flight gauge and latency histogram children of one route, with the route's
    window size published next to them (alerts divide in-flight by it)."""
    metrics.inflight_limit.labels(route).set(window)
    return metrics.inflight.labels(route), metrics.processing.labels(route)


__all__ = ["ALIAS_REMOVED_IN", "ENDPOINT_LABEL", "EndpointLabel", "Metrics", "RenamedAlias",
           "observe_many", "route_children"]
