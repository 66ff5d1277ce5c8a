"""The gateway the interop tests send to: in process, loaded from `interop.xreg.json` with
the harness brokers' URLs, plus a NATS collector of what it published and dead-lettered.

Every outcome is looked up by the CloudEvent `subject` (the device a test chose), so that
each case proves its own message was converted, or dead-lettered with its reason."""

from __future__ import annotations

import asyncio
import json
import shutil
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import nats
from nats.aio.msg import Msg

from adapters.registry import REGISTRY
from gateway.config import load_config
from gateway.daemon import Gateway

DEFINITIONS = Path(__file__).resolve().parent / "interop.xreg.json"
#: Seconds a case waits for its outcome (a loaded 2-core machine included).
PATIENCE = 60.0


@dataclass
class Seen:
    """What reached NATS: CloudEvents on the output subject, dead letters on the other."""

    events: list[Msg] = field(default_factory=list)
    dead: list[Msg] = field(default_factory=list)

    def event(self, subject: str) -> Msg | None:
        # The CloudEvents NATS binding percent-encodes header values as HTTP's does.
        for msg in self.events:
            if unquote((msg.headers or {}).get("ce-subject", "")) == subject:
                return msg
        return None

    def dead_letter(self, check: Callable[[Msg], bool]) -> Msg | None:
        for msg in self.dead:
            if check(msg):
                return msg
        return None


class RunningGateway:
    """A gateway on its own thread and event loop (the tests call blocking clients)."""

    def __init__(self, config_path: Path, nats_url: str) -> None:
        self.config_path = config_path
        self.nats_url = nats_url
        self.seen = Seen()
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.gateway: Gateway | None = None
        self._nc: Any = None

    def run(self, coro: Any, timeout: float = PATIENCE) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def start(self) -> None:
        self._thread.start()
        self.run(self._start(), 180)

    async def _start(self) -> None:
        config, problems = load_config(self.config_path)
        assert config is not None, [str(p) for p in problems]
        self._nc = await nats.connect(self.nats_url)

        async def out(msg: Msg) -> None:
            self.seen.events.append(msg)

        async def dead(msg: Msg) -> None:
            self.seen.dead.append(msg)

        await self._nc.subscribe("interop.out", cb=out)
        await self._nc.subscribe("interop.dead", cb=dead)
        await self._nc.flush()
        self.gateway = Gateway(config, REGISTRY)
        await self.gateway.start()
        async with asyncio.timeout(150):
            while not all(self.gateway.readiness().values()):
                await asyncio.sleep(0.05)

    def stop(self) -> None:
        try:
            self.run(self._stop(), 60)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)

    async def _stop(self) -> None:
        if self.gateway is not None:
            await self.gateway.stop()
        if self._nc is not None:
            await self._nc.close()

    def wait_for(self, found: Callable[[], Msg | None], what: str,
                 timeout: float = PATIENCE) -> Msg:
        async def poll() -> Msg:
            async with asyncio.timeout(timeout):
                while (msg := found()) is None:
                    await asyncio.sleep(0.02)
                return msg
        try:
            result: Msg = self.run(poll(), timeout + 5)
        except TimeoutError:
            raise AssertionError(f"nothing arrived for {what} in {timeout:.0f}s; seen "
                                 f"{len(self.seen.events)} events, "
                                 f"{len(self.seen.dead)} dead letters") from None
        return result

    def outcome(self, subject: str, dead: Callable[[Msg], bool]) -> tuple[str, Msg]:
        """("event", msg) when the CloudEvent with this subject arrived, ("dead", msg)
        when a dead letter matching `dead` did: whichever comes first."""
        def either() -> Msg | None:
            return self.seen.event(subject) or self.seen.dead_letter(dead)
        msg = self.wait_for(either, subject)
        return ("event" if self.seen.event(subject) is msg else "dead"), msg


def ce_data(msg: Msg) -> Any:
    """The event's data (binary mode: the body), parsed when it is JSON."""
    try:
        return json.loads(msg.data)
    except ValueError:
        return msg.data


def reason(msg: Msg) -> str:
    return str((msg.headers or {}).get("xrgw-reason", ""))


@contextmanager
def interop_gateway(tmp: Path, nats_url: str, routes: list[dict[str, object]],
                    endpoints: dict[str, dict[str, object]]) -> Iterator[RunningGateway]:
    """The gateway with `routes` (binary mode) and endpoint overrides, the dead letter on
    NATS `interop.dead`, started and ready; stopped on the way out."""
    shutil.copy(DEFINITIONS, tmp / DEFINITIONS.name)
    config = {
        "definitions": [DEFINITIONS.name],
        "routes": [{"mode": "binary",
                    "retry": {"attempts": 3, "initial_backoff": "50ms",
                              "max_backoff": "200ms"}, **route} for route in routes],
        "deadletter": "interop-nats-dead",
        "admin": {"listen": "127.0.0.1:0"},
        "endpoints": {"interop-nats-out": {"uri": nats_url},
                      "interop-nats-dead": {"uri": nats_url}, **endpoints},
    }
    path = tmp / "gateway.yaml"
    path.write_text(json.dumps(config, indent=2))
    running = RunningGateway(path, nats_url)
    running.start()
    try:
        yield running
    finally:
        running.stop()
