"""A route: one consumer endpoint to one or more producer endpoints, at least once.

    pump:    read_batch ──► convert + render (one tight loop) ──► submit to each output ─┐
                 ▲                                                                      │
                 └──────── window (bounded: messages read, not yet settled) ◄──────┐    │
    settler: await confirmations in order ──► retry failures ──► dead letter ──► settle ◄┘

- The batch is the unit: the pump takes what the consumer has (at most the free part of
  the `inflight` window), converts it without a task or future per message, and hands
  each output its records in one `submit`. It does not wait for the sinks: the next batch
  is read and submitted while earlier ones are still being confirmed, so a route's
  throughput is not 1 / (sink round trip).
- Order: there is one pump, and producers send the batches of successive `submit` calls
  in order (the contract), so every output receives messages in the order the source
  gave them; the settler settles sources in that same order. So the order per Kafka
  partition, MQTT topic, NATS subject or AMQP link is kept on the happy path, and under
  sink failures: once an output failed records retryably, newer ones are held back
  until the settler has sent those again (`runtime/resend.py`). What a partial failure
  leaves (record 5 of 10 failed, 6-10 delivered) the sink's client must order itself.
- A source message is acked only when every output confirmed each of its events, or the
  dead letter took them. Failed sends are retried here, and only here (producers make one
  attempt), for the batch's failed records together, with exponential backoff and jitter,
  waiting at least as long as a receiver's Retry-After asks (up to the policy's longest
  backoff). Only transient failures are retried, by default until they clear
  (`gateway/policies/retry.py` says why); a permanent rejection, or a transient one past a
  configured budget, dead-letters the record's message as `undeliverable`. When the dead
  letter itself fails, the route holds the batch and tries again (intake stops:
  back-pressure, not dropping); only a stopping route nacks it for redelivery.
- Size: a record over an output's size limit (`SizeLimited`) is dead-lettered as
  `too-large` before anything is sent, to no output (as a record one output cannot
  render); one the producer refuses for its exact size (`Outcome.too_large`) likewise.
  A dead letter the dead-letter endpoint refuses for its size is written again without
  the body (`withheld_body`: size and SHA-256 instead) rather than held for ever.
- Health (`runtime/stalls.py`): an output failing, a held dead letter, a source whose
  reads keep failing or a window that does not move, once it lasts `stall_after`
  seconds, is a stall: the route is not ready, `xrgw_route_stalled{route,cause}` is 1,
  and one log line names the error (repeated at most once a minute).
- Request-reply (`reply_timeout` set, `reply: true` in the config): outputs get
  `Requester.request` instead of `submit`, and before a source message is settled its
  sender gets the answer (or is told none came) -- see `gateway.runtime.reply`.
- Back-pressure: the pump stops reading while `inflight` messages are unsettled, and the
  adapter passes that on to the broker (credit, receive maximum, paused partitions ...).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Any

from gateway.convert import Conversion, Converter
from gateway.deadletter import reasons
from gateway.deadletter.format import deadletter_record, withheld_body
from gateway.definitions.model import MessageDefinition
from gateway.envelope.outgoing import (
    Deliver,
    Mode,
    OutputFormat,
    RenderFailed,
    member_record,
    with_defaults,
)
from gateway.json.values import JSON
from gateway.matching.matcher import Explanation, MatchResult
from gateway.observability.conformance import RouteReport
from gateway.observability.logs import CLIENT_ENDPOINT, fields
from gateway.observability.metrics import Metrics, body_size, observe_many, route_children
from gateway.policies.retry import RetryPolicy
from gateway.ports import (
    NO_REPLY_PREFIX,
    Admission,
    Confirmation,
    Consumer,
    Delivery,
    EndOfInput,
    NotConnected,
    Outcome,
    Producer,
    Requester,
    confirmed,
    size_limit,
)
from gateway.protocols import HTTP, find_profile
from gateway.protocols.profile import FieldRef
from gateway.record import NativeMessage
from gateway.redaction.redactor import Redactor
from gateway.runtime.backlog import watch_backlog
from gateway.runtime.keys import SOURCE, PartitionKeys
from gateway.runtime.reply import hand_back, stray_listener
from gateway.runtime.resend import HELD, ResendFirst
from gateway.runtime.stalls import (
    DEADLETTER_HELD,
    NO_PROGRESS,
    OUTPUT_UNAVAILABLE,
    SOURCE_FAILING,
    Cause,
    Stall,
    Stalls,
)

log = logging.getLogger("xrgw.route")

#: The most messages one batch takes, so that a large window still holds several batches
#: in flight (reading and converting the next while the sinks confirm the last).
MAX_BATCH = 1000
#: Messages converted between two turns of the event loop (see `_convert_yielding`).
CONVERT_SLICE = 250
#: How long trouble may last before the route reports itself stalled (`routes[].stall_after`).
STALL_AFTER = 30.0
#: How often at most the stall watch looks (shorter when `stall_after` is shorter).
WATCH_SECONDS = 1.0


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


# -- one batch on its way through the route ---------------------------------------------------


class _Member:
    """One event of a source message (an HTTP batch has several; everything else one):
    what failed about it, if anything, and the dead letter to write when something did."""

    __slots__ = ("_original", "conversion", "definition", "delivery", "failures", "reason",
                 "source")

    def __init__(self, source: NativeMessage, conversion: Conversion,
                 delivery: Delivery | None = None) -> None:
        self.source = source
        self.conversion = conversion
        self.delivery = delivery  # whose settlement it waits for
        self.definition: str | None = None
        self.reason: str | None = None  # a dead-letter reason once something failed
        self.failures: list[str] = []
        self._original: NativeMessage | None = None

    def original(self) -> NativeMessage:
        """What to dead-letter (and sample) for this event of `source` (`member_record`):
        built once, on failure only, for the report and the dead letter alike."""
        if self._original is None:
            conversion = self.conversion
            self._original = member_record(self.source,
                                           conversion.source_event or conversion.event)
        return self._original


class _Message:
    """One delivery of the batch and its members."""

    __slots__ = ("delivery", "members", "whole")

    def __init__(self, delivery: Delivery) -> None:
        self.delivery = delivery
        self.members: list[_Member] = []
        # The whole message failed to convert: dead-letter it as it came.
        self.whole: _Member | None = None


class _Sent:
    """What one output was given in one submit: records and the members they belong to."""

    __slots__ = ("confirmation", "output", "owners", "records", "replies")

    def __init__(self, output: Output) -> None:
        self.output = output
        self.records: list[NativeMessage] = []
        self.owners: list[_Member] = []
        self.confirmation: Confirmation | None = None
        # Reply routes: the final outcome of each record that carried an answer, by index.
        self.replies: dict[int, Outcome] = {}


class _Letter:
    """One dead letter to write: for which message, of what, why, and whether it is
    the body-less form already."""

    __slots__ = ("definition", "detail", "message", "original", "reason", "record", "withheld")

    def __init__(self, message: _Message, original: NativeMessage, reason: str, detail: str,
                 definition: str | None) -> None:
        self.message = message
        self.original = original
        self.reason = reason
        self.detail = detail
        self.definition = definition
        self.record = original  # replaced by the dead-letter record before it is sent
        self.withheld = False


class _Batch:
    __slots__ = ("messages", "sent", "started")

    def __init__(self, messages: list[_Message], sent: list[_Sent], started: float) -> None:
        self.messages = messages
        self.sent = sent
        self.started = started


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
        inflight: int = 4096,
        retry: RetryPolicy | None = None,
        max_batch: int | None = None,
        partition_key: str = SOURCE,
        reply_timeout: float | None = None,
        report: RouteReport | None = None,
        observe: bool = False,
        stall_after: float = STALL_AFTER,
    ) -> None:
        self.name = name
        # Request-reply: how long each request waits for its answer; None: not a reply route.
        self.reply_timeout = reply_timeout
        # Shadow mode: consume, match and render as usual, publish and dead-letter
        # nothing (the report counts what would have happened).
        self.observe = observe
        self.report = report
        # What the dead letters' explanations and the log lines hide of a sender's message
        # (the route's `redact:` and the credential headers), as the report does.
        self.redactor = report.redactor if report is not None else Redactor()
        self.source_endpoint = source_endpoint
        self.consumer = consumer
        self.converter = converter
        self.outputs = list(outputs)
        self.deadletter = deadletter
        self.metrics = metrics
        self.mode: Mode = mode
        self.keys = PartitionKeys(partition_key)
        # Per output, in order: how it renders, and where it keeps its partitioning key
        # (Kafka), if it has one to fill.
        self._render_plan: list[tuple[OutputFormat, FieldRef | None]] = [
            (OutputFormat(o.protocol, mode, o.deliver, o.defaults, o.definitions),
             _key_place(o.protocol) if self.keys.enabled else None)
            for o in self.outputs]
        self._keyed = any(place is not None for _, place in self._render_plan)
        self.retry = retry or RetryPolicy()
        self.inflight_limit = inflight
        # A quarter of the window per batch: up to four batches are in flight at once.
        self.max_batch = max_batch or max(1, min(MAX_BATCH, inflight // 4))
        self._inflight = 0
        self._room = asyncio.Event()
        self._room.set()
        self._batches: asyncio.Queue[_Batch] = asyncio.Queue()
        self._pump: asyncio.Task[None] | None = None
        self._settler: asyncio.Task[None] | None = None
        self._backlog: asyncio.Task[None] | None = None
        self._starter: asyncio.Task[None] | None = None
        self._idle = asyncio.Event()
        self._idle.set()
        self._stopping = False
        # Prometheus `labels()` costs a lock and a dict lookup per call: the children
        # this route uses on every batch are looked up once.
        self._inflight_gauge, self._processing = route_children(metrics, name, inflight)
        self._received: dict[str, tuple[Any, Any]] = {}  # protocol -> (messages, bytes)
        self._matched: dict[str, Any] = {}
        # Dead letters are counted apart (`xrgw_messages_deadlettered_total{reason}`,
        # `xrgw_deadletter_bytes_total`), not as publishes of the dead-letter endpoint.
        self._published = {o.endpoint_id: (metrics.published.labels(o.endpoint_id),
                                           metrics.published_bytes.labels(o.endpoint_id))
                           for o in self.outputs}
        self._up: dict[str, bool] = {}
        self._source_up: bool | None = None  # the consumer's `connected` last seen
        # Every endpoint has its `xrgw_endpoint_connected` series from the start (an
        # alert on 0 must be able to fire for an endpoint never reached).
        metrics.connected.labels(source_endpoint).set(1 if consumer.connected else 0)
        for output in [] if observe else self._all_outputs():  # observing: never used
            metrics.connected.labels(output.endpoint_id).set(
                1 if output.producer.connected else 0)
        # Per output (not the dead letter, which only the settler writes, in order).
        self._resend_first = {id(o): ResendFirst() for o in self.outputs}
        self._strays: set[asyncio.Task[None]] = set()  # uncorrelated answers being dead-lettered
        self.stalls = Stalls(name, metrics, stall_after)
        self._settled_at = time.monotonic()  # when a message last settled (no-progress)
        self._watch: asyncio.Task[None] | None = None
        self._read_failures = 0  # reads failed in a row
        self._holding = False  # the ingress is held because the route is stalled

    # -- lifecycle --------------------------------------------------------------------------
    @property
    def connected(self) -> bool:
        """The consumer and every producer the route uses are connected."""
        if self.observe:  # an observing route never uses its producers
            return self.consumer.connected
        producers = [o.producer for o in self.outputs]
        if self.deadletter is not None:
            producers.append(self.deadletter.producer)
        return self.consumer.connected and all(p.connected for p in producers)

    @property
    def stalled(self) -> list[Stall]:
        """The route's stalls now (`runtime/stalls.py`): empty while it makes progress."""
        return self.stalls.stalls

    @property
    def ready(self) -> bool:
        """Connected and not stalled: what `/readyz` reports for the route."""
        return self.connected and not self.stalls.stalls

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
        if self.reply_timeout is not None and not self.observe:
            self._listen_for_strays()
        # A sender waiting on the line (HTTP) is told "retry later" while the outputs
        # connect, rather than finding nobody listening.
        admission = (self.consumer if isinstance(self.consumer, Admission)
                     and not self.observe else None)
        if admission is not None:
            admission.hold("the route's outputs are not connected yet")
            await self._connect(self.source_endpoint, self.consumer)
        for output in [] if self.observe else self._all_outputs():
            await self._connect(output.endpoint_id, output.producer)
        if admission is not None:
            admission.hold(None)
        self._settler = asyncio.create_task(self._settle_loop())
        self._pump = asyncio.create_task(self._pump_loop())
        self._backlog = asyncio.create_task(
            watch_backlog(self.source_endpoint, self.consumer, self.metrics))
        self._watch = asyncio.create_task(self._watch_stalls())

    async def wait_finished(self) -> None:
        """Until the consumer reports the end of its input (finite inputs, tests)."""
        assert self._starter is not None, "start() first"
        await self._starter
        assert self._pump is not None
        await self._pump

    async def stop(self, grace: float) -> None:
        """Stop intake, let in-flight messages finish (up to `grace` seconds), close."""
        self._stopping = True
        if self._starter is not None and not self._starter.done():
            self._starter.cancel()
            await asyncio.gather(self._starter, return_exceptions=True)
        for task in (self._pump, self._backlog, self._watch):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        try:
            await asyncio.wait_for(self._idle.wait(), grace)
        except TimeoutError:
            log.warning(  # pragma: no mutate
                "%d message(s) still in flight after %.1fs grace",  # pragma: no mutate
                self._inflight, grace, extra=fields(route=self.name),  # pragma: no mutate
            )
        if self._settler is not None:
            self._settler.cancel()
            await asyncio.gather(self._settler, return_exceptions=True)
        # Batches the grace did not reach go back to the source for redelivery.
        while not self._batches.empty():
            batch = self._batches.get_nowait()
            await self._give_back([m.delivery for m in batch.messages], "stopping")
            self._release(batch)
        await self.consumer.aclose()
        self.stalls.close()

    async def wait_idle(self) -> None:
        await self._idle.wait()

    def _all_outputs(self) -> list[Output]:
        return self.outputs + ([self.deadletter] if self.deadletter is not None else [])

    async def _connect(self, endpoint: str, port: Consumer | Producer) -> None:
        attempt = 0
        while not self._stopping:
            # The client's own tasks, made inside connect(), log with this endpoint.
            about = CLIENT_ENDPOINT.set(endpoint)
            try:
                await port.connect()
                self.metrics.connected.labels(endpoint).set(1)
                if attempt:
                    log.info("endpoint connected after %d attempt(s)", attempt + 1,
                             extra=fields(route=self.name, endpoint=endpoint))
                return
            except NotConnected as exc:
                self.metrics.connected.labels(endpoint).set(0)
                delay = self.retry.delay(min(attempt, 6))
                # One warning per outage, with the endpoint and the cause; the retries
                # are debug lines (xrgw_endpoint_connected shows how long it lasts).
                # pragma: no mutate start
                (log.warning if attempt == 0 else log.debug)(
                    "endpoint not connected; retrying in %.1fs", delay,
                    extra=fields(route=self.name, endpoint=endpoint, error=exc))
                # pragma: no mutate end
                attempt += 1
                await asyncio.sleep(delay)
            finally:
                CLIENT_ENDPOINT.reset(about)

    # -- intake: read, convert, submit ----------------------------------------------------------
    async def _pump_loop(self) -> None:
        await self._connect(self.source_endpoint, self.consumer)
        while not self._stopping:
            free = self.inflight_limit - self._inflight
            if free <= 0:
                self._room.clear()
                await self._room.wait()
                continue
            try:
                deliveries = await self.consumer.read_batch(min(free, self.max_batch))
            except EndOfInput:
                return
            except NotConnected as exc:
                # The reason a read failed is the operator's only clue when it keeps
                # failing (a record the client cannot decode, a fetch error): it goes to
                # the stall watch, which logs it once and then rate-limited.
                self._read_failed(exc)
                self.metrics.connected.labels(self.source_endpoint).set(0)
                if self._read_failures > 1:
                    # Failing again right after a reconnect: not a dropped connection but
                    # something the reconnect does not cure; back off instead of spinning.
                    await asyncio.sleep(self.retry.delay(min(self._read_failures - 2, 6)))
                await self._connect(self.source_endpoint, self.consumer)
                continue
            except Exception as exc:
                if not self.stalls.active(SOURCE_FAILING, self.source_endpoint):
                    # pragma: no mutate start
                    log.exception("consumer failed; reconnecting",
                                  extra=fields(route=self.name, endpoint=self.source_endpoint))
                    # pragma: no mutate end
                self._read_failed(exc)
                await asyncio.sleep(self.retry.delay(0))
                continue
            if not deliveries:
                continue
            self._read_failures = 0
            self.stalls.cleared(SOURCE_FAILING, self.source_endpoint)
            if not self._inflight:  # the no-progress clock starts with the first in flight
                self._settled_at = time.monotonic()
            self._inflight += len(deliveries)
            self._idle.clear()
            self._inflight_gauge.set(self._inflight)
            started = time.monotonic()
            try:
                batch = await self._convert_yielding(deliveries, started)
                if self.observe:
                    await self._observed(batch)
                    continue
                for sent in batch.sent:
                    if sent.records:
                        sent.confirmation = await self._submit(sent.output, sent.records)
            except asyncio.CancelledError:
                await self._give_back(deliveries, "stopping")
                self._free(len(deliveries), started)
                raise
            except Exception:  # the daemon never crashes on a message
                # pragma: no mutate start
                log.exception("unexpected error; batch will be redelivered",
                              extra=fields(route=self.name))
                # pragma: no mutate end
                await self._give_back(deliveries, "internal error")
                self._free(len(deliveries), started)
                continue
            self._batches.put_nowait(batch)

    def _read_failed(self, exc: BaseException) -> None:
        self._read_failures += 1
        if not self.stalls.active(SOURCE_FAILING, self.source_endpoint):
            # pragma: no mutate start
            log.warning("reading from the source failed; reconnecting", extra=fields(
                route=self.name, endpoint=self.source_endpoint, error=exc))
            # pragma: no mutate end
        self.stalls.failing(SOURCE_FAILING, self.source_endpoint,
                            f"{type(exc).__name__}: {exc}")

    async def _watch_stalls(self) -> None:
        """Look at the route's conditions every so often: a window that does not move,
        reads that stopped failing, stalls to report or to log again."""
        interval = max(0.01, min(WATCH_SECONDS, self.stalls.stall_after / 2))
        while True:
            await asyncio.sleep(interval)
            if self.stalls.explained():
                # An output or the dead letter failing explains the standstill: one
                # cause, one alert.
                self.stalls.cleared(NO_PROGRESS, self.name)
            elif (self._inflight
                  and time.monotonic() - self._settled_at >= self.stalls.stall_after):
                self.stalls.failing(NO_PROGRESS, self.name,
                                    f"{self._inflight} message(s) in flight, none settled "
                                    f"for {self.stalls.stall_after:g} s")
            self.stalls.quiet(SOURCE_FAILING, self.source_endpoint)
            self._hold_while_stalled(bool(self.stalls.check()))
            self._track_source()

    def _hold_while_stalled(self, stalled: bool) -> None:
        """A sender waiting on the line (HTTP) is told "retry later" (503 + Retry-After)
        while the route is stalled, at once, instead of waiting out `settle_timeout` for
        a 504 on a message the route could not move anyway."""
        if stalled == self._holding or self.observe:
            return
        if isinstance(self.consumer, Admission):
            self._holding = stalled
            self.consumer.hold("the route is stalled" if stalled else None)

    async def _observed(self, batch: _Batch) -> None:
        """Shadow mode: the batch was matched, rendered and counted; nothing is sent and
        nothing dead-lettered. The deliveries are acknowledged to the observing
        subscription only (its own group, session or ephemeral consumer), which takes
        nothing from the endpoint's real consumers."""
        try:
            for message in batch.messages:
                await message.delivery.ack()
        finally:
            self._release(batch)

    async def _submit(self, output: Output, records: list[NativeMessage]) -> Confirmation:
        """Submit (a reply route's outputs: request); a producer that raises (it should
        report Outcomes instead) fails the whole submission, retryably. While records of
        an output failed retryably and were not sent again, new ones wait (`HELD`): the
        settler resends in order (`runtime/resend.py`)."""
        order = self._resend_first.get(id(output))
        if order is None:
            return await self._submit_now(output, records)
        if not order.admit(records):
            return confirmed([HELD] * len(records))
        confirmation = await self._submit_now(output, records)
        # Failures are owed when they happen, not when the settler gets to the batch (by
        # then the pump may have sent newer records past them): a callback on a future,
        # else a task of its own.
        if isinstance(confirmation, asyncio.Future):
            confirmation.add_done_callback(partial(_owe_failed, order, records))
            return confirmation
        return asyncio.ensure_future(_owed_if_failed(order, records, confirmation))

    async def _submit_now(self, output: Output, records: list[NativeMessage]) -> Confirmation:
        try:
            producer = output.producer
            if (self.reply_timeout is not None and output is not self.deadletter
                    and isinstance(producer, Requester)):
                return await producer.request(records, self.reply_timeout)
            return await producer.submit(records)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.metrics.publish_errors.labels(output.endpoint_id, "exception").inc(
                len(records))
            return _refused(len(records), f"{type(exc).__name__}: {exc}")

    async def _convert_yielding(self, deliveries: list[Delivery], started: float) -> _Batch:
        """`_convert` in slices, giving the event loop a turn between them: a slow batch
        (a large catalog, a costly definition) must not starve the clients' own tasks on
        the loop -- Kafka heartbeats, NATS pings, MQTT keepalives -- or the broker drops
        the consumer while the gateway is merely busy."""
        batch = self._convert(deliveries[:CONVERT_SLICE], started)
        for start in range(CONVERT_SLICE, len(deliveries), CONVERT_SLICE):
            await asyncio.sleep(0)
            more = self._convert(deliveries[start:start + CONVERT_SLICE], started)
            batch.messages.extend(more.messages)
            for sent, added in zip(batch.sent, more.sent, strict=True):
                sent.records.extend(added.records)
                sent.owners.extend(added.owners)
        return batch

    def _convert(self, deliveries: list[Delivery], started: float) -> _Batch:
        """Match and render the whole batch in one loop: no task, future or await per
        message. Metrics are counted per batch."""
        sent = [_Sent(output) for output in self.outputs]
        # The outputs' size limits, read once per batch (a limit may change with a
        # reconnect: NATS max_payload comes with the server's INFO).
        limits = [size_limit(output.producer) for output in self.outputs]
        checked = limits if any(limit is not None for limit in limits) else None
        messages: list[_Message] = []
        received: dict[str, list[int]] = {}  # protocol -> [messages, bytes]
        matched: dict[str, int] = {}
        rendered: dict[str, int] = {}  # of the matched: rendered for every output
        unmatched = 0
        # One receive time for the batch's messages that carry none: received together.
        now = datetime.now(UTC)
        converted = self.converter.convert_batch([d.message for d in deliveries], now=now)
        report = self.report
        if report is not None:
            report.received_messages(len(deliveries))
        for delivery, conversions in zip(deliveries, converted, strict=True):
            record = delivery.message
            counts = received.get(record.protocol)
            if counts is None:
                counts = received[record.protocol] = [0, 0]
            counts[0] += 1
            counts[1] += body_size(record)
            message = _Message(delivery)
            messages.append(message)
            if delivery.undecodable is not None:  # the adapter could not decode it
                conversions = [Conversion(record, MatchResult("unmatched"), None,
                                          reasons.UNDECODABLE, delivery.undecodable)]
            if len(conversions) == 1 and conversions[0].event is None:
                whole = _Member(record, conversions[0], delivery)
                whole.reason = self._not_converted(record, conversions[0], now)
                unmatched += whole.reason == reasons.UNMATCHED
                message.whole = whole
                continue
            for conversion in conversions:
                member = _Member(record, conversion, delivery)
                message.members.append(member)
                event = conversion.event
                if event is None:
                    member.reason = self._not_converted(record, conversion, now, member)
                    unmatched += member.reason == reasons.UNMATCHED
                    continue
                assert conversion.match.definition is not None
                xid = member.definition = conversion.match.definition.xid
                matched[xid] = matched.get(xid, 0) + 1
                self._render(member, event, conversion, sent, checked)
                if member.reason is None:
                    rendered[xid] = rendered.get(xid, 0) + 1
                elif report is not None:
                    # The sample is what the dead letter holds: this event alone.
                    report.failed(member.original(), member.reason, xid, (),
                                  "; ".join(member.failures), now)
        if report is not None:  # counted per batch, as the metrics are
            for xid, count in matched.items():
                report.matched(xid, now, count)
            for xid, count in rendered.items():
                report.rendered(xid, count)
        self._count_intake(received, matched, unmatched)
        return _Batch(messages, sent, started)

    def _not_converted(self, record: NativeMessage, conversion: Conversion,
                       now: datetime, member: _Member | None = None) -> str:
        """The reason a conversion gave no event, counted where it is counted (the
        invalid-data metric, the conformance report). The report's sample of a batch
        `member` is that member, as its dead letter is, not the whole batch."""
        reason = conversion.reason or reasons.UNMATCHED
        if reason == reasons.INVALID_DATA:
            self._count_invalid_data(conversion)
        if self.report is not None:
            sampled = record if member is None else member.original()
            _report_failure(self.report, sampled, conversion, reason, now)
        return reason

    def _count_invalid_data(self, conversion: Conversion) -> None:
        """Per definition: which schema rejects what the sources send."""
        definition = conversion.match.definition
        xid = definition.xid if definition is not None else ""
        self.metrics.invalid_data.labels(self.source_endpoint, xid).inc()

    def _render(self, member: _Member, event: Any, conversion: Conversion,
                sent: list[_Sent], limits: list[int | None] | None = None) -> None:
        """Render `member` for every output; if one cannot take it, it goes to none of
        them (dead-lettered as undeliverable, or too-large when its body is over an
        output's size limit: `limits`, None when no output has one)."""
        context = conversion.match.context
        key = self.keys.key(member.source, context) if self._keyed else None
        rendered: list[NativeMessage] = []
        for output_format, place in self._render_plan:
            try:
                rendered.append(output_format.render(
                    event, context,
                    None if place is None or key is None else (place.field, key)))
            except RenderFailed as exc:
                member.reason = reasons.UNDELIVERABLE
                member.failures.append(f"{sent[len(rendered)].output.endpoint_id}: {exc}")
                return
        if limits is not None:
            for target, record, limit in zip(sent, rendered, limits, strict=True):
                if limit is not None and (size := body_size(record)) > limit:
                    member.reason = reasons.TOO_LARGE
                    member.failures.append(
                        f"{target.output.endpoint_id}: body of {size} bytes is over the "
                        f"output's limit of {limit} bytes")
                    return
        for target, record in zip(sent, rendered, strict=True):
            target.records.append(record)
            target.owners.append(member)

    def _count_intake(self, received: dict[str, list[int]], matched: dict[str, int],
                      unmatched: int) -> None:
        for protocol, (count, size) in received.items():
            counters = self._received.get(protocol)
            if counters is None:
                counters = self._received[protocol] = (
                    self.metrics.received.labels(self.source_endpoint, protocol),
                    self.metrics.received_bytes.labels(self.source_endpoint, protocol))
            counters[0].inc(count)
            counters[1].inc(size)
        for xid, count in matched.items():
            child = self._matched.get(xid)
            if child is None:
                child = self._matched[xid] = self.metrics.matched.labels(
                    self.source_endpoint, xid)
            child.inc(count)
        if unmatched:
            self.metrics.unmatched.labels(self.source_endpoint).inc(unmatched)

    # -- settlement: confirm, retry, dead-letter, settle in order ---------------------------------
    async def _settle_loop(self) -> None:
        while True:
            batch = await self._batches.get()
            try:
                await self._finish(batch)
            except asyncio.CancelledError:
                await self._give_back([m.delivery for m in batch.messages], "stopping")
                self._release(batch)
                raise
            except Exception:  # the daemon never crashes on a message
                # pragma: no mutate start
                log.exception("unexpected error; batch will be redelivered",
                              extra=fields(route=self.name))
                # pragma: no mutate end
                await self._give_back([m.delivery for m in batch.messages], "internal error")
            self._release(batch)

    def _release(self, batch: _Batch) -> None:
        self._free(len(batch.messages), batch.started)

    def _free(self, count: int, started: float) -> None:
        """`count` messages are settled: their window slots are free again."""
        now = time.monotonic()
        observe_many(self._processing, now - started, count)
        self.stalls.cleared(NO_PROGRESS, self.name)
        self._settled_at = now
        self._inflight -= count
        self._inflight_gauge.set(self._inflight)
        self._room.set()
        if self._inflight == 0:
            self._idle.set()

    async def _finish(self, batch: _Batch) -> None:
        for sent in batch.sent:
            if sent.confirmation is not None:
                await self._confirm(sent)
        if self.reply_timeout is not None:
            await self._hand_back(batch)
        dropped: dict[_Message, str] = {}
        failed = await self._dead_letter_batch(batch.messages, dropped)
        for message in batch.messages:
            if message in failed:
                await message.delivery.nack("dead letter failed", retry=True)
            elif message in dropped:
                # Neither published nor dead-lettered (`deadletter: log`): the source is
                # told so -- never again (an HTTP sender: 400 with the reason, not 202).
                await message.delivery.nack(dropped[message], retry=False)
            else:
                await message.delivery.ack()

    async def _confirm(self, sent: _Sent) -> None:
        """Wait for one output's confirmation of a batch; retry what failed; mark the
        members whose records are given up."""
        assert sent.confirmation is not None
        outcomes = await _outcomes(sent.confirmation, len(sent.records))
        output = sent.output
        failed = self._account(output, sent.records, outcomes)
        if failed:
            retried = [outcomes[i] for i in failed]  # _retry leaves the last outcomes here
            owners = [sent.owners[i] for i in failed]
            reasons_given = await self._retry(output, [sent.records[i] for i in failed],
                                              retried, owners)
            for index, why, last in zip(failed, reasons_given, retried, strict=True):
                outcomes[index] = last
                if why is _ABANDONED:
                    continue  # its sender was answered (504) and sends it again itself
                if why is not None:
                    member = sent.owners[index]
                    member.reason = _failure_reason(why, last)
                    member.failures.append(f"{output.endpoint_id}: {why}")
        if self.reply_timeout is not None:
            sent.replies = {i: o for i, o in enumerate(outcomes) if o.reply is not None}
        self._track_connection(output)

    def _account(self, output: Output, records: Sequence[NativeMessage],
                 outcomes: Sequence[Outcome]) -> list[int]:
        """Count delivered records and failures; the indexes of the failed ones."""
        failed = [i for i, outcome in enumerate(outcomes) if not outcome.delivered]
        delivered = len(outcomes) - len(failed)
        if delivered:
            if output is self.deadletter or output.endpoint_id not in self._published:
                size = self.metrics.deadletter_bytes
            else:
                messages, size = self._published[output.endpoint_id]
                messages.inc(delivered)
            if failed:
                skip = set(failed)
                size.inc(sum(body_size(r) for i, r in enumerate(records) if i not in skip))
            else:
                size.inc(sum(body_size(r) for r in records))
        for i in failed:
            self.metrics.publish_errors.labels(
                output.endpoint_id, "retryable" if outcomes[i].retryable else "rejected").inc()
        return failed

    async def _retry(self, output: Output, records: list[NativeMessage],
                     outcomes: list[Outcome], owners: Sequence[_Member] = ()
                     ) -> list[str | None]:
        """Send failed records again, together, within the retry policy; for each record
        None once delivered, else why it was given up. The route is the one owner of
        retries: a producer makes one attempt and may say how long the receiver wants it
        to wait (`Outcome.retry_after`), which the next attempt honours within the
        policy's longest backoff. A record whose sender stopped waiting (`owners`: an
        HTTP request answered 504) is not sent again (`_ABANDONED`): the sender was told
        to, and a late copy would be a duplicate of its retry."""
        why: list[str | None] = [o.reason or "failed" for o in outcomes]
        todo = [i for i, o in enumerate(outcomes) if o.retryable]
        # The output is failing: a stall once it lasts (`runtime/stalls.py`); the dead
        # letter failing holds messages.
        cause: Cause = DEADLETTER_HELD if output is self.deadletter else OUTPUT_UNAVAILABLE
        attempt = 1
        while todo and self.retry.allows(attempt):
            if owners:
                todo = self._still_awaited(todo, owners, why)
                if not todo:
                    break
            self.stalls.failing(cause, output.endpoint_id, why[todo[0]] or "failed")
            waits = [outcomes[i].retry_after for i in todo]
            asked = max((w for w in waits if w is not None), default=None)
            await asyncio.sleep(self.retry.delay(attempt - 1, at_least=asked))
            batch = [records[i] for i in todo]
            # No explicit connect() here: producers reconnect inside submit() behind a
            # backoff gate and fail fast meanwhile, so a dead sink costs one quick failure
            # per attempt instead of a connect timeout per message.
            again = await _outcomes(await self._submit(output, batch), len(batch))
            failed = set(self._account(output, batch, again))
            still = []
            for position, index in enumerate(todo):
                outcome = again[position]
                outcomes[index] = outcome
                if position not in failed:
                    why[index] = None
                    continue
                why[index] = outcome.reason or "failed"
                if outcome.retryable:
                    still.append(index)
            todo = still
            attempt += 1
            self._track_connection(output)
        if cause is OUTPUT_UNAVAILABLE:  # the dead letter's hold clears its own
            self.stalls.cleared(cause, output.endpoint_id)
        return why

    def _still_awaited(self, todo: list[int], owners: Sequence[_Member],
                       why: list[str | None]) -> list[int]:
        """`todo` without the records whose sender stopped waiting; those get
        `_ABANDONED` in `why`."""
        keep = []
        for index in todo:
            delivery = owners[index].delivery
            if delivery is not None and delivery.abandoned:
                why[index] = _ABANDONED
            else:
                keep.append(index)
        if len(keep) < len(todo):
            # pragma: no mutate start
            log.info("%d message(s) not sent again: the sender stopped waiting (HTTP 504) "
                     "and sends again itself", len(todo) - len(keep),
                     extra=fields(route=self.name, endpoint=self.source_endpoint))
            # pragma: no mutate end
        return keep

    # -- request-reply ----------------------------------------------------------------------------
    async def _hand_back(self, batch: _Batch) -> None:
        """Answer the senders of a reply route's batch, before their messages settle: the
        first answer any output got for one of the message's events, else why none came."""
        answers: dict[_Member, Outcome] = {}
        for sent in batch.sent:
            for index, answered in sent.replies.items():
                answers.setdefault(sent.owners[index], answered)
        for message in batch.messages:
            if message.delivery.answer is None:
                continue
            outcome = next((answers[m] for m in message.members if m in answers), None)
            why = ""
            if outcome is None:
                failed = message.whole or next(
                    (m for m in message.members if m.reason is not None), None)
                why = _why_unanswered(failed)
            result = await hand_back(message.delivery, outcome, why)
            self.metrics.replies.labels(self.name, result).inc()

    def _listen_for_strays(self) -> None:
        """Answers no request waits for: late ones are counted, uncorrelated ones
        dead-lettered (`gateway.runtime.reply`)."""
        for output in self.outputs:
            producer = output.producer
            if not isinstance(producer, Requester):
                continue
            late = self.metrics.replies_late.labels(output.endpoint_id)

            def dead_letter(answer: NativeMessage, endpoint: str = output.endpoint_id) -> None:
                task = asyncio.get_running_loop().create_task(
                    self._dead_letter_stray(endpoint, answer))
                self._strays.add(task)
                task.add_done_callback(self._strays.discard)

            producer.replies.listener = stray_listener(late.inc, dead_letter)

    async def _dead_letter_stray(self, endpoint: str, answer: NativeMessage) -> None:
        reason = reasons.UNCORRELATED_REPLY
        detail = (f"an answer on {endpoint}'s reply address carries no correlation "
                  "(correlation data, reply subject token or correlationid attribute)")
        if self.deadletter is None:
            # pragma: no mutate start
            log.warning("dropped answer: %s", detail, extra=fields(
                route=self.name, endpoint=endpoint, reason=reason))
            # pragma: no mutate end
            self.metrics.dropped.labels(reason).inc()
            return
        record = with_defaults(deadletter_record(
            answer, protocol=self.deadletter.protocol, reason=reason, detail=detail,
            explain=(), source_endpoint=endpoint), self.deadletter.defaults)
        outcomes = await _outcomes(await self._submit(self.deadletter, [record]), 1)
        self._account(self.deadletter, [record], outcomes)
        if outcomes[0].delivered:
            self.metrics.deadletter.labels(reason).inc()
        else:
            # pragma: no mutate start
            log.error("dead letter failed; uncorrelated answer dropped", extra=fields(
                route=self.name, endpoint=endpoint, reason=reason))
            # pragma: no mutate end
            self.metrics.dropped.labels(reason).inc()

    def _track_source(self) -> None:
        """Keep the source's `xrgw_endpoint_connected` in step with a consumer that can
        turn not connected while it reads (a Kafka broker that stops answering fetches)."""
        up = self.consumer.connected
        if self._source_up != up:  # on a change only: connect() sets it meanwhile
            self._source_up = up
            self.metrics.connected.labels(self.source_endpoint).set(1 if up else 0)

    def _track_connection(self, output: Output) -> None:
        """Keep `xrgw_endpoint_connected` in step with the producer (which reconnects on
        its own inside submit())."""
        up = output.producer.connected
        if self._up.get(output.endpoint_id) != up:
            self._up[output.endpoint_id] = up
            self.metrics.connected.labels(output.endpoint_id).set(1 if up else 0)

    # -- dead letters -------------------------------------------------------------------------
    async def _dead_letter_batch(self, messages: Sequence[_Message],
                                 dropped: dict[_Message, str] | None = None) -> set[_Message]:
        """Dead-letter what failed of a batch's messages, in one submit; the messages
        whose dead letter failed (they are nacked for redelivery). Without a dead letter
        (`deadletter: log`) what failed is logged and counted, and `dropped` gets each
        such message with why."""
        letters: list[_Letter] = []
        deadletter = self.deadletter
        limit = None if deadletter is None else size_limit(deadletter.producer)
        for message in messages:
            for original, member, detail, explain in _failed_parts(message):
                reason = member.reason or reasons.UNMATCHED
                secrets = self.redactor.secrets(original)
                detail = self.redactor.text(detail, secrets)
                explain = self.redactor.explanations(explain, secrets)
                if deadletter is None:
                    # `deadletter: log` in the config: counted and logged, then acked.
                    # pragma: no mutate start
                    log.warning("dropped message: %s", detail, extra=fields(
                        route=self.name, endpoint=self.source_endpoint, reason=reason,
                        definition=member.definition))
                    # pragma: no mutate end
                    self.metrics.dropped.labels(reason).inc()
                    if dropped is not None:
                        # The reason code only: the detail may quote the message, and an
                        # HTTP sender gets this as its answer (the log line has it).
                        dropped.setdefault(message, reason)
                    continue
                letter = _Letter(message, original, reason, detail, member.definition)
                if limit is not None and body_size(original) > limit:
                    # The dead letter's limit is known: the body cannot go there.
                    letter.record = self._without_body(deadletter, letter, limit)
                else:
                    letter.record = with_defaults(deadletter_record(
                        original, protocol=deadletter.protocol, reason=reason,
                        detail=detail, explain=explain,
                        source_endpoint=self.source_endpoint), deadletter.defaults)
                letters.append(letter)
        if not letters or deadletter is None:
            return set()
        return await self._hold_until_dead_lettered(deadletter, letters)

    def _without_body(self, deadletter: Output, letter: _Letter, limit: int | None,
                      refusal: str | None = None) -> NativeMessage:
        """`letter` as a dead letter without its body (size and digest instead)."""
        why = (f"the dead letter's limit is {limit} bytes" if refusal is None
               else f"the dead letter refused it: {refusal}")
        letter.withheld = True
        return with_defaults(withheld_body(
            letter.original, protocol=deadletter.protocol, reason=letter.reason,
            detail=f"{letter.detail}; body left out ({why})",
            source_endpoint=self.source_endpoint), deadletter.defaults)

    async def _hold_until_dead_lettered(self, deadletter: Output, letters: list[_Letter]
                                        ) -> set[_Message]:
        """The dead letter is the last resort: while it is down, hold the batch (and its
        window slots) and keep trying. Held slots fill the window, so intake stops --
        back-pressure instead of dropping, and instead of nacking into a redelivery storm.
        A letter refused for its size is written again at once without its body: it
        would be refused for ever. Only a stopping route gives the messages back to the
        source. Holding is a stall (`deadletter-held`): at once when the dead letter
        refused a letter for good, after `stall_after` when it is unreachable."""
        endpoint = deadletter.endpoint_id
        while True:
            records = [letter.record for letter in letters]
            outcomes = await _outcomes(await self._submit(deadletter, records), len(records))
            failed = self._account(deadletter, records, outcomes)
            why: list[str | None] = [None] * len(records)
            last: list[Outcome | None] = [None] * len(records)
            if failed:
                retried = [outcomes[i] for i in failed]  # _retry leaves the last ones here
                given_up = await self._retry(deadletter, [records[i] for i in failed],
                                             retried)
                for index, reason, outcome in zip(failed, given_up, retried, strict=True):
                    why[index] = reason
                    last[index] = outcome
            self._track_connection(deadletter)
            remaining: list[_Letter] = []
            again = False  # a letter was rebuilt without its body: try at once
            permanent: str | None = None
            for letter, failure, refusal in zip(letters, why, last, strict=True):
                if failure is None:
                    self.metrics.deadletter.labels(letter.reason).inc()
                    continue
                remaining.append(letter)
                if refusal is not None and refusal.too_large and not letter.withheld:
                    letter.record = self._without_body(deadletter, letter, None, failure)
                    again = True
                elif refusal is not None and not refusal.retryable:
                    permanent = permanent or failure
            if not remaining:
                self.stalls.cleared(DEADLETTER_HELD, endpoint)
                return set()
            letters = remaining
            if again:
                continue
            first = permanent or next(f for f in why if f is not None)
            error = f"{endpoint}: {first}"
            if self._stopping:
                # pragma: no mutate start
                log.error("dead letter failed; %d message(s) nacked for redelivery",
                          len(remaining), extra=fields(
                              route=self.name, endpoint=endpoint, reason=letters[0].reason,
                              definition=letters[0].definition, error=error))
                # pragma: no mutate end
                return {letter.message for letter in remaining}
            # Logged by the stall watch: once when it begins, then at most once a minute.
            self.stalls.failing(DEADLETTER_HELD, endpoint, error, at_once=permanent is not None)
            await asyncio.sleep(self.retry.max_backoff)

    async def _give_back(self, deliveries: Sequence[Delivery], reason: str) -> None:
        for delivery in deliveries:
            if not delivery.settled:
                await _settle_quietly(delivery, reason, retry=True)


def _report_failure(report: RouteReport, record: NativeMessage, conversion: Conversion,
                    reason: str, now: datetime) -> None:
    definition = conversion.match.definition
    report.failed(record, reason, definition.xid if definition is not None else None,
                  conversion.explain, conversion.detail, now)


async def _owed_if_failed(order: ResendFirst, records: list[NativeMessage],
                          confirmation: Confirmation) -> list[Outcome]:
    outcomes = await _outcomes(confirmation, len(records))
    order.settled(records, outcomes)
    return outcomes


def _owe_failed(order: ResendFirst, records: list[NativeMessage],
                done: asyncio.Future[list[Outcome]]) -> None:
    """`_owed_if_failed` as a done callback: the outcomes `_outcomes` will make of it."""
    outcomes = None if done.cancelled() or done.exception() is not None else done.result()
    if outcomes is None or len(outcomes) != len(records):
        outcomes = [Outcome.failed("no outcomes")] * len(records)
    order.settled(records, outcomes)


async def _outcomes(confirmation: Confirmation, count: int) -> list[Outcome]:
    """The outcomes of a confirmation; a confirmation that raises (it should not) fails
    all of its records, retryably."""
    try:
        outcomes = await confirmation
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        return [Outcome.failed(f"{type(exc).__name__}: {exc}")] * count
    if len(outcomes) != count:
        return [Outcome.failed(f"producer reported {len(outcomes)} outcomes for "
                               f"{count} messages")] * count
    return outcomes


def _why_unanswered(member: _Member | None) -> str:
    """What a sender is told when its request got no answer."""
    if member is None:
        return "no answer"
    if member.failures:
        # The failure of the request itself ("no reply within 5 s") without endpoint names
        # or broker answers: those stay in the dead letter and the logs.
        last = member.failures[-1].partition(": ")[2]
        return last if last.startswith(NO_REPLY_PREFIX) else member.reason or "failed"
    return member.reason or reasons.UNMATCHED


#: `_retry`'s verdict on a record whose sender stopped waiting: not sent again, not
#: dead-lettered (the sender was answered 504 and decides), settled as usual.
_ABANDONED = "the sender stopped waiting"


def _failure_reason(why: str, last: Outcome) -> str:
    """The dead-letter reason of a record given up with `why` after `last`."""
    if why.startswith(NO_REPLY_PREFIX):
        return reasons.NO_REPLY
    return reasons.TOO_LARGE if last.too_large else reasons.UNDELIVERABLE


async def _refused(count: int, reason: str) -> list[Outcome]:
    return [Outcome.failed(reason)] * count


def _key_place(protocol: str) -> FieldRef | None:
    prof = find_profile(protocol)
    return prof.partition_key if prof is not None else None


_NOTHING_FAILED: tuple[tuple[NativeMessage, _Member, str, Sequence[Explanation]], ...] = ()


def _failed_parts(
    message: _Message,
) -> Sequence[tuple[NativeMessage, _Member, str, Sequence[Explanation]]]:
    """What to dead-letter of one message: the whole message when it failed to convert,
    else each failed member (original, member, detail, explanation)."""
    whole = message.whole
    if whole is not None:
        return [(whole.source, whole, whole.conversion.detail, whole.conversion.explain)]
    members = message.members
    if len(members) == 1 and members[0].reason is None:
        return _NOTHING_FAILED  # nearly every message: no list built for it
    parts: list[tuple[NativeMessage, _Member, str, Sequence[Explanation]]] = []
    for member in message.members:
        if member.reason is None:
            continue
        if member.failures:
            parts.append((member.original(), member, "; ".join(member.failures), ()))
        else:
            parts.append((member.original(), member, member.conversion.detail,
                          member.conversion.explain))
    return parts


async def _settle_quietly(delivery: Delivery, reason: str, retry: bool) -> None:
    try:
        await delivery.nack(reason, retry=retry)
    except Exception:
        log.debug("delivery already settled", exc_info=True)  # pragma: no mutate


__all__ = ["HTTP", "MAX_BATCH", "Output", "Route"]
