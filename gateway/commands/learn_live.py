"""`xrgw learn -c CONFIG --endpoint ID`: learn from a live consumer endpoint, without
taking anything from it.

The endpoint is opened exactly as a shadow-mode route opens its source: the adapter
factory of `xrgw run` (`gateway.daemon.load_factory`, found through the `xrgw.adapters`
entry point - the core never imports an adapter) makes an *observing* consumer
(`observe=True`: its own Kafka group, a plain MQTT subscription with a clean session, a
plain NATS subscription, an ephemeral JetStream consumer acknowledging nothing durable),
and each delivery is acknowledged to that observing subscription only, as an observing
route settles it. Endpoints that cannot be observed (AMQP) are refused with the same
reason `validate` gives for `observe: true`.

Records are handed to `gateway.learn.learn` in a worker thread while they are read, so
memory is the learner's (bounded), not a list of everything read. Reading stops at
`--count` records, after `--for`, or on SIGINT/SIGTERM; then the learner finishes with
what was read.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import signal
import sys
import time
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, TextIO

from gateway.record import NativeMessage

if TYPE_CHECKING:
    from gateway.config import EndpointConfig, GatewayConfig
    from gateway.definitions.model import MessageDefinition
    from gateway.learn import LearnOptions, LearnResult
    from gateway.ports import Consumer, Delivery

#: Exit codes: the arguments name nothing learnable (unknown, producer-only or
#: unobservable endpoint) / the endpoint could not be reached.
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3

_MAX_BATCH = 500
_HANDOVER_BATCHES = 64  # batches read and not yet learned: the reader waits beyond this
_READS = ("consumer", "subscriber")


class LiveInputError(Exception):
    """Why the endpoint cannot be learned from; `code` is the exit code."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Limits:
    """When reading stops: after `count` records or `seconds`, whichever comes first."""

    count: int | None
    seconds: float | None

    def describe(self) -> str:
        parts = ([f"up to {self.count} message(s)"] if self.count is not None else []) + (
            [f"for {self.seconds:g}s"] if self.seconds is not None else [])
        return " or ".join(parts)


@dataclass
class LiveRead:
    """What was read, and why reading stopped."""

    result: LearnResult
    read: int
    seconds: float
    stopped: str  # "count reached", "time up", "interrupted"


def observed_endpoint(config: GatewayConfig, endpoint_id: str) -> EndpointConfig:
    """The consumer endpoint `endpoint_id` of `config`, if it can be observed."""
    from gateway.config import observe_refusal

    endpoint = config.endpoints.get(endpoint_id)
    if endpoint is None:
        readable = sorted(e.endpoint_id for e in config.endpoints.values()
                          if set(e.usage) & set(_READS))
        raise LiveInputError(
            f"no endpoint '{endpoint_id}' in {config.file}; consumer endpoints there: "
            f"{', '.join(readable) or '(none)'}")
    if not set(endpoint.usage) & set(_READS):
        raise LiveInputError(
            f"endpoint '{endpoint_id}' has usage {', '.join(endpoint.usage) or 'none'}: "
            "nothing to read from it; name an endpoint with usage consumer")
    refused = observe_refusal(endpoint.protocol)
    if refused is not None:
        raise LiveInputError(f"endpoint '{endpoint_id}' cannot be observed: {refused}")
    return endpoint


def subscribed_messages(config: GatewayConfig,
                        endpoint: EndpointConfig) -> tuple[MessageDefinition, ...]:
    """The definitions the consumer derives its subscription from: those of the routes
    reading the endpoint (as `xrgw run` subscribes), else the endpoint's own."""
    seen: dict[int, MessageDefinition] = {}
    for route in config.routes:
        if route.source == endpoint.endpoint_id:
            for message in route.messages:
                seen.setdefault(id(message), message)
    return tuple(seen.values()) or endpoint.messages


def open_observer(config: GatewayConfig, endpoint: EndpointConfig) -> Consumer:
    """An observing consumer of `endpoint`, made by the daemon's adapter factory."""
    from gateway.config import for_adapter
    from gateway.daemon import load_factory

    try:
        factory = load_factory()
        return factory.consumer(for_adapter(endpoint, subscribed_messages(config, endpoint)),
                                observe=True)
    except (RuntimeError, ValueError) as exc:
        raise LiveInputError(str(exc)) from exc


def learn_live(consumer: Consumer, endpoint_id: str, limits: Limits, options: LearnOptions,
               err: TextIO = sys.stderr) -> LiveRead:
    """Read `consumer` until `limits` or a signal, learning while reading."""
    return asyncio.run(_learn_live(consumer, endpoint_id, limits, options, err))


async def _learn_live(consumer: Consumer, endpoint_id: str, limits: Limits,
                      options: LearnOptions, err: TextIO) -> LiveRead:
    from gateway.learn import learn
    from gateway.ports import EndOfInput, NotConnected

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    handled = _on_signals(loop, stop.set)
    batches: queue.Queue[list[NativeMessage] | None] = queue.Queue(_HANDOVER_BATCHES)
    learning = loop.run_in_executor(None, learn, _drain(batches), options)
    started = time.monotonic()
    deadline = None if limits.seconds is None else started + limits.seconds
    read = 0
    stopped = "interrupted"
    try:
        try:
            await consumer.connect()
        except NotConnected as exc:
            raise LiveInputError(f"endpoint '{endpoint_id}': cannot connect: {exc}",
                                 EXIT_UNREACHABLE) from exc
        print(f"xrgw learn: observing endpoint '{endpoint_id}' {limits.describe()}; "
              "Ctrl-C stops and learns from what was read", file=err, flush=True)
        while True:
            if limits.count is not None and read >= limits.count:
                stopped = "count reached"
                break
            if deadline is not None and time.monotonic() >= deadline:
                stopped = "time up"
                break
            if stop.is_set():
                break
            want = _MAX_BATCH if limits.count is None else min(_MAX_BATCH, limits.count - read)
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                deliveries = await _until(consumer.read_batch(want), stop, timeout)
            except EndOfInput:
                stopped = "end of input"
                break
            except NotConnected:
                await _reconnect(consumer, stop, deadline)
                continue
            if deliveries is None:
                continue  # stopped or out of time: the checks above say which
            for delivery in deliveries:
                # As an observing route settles: acknowledged to the observing
                # subscription only, which takes nothing from the real consumers.
                await delivery.ack()
            read += len(deliveries)
            await _hand_over(batches, [d.message for d in deliveries], learning)
    finally:
        for signum in handled:
            loop.remove_signal_handler(signum)
        await _hand_over(batches, None, learning)
        with contextlib.suppress(Exception):
            await consumer.aclose()
    result = await learning
    return LiveRead(result, read, time.monotonic() - started, stopped)


def _on_signals(loop: asyncio.AbstractEventLoop, stop: Callable[[], None]) -> list[int]:
    """SIGINT and SIGTERM stop reading (not the process); only in the main thread."""
    handled: list[int] = []
    for signum in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(signum, stop)
        except (ValueError, RuntimeError, NotImplementedError):
            continue  # not the main thread (tests): reading stops by its limits
        handled.append(signum)
    return handled


async def _until(read: Coroutine[object, object, list[Delivery]], stop: asyncio.Event,
                 timeout: float | None) -> list[Delivery] | None:
    """The read's result, or None (read cancelled) when `stop` is set or time is up."""
    task = asyncio.ensure_future(read)
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, stopping}, timeout=timeout,
                           return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
    if task.done():
        return task.result()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return None


async def _reconnect(consumer: Consumer, stop: asyncio.Event, deadline: float | None) -> None:
    from gateway.ports import NotConnected

    while not stop.is_set() and (deadline is None or time.monotonic() < deadline):
        try:
            await consumer.connect()
            return
        except NotConnected:
            await asyncio.sleep(1.0)


def _drain(batches: queue.Queue[list[NativeMessage] | None]) -> Iterator[NativeMessage]:
    """The learner's input: the read batches, until the reader says it is done."""
    while (batch := batches.get()) is not None:
        yield from batch


async def _hand_over(batches: queue.Queue[list[NativeMessage] | None],
                     batch: list[NativeMessage] | None,
                     learning: asyncio.Future[LearnResult]) -> None:
    """Give the learner a batch, waiting (without blocking the loop) while it is behind;
    a learner that died takes nothing more (its error is raised when awaited)."""
    while not learning.done():
        try:
            batches.put_nowait(batch)
            return
        except queue.Full:
            await asyncio.sleep(0.01)
