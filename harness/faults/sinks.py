"""An HTTP sink for the fault scenarios: counts what it receives, optionally slowly."""

from __future__ import annotations

import asyncio

from aiohttp import web

from harness.brokers import free_port
from harness.faults.tally import Tally


class SlowSink:
    """An HTTP sink that answers 200 after `delay` seconds, counting bodies by seq."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.tally = Tally()
        self.concurrent = 0
        self.max_concurrent = 0
        self.port = free_port()
        self._runner: web.AppRunner | None = None

    async def _handle(self, request: web.Request) -> web.Response:
        self.concurrent += 1
        self.max_concurrent = max(self.max_concurrent, self.concurrent)
        try:
            data = await request.read()
            await asyncio.sleep(self.delay)
            self.tally.add(data)
            return web.Response(status=200)
        finally:
            self.concurrent -= 1

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
