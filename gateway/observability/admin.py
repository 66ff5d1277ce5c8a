"""The admin HTTP server.

On `listen` (the scrape port): `/metrics` (Prometheus), `/healthz` (alive), `/readyz`
(what `admin.readiness` requires, see readiness.py). None of them shows anything a sender
sent: metric labels carry route, endpoint, definition and reason names and the
definitions' expected values only.

The pages that show message samples -- `/conformance` (the live conformance report,
JSON), `/` (the status page) and `/tap` (the live stream of `xrgw tap`,
`gateway/tap/endpoint.py`) -- are served where `admin.pages` says: on `listen` when
it is on loopback (the default, 127.0.0.1:9464), else on their own loopback listener
(`admin.pages_listen`, reached with `kubectl port-forward`), or on `listen` whatever its
address when the operator opts in (`pages: listen`). With `admin.token_file` they ask for
`Authorization: Bearer <token>`, compared in constant time. On a listener without them
they answer 404 naming the setting.

An optional further listener (`admin.health_listen`) serves only `/healthz` and
`/readyz`: the kubelet's HTTP probes connect to the pod address, so a sidecar whose
admin server stays on loopback is probed there instead of by running a program in the
container for every probe."""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from typing import Literal

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from gateway.observability.conformance import Conformance
from gateway.observability.metrics import Metrics
from gateway.observability.readiness import RUNNING, Readiness, RouteState, judge
from gateway.observability.statuspage import StatusPage
from gateway.tap.endpoint import serve_tap
from gateway.tap.hub import TapHub

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class AdminServer:
    def __init__(self, metrics: Metrics, ready: Callable[[], dict[str, bool]],
                 host: str = "127.0.0.1", port: int = 9464,
                 health: tuple[str, int] | None = None,
                 conformance: Conformance | None = None,
                 report: Callable[[], Readiness] | None = None, *,
                 pages: tuple[str, int] | Literal["listen"] | None = "listen",
                 token: str | None = None, tap: TapHub | None = None) -> None:
        self.metrics = metrics
        # The routes' taps (`/tap`); without one (a bare admin server) nothing is tapped.
        self.tap = tap or TapHub()
        # Where /conformance and / are served: on `listen`, their own (host, port), or not.
        self.pages = pages
        self._token = None if token is None else b"Bearer " + token.encode()
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
        if self.pages == "listen":
            self._add_pages(app)
        else:
            for path in ("/conformance", "/", "/tap"):
                app.router.add_get(path, self._elsewhere)
        self.port = await self._serve(app, self.host, self.port)
        if isinstance(self.pages, tuple):
            pages = web.Application()
            self._add_pages(pages)
            host, port = self.pages
            self.pages = host, await self._serve(pages, host, port)
        if self.health is not None:
            host, port = self.health
            self.health = host, await self._serve(self._health_app(), host, port)

    async def stop(self) -> None:
        self.tap.close()  # open /tap streams end, or the runner would wait for them
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

    def _add_pages(self, app: web.Application) -> None:
        app.router.add_get("/conformance", self._guarded(self._conformance))
        app.router.add_get("/", self._guarded(self._status))
        app.router.add_get("/tap", self._guarded(self._tap))

    def _guarded(self, handler: Handler) -> Handler:
        """`handler` behind the bearer token, when there is one."""
        token = self._token
        if token is None:
            return handler

        async def guarded(request: web.Request) -> web.StreamResponse:
            given = request.headers.get("Authorization", "").strip().encode(
                "utf-8", "replace")
            if not hmac.compare_digest(given, token):
                return web.json_response(
                    {"error": "this page needs the admin token"}, status=401,
                    headers={"WWW-Authenticate": 'Bearer realm="xrgw admin"'})
            return await handler(request)

        return guarded

    async def _elsewhere(self, request: web.Request) -> web.Response:
        where = ("on admin.pages_listen" if isinstance(self.pages, tuple)
                 else "nowhere (admin.pages: off)")
        return web.json_response(
            {"error": f"the pages with message samples are served {where}, not on the "
                      "scrape port; see admin.pages in docs/configuration.md"}, status=404)

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=self.metrics.render(),
                            headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _conformance(self, request: web.Request) -> web.Response:
        return web.json_response(self.conformance.to_json())

    async def _status(self, request: web.Request) -> web.Response:
        page = self.status_page.render(self.conformance.to_json(), self.ready())
        return web.Response(text=page, content_type="text/html", charset="utf-8")

    async def _tap(self, request: web.Request) -> web.StreamResponse:
        return await serve_tap(request, self.tap, lambda: self.ready().keys())

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def _readyz(self, request: web.Request) -> web.Response:
        verdict = self.report()
        return web.json_response(verdict.to_json(), status=200 if verdict.ready else 503)


def _every_route(routes: dict[str, bool]) -> Readiness:
    """Readiness from route -> ready alone (an admin server without a gateway: tests)."""
    return judge("all", (), [RouteState(name, RUNNING if ok else "not-ready")
                            for name, ok in routes.items()], started=bool(routes))
