"""The admin HTTP server: `/metrics` (Prometheus), `/healthz` (alive), `/readyz` (what
`admin.readiness` requires, see readiness.py), `/conformance` (the live conformance
report, JSON) and `/` (the status page). Listens on loopback by default.

An optional second listener (`admin.health_listen`) serves only `/healthz` and
`/readyz`: the kubelet's HTTP probes connect to the pod address, so a sidecar whose
admin server stays on loopback is probed there instead of by running a program in the
container for every probe."""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from gateway.observability.conformance import Conformance
from gateway.observability.metrics import Metrics
from gateway.observability.readiness import RUNNING, Readiness, RouteState, judge
from gateway.observability.statuspage import StatusPage


class AdminServer:
    def __init__(self, metrics: Metrics, ready: Callable[[], dict[str, bool]],
                 host: str = "127.0.0.1", port: int = 9464,
                 health: tuple[str, int] | None = None,
                 conformance: Conformance | None = None,
                 report: Callable[[], Readiness] | None = None) -> None:
        self.metrics = metrics
        self.ready = ready  # route name -> ready
        # /readyz's verdict under `admin.readiness`; default: every route ready
        self.report = report or (lambda: _every_route(self.ready()))
        self.host = host
        self.port = port
        self.health = health  # (host, port) of the probes-only listener; port 0: any
        self._runners: list[web.AppRunner] = []
        self.conformance = conformance or Conformance()
        self.status_page = StatusPage()

    async def start(self) -> None:
        app = self._health_app()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/conformance", self._conformance)
        app.router.add_get("/", self._status)
        self.port = await self._serve(app, self.host, self.port)
        if self.health is not None:
            host, port = self.health
            self.health = host, await self._serve(self._health_app(), host, port)

    async def stop(self) -> None:
        for runner in self._runners:
            await runner.cleanup()
        self._runners.clear()

    def _health_app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        return app

    async def _serve(self, app: web.Application, host: str, port: int) -> int:
        """Listen; the port actually bound (for port 0, the ephemeral one)."""
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        self._runners.append(runner)
        site = web.TCPSite(runner, host, port)
        await site.start()
        server = site._server
        if port == 0 and server is not None:
            sockets = getattr(server, "sockets", None) or []
            if sockets:
                bound: int = sockets[0].getsockname()[1]
                return bound
        return port

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=self.metrics.render(),
                            headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _conformance(self, request: web.Request) -> web.Response:
        return web.json_response(self.conformance.to_json())

    async def _status(self, request: web.Request) -> web.Response:
        page = self.status_page.render(self.conformance.to_json(), self.ready())
        return web.Response(text=page, content_type="text/html", charset="utf-8")

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def _readyz(self, request: web.Request) -> web.Response:
        verdict = self.report()
        return web.json_response(verdict.to_json(), status=200 if verdict.ready else 503)


def _every_route(routes: dict[str, bool]) -> Readiness:
    """Readiness from route -> ready alone (an admin server without a gateway: tests)."""
    return judge("all", (), [RouteState(name, RUNNING if ok else "not-ready")
                            for name, ok in routes.items()], started=bool(routes))
