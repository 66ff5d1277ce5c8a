"""A route: one consumer endpoint to one or more producer endpoints, at least once.

    reader ──► window (bounded) ──► lanes (ordered per key) ──► convert ──► outputs
                                                                  │            │
                                                                  └► dead letter ◄┘

- The reader stops pulling when `inflight` messages are unsettled: back-pressure reaches
  the broker through the adapter (credit, receive maximum, paused partitions ...).
- Messages with the same ordering key (Kafka topic+partition, MQTT topic, NATS subject,
  AMQP: all) are processed one after the other, so per-key order is kept; different keys
  run concurrently.
- Each event is rendered for each output by `gateway.envelope.outgoing` (binding or native
  message, defaults, trace headers); the route reads, converts, renders, sends, settles.
- A source message is acked only when every output confirmed it, or when the dead letter
  took it. Output failures are retried here, and only here (producers make one attempt
  per write), with exponential backoff and jitter, waiting at least as long as a
  receiver's Retry-After asks (up to the policy's longest backoff); past the budget the
  message is dead-lettered as `undeliverable`. When the dead letter itself fails, the
  message is nacked for redelivery: intake slows down rather than dropping.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gateway import reasons
from gateway.convert import Conversion, Converter
from gateway.deadletter_format import deadletter_record
from gateway.definitions.model import MessageDefinition
from gateway.envelope.outgoing import (
    Deliver,
    Mode,
    OutputFormat,
    RenderFailed,
    member_record,
    with_defaults,
)
from gateway.jsontypes import JSON
from gateway.matching.matcher import Explanation
from gateway.observability.logs import fields
from gateway.observability.metrics import Metrics, body_size, route_children
from gateway.ports import (
    Consumer,
    Delivery,
    EndOfInput,
    NotConnected,
    Producer,
    read_one,
    write,
)
from gateway.protocols import HTTP, find_profile
from gateway.record import NativeMessage
from gateway.runtime.backlog import watch_backlog
from gateway.runtime.retry import RetryPolicy

log = logging.getLogger("xrgw.route")


@dataclass
class Output:
    endpoint_id: str
    protocol: str
    producer: Producer
    # Fields every outgoing record gets unless it has them (topic, subject, path ...);
    # string values may hold placeholders filled from the match context.
    defaults: Mapping[str, JSON] = field(default_factory=dict)
    deliver: Deliver = "cloudevent"
    definitions: Sequence[MessageDefinition] = ()  # for deliver: native


def ordering_key(record: NativeMessage) -> object:
    """The lane of a message (`ProtocolProfile.ordering`): None runs it on its own."""
    prof = find_profile(record.protocol)
    if prof is None or prof.ordering.scope == "none":
        return None  # HTTP: independent requests, no order to keep
    if prof.ordering.scope == "link":
        return prof.name  # AMQP: one link, one order
    values = tuple(record.fields.get(name) for name in prof.ordering.fields)
    return values[0] if len(values) == 1 else values


class Route:
    def __init__(
        self,
        name: str,
        source_endpoint: str,
        consumer: Consumer,
        converter: Converter,
        outputs: Sequence[Output],
        *,
        deadletter: Output | None,
        metrics: Metrics,
        mode: Mode = "binary",
        inflight: int = 256,
        retry: RetryPolicy | None = None,
        lanes: int = 16,
    ) -> None:
        self.name = name
        self.source_endpoint = source_endpoint
        self.consumer = consumer
        self.converter = converter
        self.outputs = list(outputs)
        self._formats = [OutputFormat(o.protocol, mode, o.deliver, o.defaults, o.definitions)
                         for o in self.outputs]
        self.deadletter = deadletter
        self.metrics = metrics
        self.mode: Mode = mode
        self.retry = retry or RetryPolicy()
        self.inflight_limit = inflight
        self._window = asyncio.Semaphore(inflight)
        self._lanes: list[asyncio.Queue[tuple[Delivery, float]]] = [
            asyncio.Queue() for _ in range(lanes)
        ]
        self._lane_tasks: list[asyncio.Task[None]] = []
        self._reader: asyncio.Task[None] | None = None
        self._backlog: asyncio.Task[None] | None = None
        self._starter: asyncio.Task[None] | None = None
        self._inflight = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._stopping = False
        # Prometheus `labels()` costs a lock and a dict lookup per call: the children
        # this route uses on every message are looked up once.
        self._inflight_gauge, self._processing = route_children(metrics, name, inflight)
        self._received: dict[str, tuple[Any, Any]] = {}  # protocol -> (messages, bytes)
        self._matched: dict[str, Any] = {}
        self._published = {o.endpoint_id: (metrics.published.labels(o.endpoint_id),
                                           metrics.published_bytes.labels(o.endpoint_id))
                           for o in self._all_outputs()}
        self._up: dict[str, bool] = {}

    # -- lifecycle --------------------------------------------------------------------------
    @property
    def ready(self) -> bool:
        producers = [o.producer for o in self.outputs]
        if self.deadletter is not None:
            producers.append(self.deadletter.producer)
        return self.consumer.connected and all(p.connected for p in producers)

    @property
    def inflight(self) -> int:
        return self._inflight

    async def start(self) -> None:
        """Start without waiting for brokers: the outputs connect first (with backoff),
        then intake begins. Meanwhile the route is not ready and pulls nothing, so a
        sink that is down at start-up holds messages at the source instead of filling
        the dead letter."""
        self._starter = asyncio.create_task(self._start())

    async def _start(self) -> None:
        for output in self._all_outputs():
            await self._connect(output.endpoint_id, output.producer)
        self._lane_tasks = [asyncio.create_task(self._lane(q)) for q in self._lanes]
        self._reader = asyncio.create_task(self._read_loop())
        self._backlog = asyncio.create_task(
            watch_backlog(self.source_endpoint, self.consumer, self.metrics))

    async def wait_finished(self) -> None:
        """Until the consumer reports the end of its input (finite inputs, tests)."""
        assert self._starter is not None, "start() first"
        await self._starter
        assert self._reader is not None
        await self._reader

    async def stop(self, grace: float) -> None:
        """Stop intake, let in-flight messages finish (up to `grace` seconds), close."""
        self._stopping = True
        if self._starter is not None and not self._starter.done():
            self._starter.cancel()
            await asyncio.gather(self._starter, return_exceptions=True)
        for task in (self._reader, self._backlog):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        try:
            await asyncio.wait_for(self._idle.wait(), grace)
        except TimeoutError:
            log.warning("%d message(s) still in flight after %.1fs grace", self._inflight,
                        grace, extra=fields(route=self.name))
        for task in self._lane_tasks:
            task.cancel()
        await asyncio.gather(*self._lane_tasks, return_exceptions=True)
        await self.consumer.aclose()

    async def wait_idle(self) -> None:
        await self._idle.wait()

    def _all_outputs(self) -> list[Output]:
        return self.outputs + ([self.deadletter] if self.deadletter is not None else [])

    async def _connect(self, endpoint: str, port: Consumer | Producer) -> None:
        attempt = 0
        while not self._stopping:
            try:
                await port.connect()
                self.metrics.connected.labels(endpoint).set(1)
                return
            except NotConnected as exc:
                self.metrics.connected.labels(endpoint).set(0)
                delay = self.retry.delay(min(attempt, 6))
                log.warning("endpoint not connected; retrying in %.1fs", delay,
                            extra=fields(route=self.name, endpoint=endpoint, error=exc))
                attempt += 1
                await asyncio.sleep(delay)

    # -- intake -----------------------------------------------------------------------------
    async def _read_loop(self) -> None:
        await self._connect(self.source_endpoint, self.consumer)
        while not self._stopping:
            await self._window.acquire()
            try:
                delivery = await read_one(self.consumer)
            except asyncio.CancelledError:
                self._window.release()
                raise
            except EndOfInput:
                self._window.release()
                return
            except NotConnected:
                self._window.release()
                self.metrics.connected.labels(self.source_endpoint).set(0)
                await self._connect(self.source_endpoint, self.consumer)
                continue
            except Exception:
                self._window.release()
                log.exception("consumer failed; reconnecting",
                              extra=fields(route=self.name, endpoint=self.source_endpoint))
                await asyncio.sleep(self.retry.delay(0))
                continue
            self._inflight += 1
            self._idle.clear()
            self._inflight_gauge.set(self._inflight)
            key = ordering_key(delivery.message)
            try:
                lane = hash(key) % len(self._lanes) if key is not None else (
                    self._inflight % len(self._lanes))
            except TypeError:
                # An address field of the wrong type (a list, a map) is unhashable; it
                # used to end the read loop, i.e. all intake of the route (found by
                # tests/fuzz). Such a record has no order to keep.
                lane = self._inflight % len(self._lanes)
            self._lanes[lane].put_nowait((delivery, time.monotonic()))

    async def _lane(self, queue: asyncio.Queue[tuple[Delivery, float]]) -> None:
        while True:
            delivery, started = await queue.get()
            try:
                await self._process(delivery)
            except Exception:  # the daemon never crashes on a message
                log.exception("unexpected error; message will be redelivered",
                              extra=fields(route=self.name))
                await _settle_quietly(delivery, "internal error", retry=True)
            finally:
                self._processing.observe(time.monotonic() - started)
                self._inflight -= 1
                self._inflight_gauge.set(self._inflight)
                self._window.release()
                if self._inflight == 0:
                    self._idle.set()

    # -- one message ------------------------------------------------------------------------
    async def _process(self, delivery: Delivery) -> None:
        record = delivery.message
        counters = self._received.get(record.protocol)
        if counters is None:
            counters = self._received[record.protocol] = (
                self.metrics.received.labels(self.source_endpoint, record.protocol),
                self.metrics.received_bytes.labels(self.source_endpoint, record.protocol))
        counters[0].inc()
        counters[1].inc(body_size(record))
        conversions = self.converter.convert_all(record)
        if len(conversions) == 1 and conversions[0].event is None:
            # The whole message failed: dead-letter it as it came.
            conversion = conversions[0]
            if conversion.reason == reasons.UNMATCHED:
                self.metrics.unmatched.labels(self.source_endpoint).inc()
            await self._dead_letter(delivery, conversion.reason or reasons.UNMATCHED,
                                    conversion.detail, conversion.explain)
            return
        # One event, or the members of an HTTP batch: each is delivered or dead-lettered
        # on its own; the source is settled when all of them are.
        if len(conversions) == 1:
            outcomes = [await self._deliver(conversions[0], record)]
        else:
            outcomes = await asyncio.gather(*(self._deliver(c, record) for c in conversions))
        if all(outcomes):
            await delivery.ack()
        else:
            await delivery.nack("dead letter failed", retry=True)

    async def _deliver(self, conversion: Conversion, source: NativeMessage) -> bool:
        """Deliver one converted event (or dead-letter it); False only when even the dead
        letter failed, so the source must be redelivered."""
        event = conversion.event
        if event is None:
            if conversion.reason == reasons.UNMATCHED:
                self.metrics.unmatched.labels(self.source_endpoint).inc()
            return await self._dead_letter_record(
                _member(source, conversion), conversion.reason or reasons.UNMATCHED,
                conversion.detail, conversion.explain)
        assert conversion.match.definition is not None
        xid = conversion.match.definition.xid
        matched = self._matched.get(xid)
        if matched is None:
            matched = self._matched[xid] = self.metrics.matched.labels(self.source_endpoint, xid)
        matched.inc()
        outgoing: list[tuple[Output, NativeMessage]] = []
        for output, output_format in zip(self.outputs, self._formats, strict=True):
            try:
                outgoing.append((output, output_format.render(event, conversion.match.context)))
            except RenderFailed as exc:
                return await self._dead_letter_record(
                    _member(source, conversion), reasons.UNDELIVERABLE,
                    f"{output.endpoint_id}: {exc}", definition=xid)
        if len(outgoing) == 1:  # no gather (and its task) for the common single output
            failures = [await self._send(*outgoing[0])]
        else:
            failures = await asyncio.gather(*(self._send(o, r) for o, r in outgoing))
        failed = [f for f in failures if f is not None]
        if not failed:
            return True
        return await self._dead_letter_record(
            _member(source, conversion), reasons.UNDELIVERABLE, "; ".join(failed),
            definition=xid)

    async def _send(self, output: Output, record: NativeMessage) -> str | None:
        """Write with retries; None when confirmed, else why it was given up. The route is
        the one owner of retries: a producer makes one attempt per write and may say how
        long the receiver wants it to wait (`Outcome.retry_after`), which the next attempt
        honours within the policy's longest backoff."""
        reason = "not attempted"
        retry_after: float | None = None
        for attempt in range(self.retry.attempts):
            if attempt:
                await asyncio.sleep(self.retry.delay(attempt - 1, at_least=retry_after))
                retry_after = None
            try:
                # No explicit connect() here: producers reconnect inside write() behind a
                # backoff gate and fail fast meanwhile, so a dead sink costs one quick
                # failure per attempt instead of a connect timeout per message.
                [outcome] = await write(output.producer, [record])
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                reason = f"{type(exc).__name__}: {exc}"
                self.metrics.publish_errors.labels(output.endpoint_id, "exception").inc()
                self._track_connection(output)
                continue
            if outcome.delivered:
                messages, size = self._published[output.endpoint_id]
                messages.inc()
                size.inc(body_size(record))
                self._track_connection(output)
                return None
            self._track_connection(output)
            reason = outcome.reason or "failed"
            retry_after = outcome.retry_after
            self.metrics.publish_errors.labels(
                output.endpoint_id, "retryable" if outcome.retryable else "rejected").inc()
            if not outcome.retryable:
                break
        return f"{output.endpoint_id}: {reason}"

    def _track_connection(self, output: Output) -> None:
        """Keep `xrgw_endpoint_connected` in step with the producer (which reconnects on
        its own inside write())."""
        up = output.producer.connected
        if self._up.get(output.endpoint_id) != up:
            self._up[output.endpoint_id] = up
            self.metrics.connected.labels(output.endpoint_id).set(1 if up else 0)

    async def _dead_letter(self, delivery: Delivery, reason: str, detail: str,
                           explain: Sequence[Explanation] = ()) -> None:
        if await self._dead_letter_record(delivery.message, reason, detail, explain):
            await delivery.ack()
        else:
            await delivery.nack(f"dead letter failed ({reason})", retry=True)

    async def _dead_letter_record(self, original: NativeMessage, reason: str, detail: str,
                                  explain: Sequence[Explanation] = (), *,
                                  definition: str | None = None) -> bool:
        """Send `original` to the dead letter; False when the dead letter failed.
        `definition` is the matched definition's xid, when one matched."""
        if self.deadletter is None:
            # `deadletter: log` in the config: counted and logged, then acked.
            log.warning("dropped message: %s", detail, extra=fields(
                route=self.name, endpoint=self.source_endpoint, reason=reason,
                definition=definition))
            self.metrics.dropped.labels(reason).inc()
            return True
        record = deadletter_record(
            original, protocol=self.deadletter.protocol, reason=reason, detail=detail,
            explain=explain, source_endpoint=self.source_endpoint)
        record = with_defaults(record, self.deadletter.defaults)
        # The dead letter is the last resort: while it is down, hold the message (and its
        # window slot) and keep trying. Held slots fill the window, so intake stops --
        # back-pressure instead of dropping, and instead of nacking into a redelivery
        # storm. Only a stopping route gives the message back to the source.
        warned = False
        while True:
            failure = await self._send(self.deadletter, record)
            if failure is None:
                self.metrics.deadletter.labels(reason).inc()
                if warned:
                    log.info("dead letter is back", extra=fields(
                        route=self.name, endpoint=self.deadletter.endpoint_id))
                return True
            where = fields(route=self.name, endpoint=self.deadletter.endpoint_id,
                           reason=reason, definition=definition, error=failure)
            if self._stopping:
                log.error("dead letter failed; message nacked for redelivery", extra=where)
                return False
            if not warned:
                log.error("dead letter failed; holding messages until it is back",
                          extra=where)
                warned = True
            await asyncio.sleep(self.retry.max_backoff)


def _member(source: NativeMessage, conversion: Conversion) -> NativeMessage:
    """What to dead-letter for one conversion of `source` (see `member_record`)."""
    return member_record(source, conversion.source_event or conversion.event)


async def _settle_quietly(delivery: Delivery, reason: str, retry: bool) -> None:
    try:
        await delivery.nack(reason, retry=retry)
    except Exception:
        log.debug("delivery already settled", exc_info=True)


__all__ = ["HTTP", "Output", "Route", "ordering_key"]
