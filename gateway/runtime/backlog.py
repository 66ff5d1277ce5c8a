"""Polls a consumer's backlog (Kafka partition lag, JetStream pending messages) into the
`xrgw_consumer_lag` / `xrgw_consumer_pending` gauges, for autoscalers and alerts.

Polled on a timer rather than at scrape time: asking the broker can take a round trip,
and a scrape must not wait on a broker (nor ask it once per scraper).
"""

from __future__ import annotations

import asyncio
import logging

from gateway.observability.logs import fields
from gateway.observability.metrics import BacklogSeries, Metrics
from gateway.ports import BacklogReporter, Consumer, NotConnected

log = logging.getLogger("xrgw.backlog")

#: Seconds between two polls; a Prometheus scrape interval is 15 to 60 s.
POLL_SECONDS = 10.0
#: Longest wait for one answer, so a hung broker delays no later poll.
ANSWER_SECONDS = 5.0


async def watch_backlog(endpoint: str, consumer: Consumer, metrics: Metrics) -> None:
    """Until cancelled: the backlog of `consumer` as gauges labelled with `endpoint`.
    Without a connection, or when the broker does not answer, the endpoint's series are
    removed: a lag frozen at its last value would mislead an autoscaler."""
    if not isinstance(consumer, BacklogReporter):
        return
    shown: set[BacklogSeries] = set()
    try:
        while True:
            try:
                async with asyncio.timeout(ANSWER_SECONDS):
                    backlog = await consumer.backlog()
            except (NotConnected, TimeoutError):
                backlog = []
            except Exception as exc:  # a metric must never take the route down
                # pragma: no mutate start
                log.debug("backlog poll failed", extra=fields(endpoint=endpoint, error=exc))
                # pragma: no mutate end
                backlog = []
            shown = metrics.show_backlog(endpoint, backlog, shown)
            await asyncio.sleep(POLL_SECONDS)
    finally:
        metrics.show_backlog(endpoint, [], shown)
