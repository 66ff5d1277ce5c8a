"""A route: one consumer endpoint to one or more producer endpoints, at least once.

    intake:  read_batch ──► convert + render (one tight loop) ──► submit to each output ─┐
                 ▲                                                                      │
                 └──────── window (bounded: messages read, not yet settled) ◄──────┐    │
    settler: await confirmations in order ──► retry failures ──► dead letter ──► settle ◄┘

`Route` keeps the lifecycle (start, connect, stop, the stall watch) and wires its parts,
one module each in `gateway/runtime/`: `intake` (read, convert, submit), `batches`
(match and render a read into a batch), `window` (the in-flight bound), `sender`
(submit, resend first, retry), `settler` (confirm, settle in order), `deadletters`
(write, hold), `reply` (answers for waiting senders), `ledger` (the pure bookkeeping of
a batch and the settlement decisions), `stats` (metrics, report, log lines) and
`tapping` (each settled batch offered to `xrgw tap` while one is open).

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
  sender gets the answer (or is told none came), judged and rendered by the route's
  reply definitions when it has some -- see `gateway.runtime.reply`.
- Senders that wait (an HTTP ingress, request-reply): the outputs are told so
  (`ports.Lingers`), and a Kafka output then lingers 2 ms for more records rather than 5.
- Back-pressure: the pump stops reading while `inflight` messages are unsettled, and the
  adapter passes that on to the broker (credit, receive maximum, paused partitions ...).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from gateway.convert import Converter
from gateway.envelope.outgoing import Mode
from gateway.observability.conformance import RouteReport
from gateway.observability.logs import CLIENT_ENDPOINT
from gateway.observability.metrics import Metrics
from gateway.policies.reply import ReplyErrors
from gateway.policies.retry import RetryPolicy
from gateway.ports import (
    Admission,
    Consumer,
    NotConnected,
    Producer,
    answer_nobody,
    defer_bodies,
    for_waiting_senders,
)
from gateway.protocols import HTTP
from gateway.redaction.redactor import Redactor
from gateway.runtime.backlog import watch_backlog
from gateway.runtime.batches import CONVERT_SLICE, BatchMaker
from gateway.runtime.deadletters import DeadLetters
from gateway.runtime.intake import Intake
from gateway.runtime.keys import SOURCE, PartitionKeys
from gateway.runtime.ledger import Batch
from gateway.runtime.output import Output
from gateway.runtime.reply import Replies, ReplyDefinitions
from gateway.runtime.sender import Sender
from gateway.runtime.settler import Settler
from gateway.runtime.stalls import NO_PROGRESS, SOURCE_FAILING, Stall, Stalls
from gateway.runtime.stats import RouteStats
from gateway.runtime.tapping import TapPoint
from gateway.runtime.window import MAX_BATCH, Window
from gateway.tap.hub import TapHub

#: How long trouble may last before the route reports itself stalled (`routes[].stall_after`).
STALL_AFTER = 30.0
#: How often at most the stall watch looks (shorter when `stall_after` is shorter).
WATCH_SECONDS = 1.0


class Route:
    """One route's lifecycle; the work is done by its parts (see the module docstring)."""

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
        reply_definitions: ReplyDefinitions | None = None,
        reply_errors: ReplyErrors = "none",
        report: RouteReport | None = None,
        observe: bool = False,
        stall_after: float = STALL_AFTER,
        tap: TapHub | None = None,
    ) -> None:
        self.name = name
        # Request-reply: how long each request waits for its answer; None: not a reply route.
        self.reply_timeout = reply_timeout
        # Shadow mode: consume, match and render as usual, publish and dead-letter
        # nothing (the report counts what would have happened).
        self.observe = observe
        self.report = report
        self.source_endpoint = source_endpoint
        self.consumer = consumer
        self.converter = converter
        self.outputs = list(outputs)
        self.deadletter = deadletter
        self.metrics = metrics
        self.mode: Mode = mode
        self.retry = retry or RetryPolicy()
        self.stats = RouteStats(name, source_endpoint, metrics, report, inflight, self.outputs)
        self.stalls = Stalls(name, metrics, stall_after)
        self.window = Window(inflight, max_batch, self.stats, self.stalls)
        self._wire(partition_key, report.redactor if report is not None else Redactor(), tap,
                   reply_definitions, reply_errors)
        self.stats.connected(source_endpoint, consumer.connected)
        for output in [] if observe else self._all_outputs():  # observing: never used
            self.stats.connected(output.endpoint_id, output.producer.connected)
        self._tasks: list[asyncio.Task[None]] = []  # intake, settler, backlog, stall watch
        self._starter: asyncio.Task[None] | None = None
        self._pump: asyncio.Task[None] | None = None
        self._holding = False  # the ingress is held because the route is stalled

    def _wire(self, partition_key: str, redactor: Redactor, tap: TapHub | None,
              reply_definitions: ReplyDefinitions | None, reply_errors: ReplyErrors) -> None:
        """Build the parts: intake -> (queue of batches) -> settler, and what they share.
        `reply_definitions`: what answers must conform to (None: anything);
        `reply_errors`: what a sender without a status is told when none conforms
        (`gateway.runtime.reply`)."""
        stats, stalls, window = self.stats, self.stalls, self.window
        # `xrgw tap`: offered each settled batch while a tap is open (`runtime/tapping.py`).
        self.tap = None if tap is None else TapPoint(tap, self.name, redactor, self.observe)
        self.sender = Sender(self.outputs, self.deadletter, self.retry, self.reply_timeout,
                             stats, stalls)
        # What the dead letters' explanations and the log lines hide of a sender's message
        # (the route's `redact:` and the credential headers), as the report does.
        self.deadletters = DeadLetters(self.deadletter, self.source_endpoint, redactor,
                                       self.sender, window, stats, stalls)
        self.replies = (None if self.reply_timeout is None else
                        Replies(self.outputs, self.deadletters.stray, stats,
                                reply_definitions, reply_errors))
        if self.replies is None:
            answer_nobody(self.consumer)  # its answer hooks would go unused
        batches: asyncio.Queue[Batch] = asyncio.Queue()
        maker = BatchMaker(self.converter, self.outputs, self.mode,
                           PartitionKeys(partition_key), stats)
        if maker.reads_no_bodies:
            defer_bodies(self.consumer)
        if self.reply_timeout is not None or isinstance(self.consumer, Admission):
            # Each sender waits for its own message (on the line, or for its reply): an
            # output holding records back for more would add the wait to every round
            # trip, as nothing more comes until those senders are answered.
            for output in self.outputs:
                for_waiting_senders(output.producer)
        self.intake = Intake(self.source_endpoint, self.consumer, maker, self.sender, window,
                             batches, connect=self._connect_source, retry=self.retry,
                             observe=self.observe, stats=stats, stalls=stalls, tap=self.tap)
        self.settler = Settler(batches, window, self.sender, self.deadletters, self.replies,
                               stats, self.tap)

    # -- state -----------------------------------------------------------------------------
    @property
    def connected(self) -> bool:
        """The consumer and every producer the route uses are connected."""
        if self.observe:  # an observing route never uses its producers
            return self.consumer.connected
        return self.consumer.connected and all(
            o.producer.connected for o in self._all_outputs())

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
        return self.window.inflight

    @property
    def inflight_limit(self) -> int:
        return self.window.limit

    @property
    def max_batch(self) -> int:
        return self.window.max_batch

    # -- lifecycle -------------------------------------------------------------------------
    async def start(self) -> None:
        """Start without waiting for brokers: the outputs connect first (with backoff),
        then intake begins. Meanwhile the route is not ready and pulls nothing, so a
        sink that is down at start-up holds messages at the source instead of filling
        the dead letter."""
        self._starter = asyncio.create_task(self._start())

    async def _start(self) -> None:
        if self.replies is not None and not self.observe:
            self.replies.listen()
        # A sender waiting on the line (HTTP) is told "retry later" while the outputs
        # connect, rather than finding nobody listening.
        admission = (self.consumer if isinstance(self.consumer, Admission)
                     and not self.observe else None)
        if admission is not None:
            admission.hold("the route's outputs are not connected yet")
            await self._connect_source()
        for output in [] if self.observe else self._all_outputs():
            await self._connect(output.endpoint_id, output.producer)
        if admission is not None:
            admission.hold(None)
        create = asyncio.create_task
        self._pump = create(self.intake.run())
        self._tasks = [create(self.settler.run()), self._pump,
                       create(watch_backlog(self.source_endpoint, self.consumer,
                                            self.metrics)),
                       create(self._watch_stalls())]

    async def wait_finished(self) -> None:
        """Until the consumer reports the end of its input (finite inputs, tests)."""
        assert self._starter is not None, "start() first"
        await self._starter
        assert self._pump is not None
        await self._pump

    async def stop(self, grace: float) -> None:
        """Stop intake, let in-flight messages finish (up to `grace` seconds), close."""
        self.window.stopping = True
        if self._starter is not None and not self._starter.done():
            await _cancel(self._starter)
        settler, others = self._tasks[:1], self._tasks[1:]
        for task in others:
            await _cancel(task)
        try:
            await asyncio.wait_for(self.window.idle(), grace)
        except TimeoutError:
            self.stats.grace_ran_out(self.window.inflight, grace)
        for task in settler:
            await _cancel(task)
        await self.settler.give_back_queued()
        await self.consumer.aclose()
        self.stalls.close()

    async def wait_idle(self) -> None:
        await self.window.idle()

    def _all_outputs(self) -> list[Output]:
        return self.outputs + ([self.deadletter] if self.deadletter is not None else [])

    async def _connect_source(self) -> None:
        await self._connect(self.source_endpoint, self.consumer)

    async def _connect(self, endpoint: str, port: Consumer | Producer) -> None:
        attempt = 0
        while not self.window.stopping:
            # The client's own tasks, made inside connect(), log with this endpoint.
            about = CLIENT_ENDPOINT.set(endpoint)
            try:
                await port.connect()
                self.stats.endpoint_connected(endpoint, attempt + 1)
                return
            except NotConnected as exc:
                delay = self.retry.delay(min(attempt, 6))
                self.stats.endpoint_down(endpoint, delay, exc, first=attempt == 0)
                attempt += 1
                await asyncio.sleep(delay)
            finally:
                CLIENT_ENDPOINT.reset(about)

    # -- health ----------------------------------------------------------------------------
    async def _watch_stalls(self) -> None:
        """Look at the route's conditions every so often: a window that does not move,
        reads that stopped failing, stalls to report or to log again."""
        stalls, window = self.stalls, self.window
        interval = max(0.01, min(WATCH_SECONDS, stalls.stall_after / 2))
        while True:
            await asyncio.sleep(interval)
            if stalls.explained():
                # An output or the dead letter failing explains the standstill: one
                # cause, one alert.
                stalls.cleared(NO_PROGRESS, self.name)
            elif (window.inflight
                  and time.monotonic() - window.settled_at >= stalls.stall_after):
                stalls.failing(NO_PROGRESS, self.name,
                               f"{window.inflight} message(s) in flight, none settled "
                               f"for {stalls.stall_after:g} s")
            stalls.quiet(SOURCE_FAILING, self.source_endpoint)
            self._hold_while_stalled(bool(stalls.check()))
            # The source can turn not connected while it reads (a Kafka broker that stops
            # answering fetches): its `xrgw_endpoint_connected` follows.
            self.stats.follow(self.source_endpoint, self.consumer.connected)

    def _hold_while_stalled(self, stalled: bool) -> None:
        """A sender waiting on the line (HTTP) is told "retry later" (503 + Retry-After)
        while the route is stalled, at once, instead of waiting out `settle_timeout` for
        a 504 on a message the route could not move anyway."""
        if stalled == self._holding or self.observe:
            return
        if isinstance(self.consumer, Admission):
            self._holding = stalled
            self.consumer.hold("the route is stalled" if stalled else None)


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


__all__ = ["CONVERT_SLICE", "HTTP", "MAX_BATCH", "Output", "Route"]
