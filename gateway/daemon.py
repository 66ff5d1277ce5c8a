"""`xrgw run -c CONFIG`: the long-running gateway.

Builds one `Route` per configured route from a `GatewayConfig`, with adapters made by an
adapter factory found through the `xrgw.adapters` entry point (the core never imports an
adapter), serves `/metrics`, `/healthz` and `/readyz`, and handles signals:

- SIGTERM / SIGINT: stop intake, drain in-flight messages (ack/commit), exit 0 within the
  configured grace period.
- SIGHUP, a changed config or definitions file, or a changed registry document: load and
  check the new configuration completely, then swap it in; a broken one is rejected with
  its problems logged and the running configuration keeps serving.

Failing to start (an invalid configuration, the admin port taken, no adapters installed)
is a JSON log line and a non-zero exit code (`EXIT_CONFIG`, `EXIT_STARTUP`), never a
traceback: what an operator reads in `kubectl logs` is the reason, in the same format as
every other line.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import signal
from collections.abc import Sequence
from importlib.metadata import entry_points
from pathlib import Path
from typing import Protocol

from gateway.config import EndpointConfig, GatewayConfig, for_adapter, load_config
from gateway.convert import Converter
from gateway.definitions.positions import with_document_positions
from gateway.definitions.sources import RegistryAccess
from gateway.heap import freeze_new, settle_heap
from gateway.json.values import JSON
from gateway.observability.admin import AdminServer
from gateway.observability.conformance import Conformance
from gateway.observability.logs import fields
from gateway.observability.metrics import Metrics
from gateway.observability.readiness import (
    EndpointState,
    Readiness,
    RouteState,
    judge,
)
from gateway.ports import AdapterEndpoint, Consumer, Producer
from gateway.runtime.reply import ReplyDefinitions
from gateway.runtime.route import Output, Route
from gateway.schemas.fetch import FETCHER
from gateway.spec.problems import Problem
from gateway.tap.hub import TapHub

log = logging.getLogger("xrgw.daemon")

#: Exit codes of `xrgw run` (0: stopped by a signal after draining).
EXIT_CONFIG = 1   # the configuration has errors (each logged with file, path and fix)
EXIT_STARTUP = 3  # the configuration is fine but the gateway could not start


class AdapterFactory(Protocol):
    """Makes adapters for configured endpoints (implemented in `adapters.registry`). The
    core hands it each endpoint as `gateway.config.for_adapter` builds it: a consumer's
    with the address templates of the messages it subscribes for."""

    def consumer(self, endpoint: AdapterEndpoint, *, observe: bool = False) -> Consumer: ...

    def producer(self, endpoint: AdapterEndpoint) -> Producer: ...

    def output_defaults(self, endpoint: AdapterEndpoint) -> dict[str, JSON]: ...


def load_factory() -> AdapterFactory:
    found = entry_points(group="xrgw.adapters", name="default")
    for entry in found:
        factory: AdapterFactory = entry.load()
        return factory
    raise RuntimeError("no adapter factory installed (entry point group xrgw.adapters)")


class Gateway:
    def __init__(self, config: GatewayConfig, factory: AdapterFactory,
                 metrics: Metrics | None = None, *, observe: bool = False) -> None:
        self.config = config
        self.factory = factory
        self.metrics = metrics or Metrics()
        # `run --observe`: every route of every (reloaded) config in shadow mode.
        self.observe = observe
        self.conformance = Conformance()
        self.metrics.registry.register(self.conformance)
        # `xrgw tap`: one hub for every route of every (reloaded) config; idle until a
        # `/tap` stream attaches.
        self.tap = TapHub(self.metrics.registry)
        self.routes: list[Route] = []
        self.admin: AdminServer | None = None
        self._stop = asyncio.Event()
        self._reload = asyncio.Event()
        self._fingerprint = _fingerprint(config)

    # -- building -----------------------------------------------------------------------------
    def _build_routes(self, config: GatewayConfig) -> list[Route]:
        routes = []
        deadletter: Output | None = None
        if config.deadletter is not None:
            deadletter = self._output(config.endpoints[config.deadletter], "cloudevent")
        for route_cfg in config.routes:
            source = config.endpoints[route_cfg.source]
            if source.protocol is not None:
                self.metrics.known_source(route_cfg.source, source.protocol)
            converter = Converter(route_cfg.messages, ambiguity=route_cfg.ambiguity,
                                  schema=route_cfg.schema)
            outputs = [self._output(config.endpoints[t], route_cfg.deliver)
                       for t in route_cfg.targets]
            name = f"{route_cfg.source}->{','.join(route_cfg.targets)}"
            # Only an observing route asks for an observing consumer (factories written
            # before shadow mode take no `observe`).
            subscribed = for_adapter(source, route_cfg.messages)
            consumer = (self.factory.consumer(subscribed, observe=True)
                        if route_cfg.observe else self.factory.consumer(subscribed))
            routes.append(Route(
                name, route_cfg.source, consumer, converter, outputs,
                deadletter=deadletter, metrics=self.metrics, mode=route_cfg.mode,
                inflight=route_cfg.inflight, retry=route_cfg.retry,
                stall_after=route_cfg.stall_after,
                partition_key=route_cfg.partitionkey, reply_timeout=route_cfg.reply_timeout,
                reply_definitions=(ReplyDefinitions(route_cfg.reply_messages,
                                                    schema=route_cfg.schema)
                                   if route_cfg.reply_messages else None),
                reply_errors=route_cfg.reply_errors,
                observe=route_cfg.observe, tap=self.tap,
                report=self.conformance.route(name, route_cfg.source,
                                              observe=route_cfg.observe,
                                              redact=route_cfg.redact)))
        self.metrics.definitions.set(sum(len(r.messages) for r in config.routes))
        return routes

    def _output(self, endpoint: EndpointConfig, deliver: str) -> Output:
        assert endpoint.protocol is not None
        given = for_adapter(endpoint)
        return Output(endpoint.endpoint_id, endpoint.protocol, self.factory.producer(given),
                      defaults=self.factory.output_defaults(given),
                      deliver="native" if deliver == "native" else "cloudevent",
                      definitions=endpoint.messages)

    # -- running ------------------------------------------------------------------------------
    def readiness(self) -> dict[str, bool]:
        """Per route: connected and not stalled (`Route.ready`)."""
        return {route.name: route.ready for route in self.routes}

    def readiness_report(self) -> Readiness:
        """/readyz: the endpoints' and routes' states judged by `admin.readiness`."""
        return judge(self.config.admin.readiness, _endpoint_states(self.routes),
                     _route_states(self.routes), started=bool(self.routes))

    async def start(self, built: list[Route] | None = None) -> None:
        """Start the routes (`built`: already built from this configuration) and the
        admin server."""
        self.routes = self._build_routes(self.config) if built is None else built
        for route in self.routes:
            await route.start()
        admin = self.config.admin
        self.admin = AdminServer(self.metrics, self.readiness, admin.host, admin.port,
                                 admin.health, conformance=self.conformance,
                                 report=self.readiness_report,
                                 pages=admin.pages_address(),
                                 token=None if admin.token is None else admin.token.reveal(),
                                 tap=self.tap)
        await self.admin.start()
        pages = self.admin.pages
        where = ("on the admin port" if pages == "listen" else "off" if pages is None
                 else f"on {pages[0]}:{pages[1]}")
        log.info("xrgw started: %d route(s), admin on %s:%d, sample pages %s%s",
                 len(self.routes), self.admin.host, self.admin.port, where,
                 " (token required)" if admin.token is not None else "")

    def request_stop(self) -> None:
        self._stop.set()

    def request_reload(self) -> None:
        self._reload.set()

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        for sig, handler in ((signal.SIGTERM, self.request_stop),
                             (signal.SIGINT, self.request_stop),
                             (signal.SIGHUP, self.request_reload)):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, handler)
        try:
            built = self._build_routes(self.config)
            settle_heap()  # the catalog out of the collector's scans, before anything listens
            await self.start(built)
        except Exception as exc:
            log.error("start-up failed", extra=fields(error=exc))
            await self.stop()
            return EXIT_STARTUP
        freeze_new()  # the clients too, without walking the catalog again (see heap.py)
        watcher = asyncio.create_task(self._watch())
        while not self._stop.is_set():
            stop = asyncio.create_task(self._stop.wait())
            reload = asyncio.create_task(self._reload.wait())
            await asyncio.wait({stop, reload}, return_when=asyncio.FIRST_COMPLETED)
            stop.cancel()
            reload.cancel()
            if self._reload.is_set() and not self._stop.is_set():
                self._reload.clear()
                if await self.reload():
                    settle_heap()
        watcher.cancel()
        await self.stop()
        return 0

    async def stop(self) -> None:
        grace = self.config.shutdown.grace
        await asyncio.gather(*(route.stop(grace) for route in self.routes))
        await _close_producers(self.routes)
        if self.admin is not None:
            await self.admin.stop()
        log.info("xrgw stopped")

    async def reload(self) -> bool:
        """Load, check and swap in the configuration; False (and keep serving) if broken."""
        config, problems = await asyncio.to_thread(load_config, self.config.file,
                                                   observe=self.observe)
        for problem in with_document_positions(problems):
            log_problem(problem, "reload: ")
        if config is None:
            self.metrics.reloads.labels("rejected").inc()
            self.metrics.reload_ok.set(0)
            log.error("reload rejected; the running configuration keeps serving")
            return False
        new_routes = self._build_routes(config)
        old_routes = self.routes
        for route in new_routes:
            await route.start()
        self.routes = new_routes
        self.config = config
        self._fingerprint = _fingerprint(config)
        await asyncio.gather(*(route.stop(config.shutdown.grace) for route in old_routes))
        await _close_producers(old_routes)
        self.metrics.reloads.labels("ok").inc()
        self.metrics.reload_ok.set(1)
        log.info("reloaded: %d route(s)", len(new_routes))
        return True

    async def _watch(self, interval: float = 2.0) -> None:
        """Reload when the config file or a definitions file changes on disk, or when a
        polled registry document changes (checked every `poll` of its source)."""
        remote: dict[str, str] = {}
        polled: dict[str, float] = {}
        while True:
            await asyncio.sleep(interval)
            try:
                current = await asyncio.to_thread(_fingerprint, self.config)
            except OSError:
                continue
            if current != self._fingerprint:
                log.info("configuration or definitions changed on disk; reloading")
                self._fingerprint = current
                self.request_reload()
                continue
            loop = asyncio.get_running_loop()
            unchanged_poll = False  # a registry was polled and found unchanged
            for source in self.config.definitions:
                if "://" not in source.location or source.poll is None:
                    continue
                if loop.time() - polled.get(source.location, 0.0) < source.poll:
                    continue
                polled[source.location] = loop.time()
                digest = await asyncio.to_thread(_remote_fingerprint, source.location,
                                                 source.access())
                if digest is None:
                    continue  # unreachable or garbage: keep the working configuration
                if remote.setdefault(source.location, digest) != digest:
                    log.info("registry %s changed; reloading", source.location)
                    remote[source.location] = digest
                    self.request_reload()
                else:
                    unchanged_poll = True
            # The schema URLs are asked once per tick with a poll, not once per registry.
            if (unchanged_poll and not self._reload.is_set()
                    and await asyncio.to_thread(FETCHER.changed, _schema_urls(self.config))):
                log.info("a schema URL changed; reloading")
                self.request_reload()


def _endpoint_states(routes: Sequence[Route]) -> list[EndpointState]:
    states = []
    for route in routes:
        states.append(EndpointState(route.source_endpoint, route.name, "source",
                                    route.consumer.connected))
        if route.observe:  # an observing route never uses its producers
            continue
        states.extend(EndpointState(o.endpoint_id, route.name, "output",
                                    o.producer.connected) for o in route.outputs)
        if route.deadletter is not None:
            states.append(EndpointState(route.deadletter.endpoint_id, route.name,
                                        "deadletter", route.deadletter.producer.connected))
    return states


def _route_states(routes: Sequence[Route]) -> list[RouteState]:
    """Each route's state: `stalled` while it reports stalls (`Route.stalled`, each with
    `to_json()`: cause, endpoint, seconds), else running. Read with getattr: a route
    without stall tracking is always running."""
    states = []
    for route in routes:
        stalls = list(getattr(route, "stalled", None) or ())
        if not stalls:
            states.append(RouteState(route.name))
            continue
        details = tuple(s.to_json() for s in stalls)
        why = "; ".join(f"{d.get('cause')} at {d.get('endpoint')} for {d.get('seconds')}s"
                        for d in details)
        states.append(RouteState(route.name, "stalled", why, details))
    return states


async def _close_producers(routes: Sequence[Route]) -> None:
    producers = {id(o.producer): o.producer for r in routes for o in r.outputs}
    for route in routes:
        if route.deadletter is not None:
            producers[id(route.deadletter.producer)] = route.deadletter.producer
    for producer in producers.values():
        try:
            await producer.aclose()
        except Exception:  # closing is best effort; the process is going away
            log.debug("closing a producer failed", exc_info=True)


def _schema_urls(config: GatewayConfig) -> list[str]:
    """The schema documents enforcing routes fetched from URLs (polled with the registry)."""
    return sorted({m.schema.document.location for route in config.routes
                   if route.schema == "enforce" for m in route.messages
                   if m.schema is not None and m.schema.document is not None
                   and m.schema.document.location.startswith(("http://", "https://"))})


def _remote_fingerprint(url: str, access: RegistryAccess | None = None) -> str | None:
    import json

    from gateway.definitions.sources import RawDocument, load_url

    how = access or RegistryAccess()
    document = load_url(url, timeout=10, headers=how.headers, ca_file=how.ca_file)
    if not isinstance(document, RawDocument):
        log_problem(document, "registry poll failed: ")
        return None
    text = json.dumps(document.data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _fingerprint(config: GatewayConfig) -> str:
    digest = hashlib.sha256()
    paths = [Path(config.file)]
    for source in config.definitions:
        if "://" not in source.location:
            path = Path(source.location)
            paths.extend(sorted(path.iterdir()) if path.is_dir() else [path])
    for path in paths:
        with contextlib.suppress(OSError):
            stat = path.stat()
            digest.update(f"{path}:{stat.st_mtime_ns}:{stat.st_size}".encode())
    return digest.hexdigest()


def log_problem(problem: Problem, prefix: str = "") -> None:
    """A configuration or definitions problem as a log line: the message as text, where
    it is and how to fix it as keys."""
    (log.error if problem.is_error else log.warning)(
        "%s%s", prefix, problem.message,
        extra=fields(file=problem.file, path=problem.path or None, fix=problem.fix or None,
                     line=problem.line, column=problem.column))


def run(config_path: str, *, log_level: str | None = None, observe: bool = False) -> int:
    """`xrgw run`; `log_level` (from --log-level) wins over the config and the environment;
    `observe` (--observe) puts every route in shadow mode."""
    from gateway.observability.logs import configure

    config, problems = load_config(config_path, observe=observe)
    if config is None:
        configure(override=log_level)
    else:
        configure(config.log.level, config.log.format, override=log_level)
    # Problems in the definitions documents get their line and column as `validate`
    # prints them.
    for problem in with_document_positions(problems):
        log_problem(problem)
    if config is None:
        log.error("not started: the configuration has errors",
                  extra=fields(file=config_path))
        return EXIT_CONFIG
    try:
        gateway = Gateway(config, load_factory(), observe=observe)
        return asyncio.run(gateway.run())
    except Exception as exc:  # whatever it is, the operator gets one JSON line and a code
        log.error("start-up failed", extra=fields(error=exc))
        return EXIT_STARTUP


__all__ = ["EXIT_CONFIG", "EXIT_STARTUP", "AdapterFactory", "Gateway", "log_problem", "run"]
