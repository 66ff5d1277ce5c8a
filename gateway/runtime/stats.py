"""What a route tells the outside about its work: Prometheus series, conformance-report
calls and log lines, in one place.

- Counted per batch, not per message: the intake counts a batch's messages, bytes and
  matches once, and a confirmation's delivered records in one `inc`.
- Prometheus `labels()` costs a lock and a dict lookup per call: the children a route
  uses on every batch are looked up once and kept here.
- Every endpoint has its `xrgw_endpoint_connected` series from the start (an alert on 0
  must be able to fire for an endpoint never reached), and it follows the client's own
  `connected` afterwards (set on a change only).
- Dead letters are counted apart (`xrgw_messages_deadlettered_total{reason}`,
  `xrgw_deadletter_bytes_total`), not as publishes of the dead-letter endpoint.
- Log lines carry the route and endpoint as fields; a message's own text reaches them
  only through the route's redactor (the callers pass redacted details).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from operator import methodcaller
from typing import Any

from gateway.convert import Conversion
from gateway.observability.conformance import RouteReport
from gateway.observability.logs import fields
from gateway.observability.metrics import Metrics, observe_many, route_children
from gateway.ports import Outcome, all_delivered
from gateway.record import NativeMessage
from gateway.runtime.ledger import Member
from gateway.runtime.output import Output

# `NativeMessage.body_length` of each record, through its own class's method.
_BODY_LENGTH = methodcaller("body_length")

log = logging.getLogger("xrgw.route")


class RouteStats:
    """The metric children, report and log lines of one route."""

    def __init__(self, name: str, source_endpoint: str, metrics: Metrics,
                 report: RouteReport | None, window: int, outputs: Sequence[Output]) -> None:
        self.name = name
        self.source_endpoint = source_endpoint
        self.metrics = metrics
        self.report = report
        self._inflight, self._processing = route_children(metrics, name, window)
        self._received: dict[str, tuple[Any, Any]] = {}  # protocol -> (messages, bytes)
        self._matched: dict[str, Any] = {}
        self._published = {o.endpoint_id: (metrics.published.labels(o.endpoint_id),
                                           metrics.published_bytes.labels(o.endpoint_id))
                           for o in outputs}
        self._up: dict[str, bool] = {}  # each endpoint's `connected` last seen

    # -- the window --------------------------------------------------------------------------
    def in_flight(self, count: int) -> None:
        self._inflight.set(count)

    def processed(self, seconds: float, count: int) -> None:
        observe_many(self._processing, seconds, count)

    # -- intake ------------------------------------------------------------------------------
    def intake(self, received: dict[str, list[int]], matched: dict[str, int],
               unmatched: int) -> None:
        """A batch's messages and bytes per protocol, matches per definition."""
        metrics = self.metrics
        for protocol, (count, size) in received.items():
            counters = self._received.get(protocol)
            if counters is None:
                counters = self._received[protocol] = (
                    metrics.received.labels(self.source_endpoint, protocol),
                    metrics.received_bytes.labels(self.source_endpoint, protocol))
            counters[0].inc(count)
            counters[1].inc(size)
        for xid, count in matched.items():
            child = self._matched.get(xid)
            if child is None:
                child = self._matched[xid] = metrics.matched.labels(self.source_endpoint, xid)
            child.inc(count)
        if unmatched:
            metrics.unmatched.labels(self.source_endpoint).inc(unmatched)

    def invalid_data(self, conversion: Conversion) -> None:
        """Per definition: which schema rejects what the sources send."""
        definition = conversion.match.definition
        xid = definition.xid if definition is not None else ""
        self.metrics.invalid_data.labels(self.source_endpoint, xid).inc()

    # -- the conformance report (`xrgw_conformance`, the admin page) ---------------------------
    def report_received(self, count: int) -> None:
        if self.report is not None:
            self.report.received_messages(count)

    def report_converted(self, matched: dict[str, int], rendered: dict[str, int],
                         now: datetime) -> None:
        """Counted per batch, as the metrics are."""
        report = self.report
        if report is None:
            return
        for xid, count in matched.items():
            report.matched(xid, now, count)
        for xid, count in rendered.items():
            report.rendered(xid, count)

    def report_unconverted(self, sampled: NativeMessage, conversion: Conversion,
                           reason: str, now: datetime) -> None:
        if self.report is not None:
            definition = conversion.match.definition
            self.report.failed(sampled, reason, definition.xid if definition else None,
                               conversion.explain, conversion.detail, now)

    def report_unrendered(self, member: Member, xid: str, now: datetime) -> None:
        """The sample is what the dead letter holds: this event alone."""
        if self.report is not None and member.reason is not None:
            self.report.failed(member.original(), member.reason, xid, (),
                               "; ".join(member.failures), now)

    # -- endpoints ---------------------------------------------------------------------------
    def connected(self, endpoint: str, up: bool) -> None:
        self._up[endpoint] = up
        self.metrics.connected.labels(endpoint).set(1 if up else 0)

    def follow(self, endpoint: str, up: bool) -> None:
        """`connected`, on a change only (clients reconnect on their own)."""
        if self._up.get(endpoint) != up:
            self.connected(endpoint, up)

    def endpoint_connected(self, endpoint: str, attempts: int) -> None:
        self.connected(endpoint, True)
        if attempts > 1:
            log.info("endpoint connected after %d attempt(s)", attempts,
                     extra=fields(route=self.name, endpoint=endpoint))

    def endpoint_down(self, endpoint: str, delay: float, error: BaseException,
                      first: bool) -> None:
        """One warning per outage, with the endpoint and the cause; the retries are debug
        lines (`xrgw_endpoint_connected` shows how long it lasts)."""
        self.connected(endpoint, False)
        # pragma: no mutate start
        (log.warning if first else log.debug)(
            "endpoint not connected; retrying in %.1fs", delay,
            extra=fields(route=self.name, endpoint=endpoint, error=error))
        # pragma: no mutate end

    # -- delivery ----------------------------------------------------------------------------
    def account(self, output: Output, records: Sequence[NativeMessage],
                outcomes: Sequence[Outcome], deadletter: bool) -> list[int]:
        """Count delivered records and failures; the indexes of the failed ones."""
        failed = ([] if all_delivered(outcomes)
                  else [i for i, outcome in enumerate(outcomes) if not outcome.delivered])
        delivered = len(outcomes) - len(failed)
        metrics = self.metrics
        if delivered:
            if deadletter or output.endpoint_id not in self._published:
                size = metrics.deadletter_bytes
            else:
                messages, size = self._published[output.endpoint_id]
                messages.inc(delivered)
            if failed:
                skip = set(failed)
                size.inc(sum(r.body_length() for i, r in enumerate(records) if i not in skip))
            else:
                size.inc(sum(map(_BODY_LENGTH, records)))
        for i in failed:
            metrics.publish_errors.labels(
                output.endpoint_id, "retryable" if outcomes[i].retryable else "rejected").inc()
        return failed

    def submit_raised(self, endpoint: str, count: int) -> None:
        self.metrics.publish_errors.labels(endpoint, "exception").inc(count)

    def deadlettered(self, reason: str) -> None:
        self.metrics.deadletter.labels(reason).inc()

    def dropped(self, what: str, reason: str, detail: str, endpoint: str,
                definition: str | None = None) -> None:
        """A message (or an answer: `what`) neither delivered nor dead-lettered, as the
        config says (`deadletter: log`): logged and counted."""
        # pragma: no mutate start
        log.warning("dropped %s: %s", what, detail, extra=fields(
            route=self.name, endpoint=endpoint, reason=reason, definition=definition))
        # pragma: no mutate end
        self.metrics.dropped.labels(reason).inc()

    def stray_lost(self, endpoint: str, reason: str) -> None:
        """An answer no request takes (uncorrelated, non-conforming) whose dead letter
        failed."""
        # pragma: no mutate start
        log.error("dead letter failed; answer dropped", extra=fields(
            route=self.name, endpoint=endpoint, reason=reason))
        # pragma: no mutate end
        self.metrics.dropped.labels(reason).inc()

    def deadletter_gave_back(self, count: int, endpoint: str, reason: str,
                             definition: str | None, error: str) -> None:
        # pragma: no mutate start
        log.error("dead letter failed; %d message(s) nacked for redelivery", count,
                  extra=fields(route=self.name, endpoint=endpoint, reason=reason,
                               definition=definition, error=error))
        # pragma: no mutate end

    def not_sent_again(self, count: int) -> None:
        # pragma: no mutate start
        log.info("%d message(s) not sent again: the sender stopped waiting (HTTP 504) "
                 "and sends again itself", count,
                 extra=fields(route=self.name, endpoint=self.source_endpoint))
        # pragma: no mutate end

    # -- request-reply -----------------------------------------------------------------------
    def replied(self, result: str) -> None:
        self.metrics.replies.labels(self.name, result).inc()

    def late_replies(self, endpoint: str) -> Callable[[], None]:
        """What counts one late (or unknown) answer on `endpoint`'s reply address."""
        late = self.metrics.replies_late.labels(endpoint)
        return late.inc

    # -- trouble -----------------------------------------------------------------------------
    def read_failed(self, error: BaseException, first: bool, unexpected: bool) -> None:
        """The first of a run of failed reads: the stall watch logs the later ones."""
        if not first:
            return
        # pragma: no mutate start
        if unexpected:
            log.exception("consumer failed; reconnecting",
                          extra=fields(route=self.name, endpoint=self.source_endpoint))
        log.warning("reading from the source failed; reconnecting", extra=fields(
            route=self.name, endpoint=self.source_endpoint, error=error))
        # pragma: no mutate end

    def batch_failed(self) -> None:
        """An error no message should cause (the daemon never crashes on one)."""
        # pragma: no mutate start
        log.exception("unexpected error; batch will be redelivered",
                      extra=fields(route=self.name))
        # pragma: no mutate end

    def grace_ran_out(self, inflight: int, grace: float) -> None:
        # pragma: no mutate start
        log.warning("%d message(s) still in flight after %.1fs grace", inflight, grace,
                    extra=fields(route=self.name))
        # pragma: no mutate end


__all__ = ["RouteStats"]
