"""The admin HTTP server: `/metrics` (Prometheus), `/healthz` (alive), `/readyz` (every
route's endpoints connected). Listens on loopback by default."""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from gateway.observability.metrics import Metrics


class AdminServer:
    def __init__(self, metrics: Metrics, ready: Callable[[], dict[str, bool]],
                 host: str = "127.0.0.1", port: int = 9464) -> None:
        self.metrics = metrics
        self.ready = ready  # route name -> ready
        self.host = host
        self.port = port
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        server = site._server
        if self.port == 0 and server is not None:  # ephemeral port: report the real one
            sockets = getattr(server, "sockets", None) or []
            if sockets:
                self.port = sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=self.metrics.render(),
                            headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def _readyz(self, request: web.Request) -> web.Response:
        routes = self.ready()
        ok = bool(routes) and all(routes.values())
        return web.json_response({"ready": ok, "routes": routes}, status=200 if ok else 503)
