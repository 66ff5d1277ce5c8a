"""Reconnecting a producer behind a backoff gate: adapter machinery, not contract.

The engine calls `write()` without connecting first; a producer whose connection dropped
reconnects inside `write()` through a `ReconnectGate`, which spaces the attempts and
makes writers fail fast while it backs off.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from gateway.ports import NotConnected

__all__ = ["ReconnectGate"]


class ReconnectGate:
    """Reconnects of a producer: one attempt at a time, spaced by a doubling backoff (from
    0.1 s up to `maximum`), and writers never wait out the backoff: while it runs they are
    told at once that the endpoint is down, so the engine retries or dead-letters instead
    of blocking on a dead broker."""

    def __init__(self, maximum: float) -> None:
        self._maximum = maximum
        self._backoff = 0.0
        self._next_attempt = 0.0
        self._lock = asyncio.Lock()

    async def connect(self, attempt: Callable[[], Awaitable[None]]) -> None:
        """Run `attempt` now (an explicit `connect()`); NotConnected propagates."""
        async with self._lock:
            await self._attempt(attempt)

    async def try_reconnect(
        self, connected: Callable[[], bool], attempt: Callable[[], Awaitable[None]]
    ) -> str | None:
        """None when connected (again), else why not, without waiting out the backoff."""
        async with self._lock:
            if connected():
                return None
            if time.monotonic() < self._next_attempt:
                return "not connected (reconnect backing off)"
            try:
                await self._attempt(attempt)
            except NotConnected as exc:
                return str(exc)
            return None

    async def _attempt(self, attempt: Callable[[], Awaitable[None]]) -> None:
        try:
            await attempt()
        except NotConnected:
            self._backoff = min(max(self._backoff * 2, 0.1), self._maximum)
            self._next_attempt = time.monotonic() + self._backoff
            raise
        self._backoff = 0.0
