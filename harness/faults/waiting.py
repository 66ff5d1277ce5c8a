"""Polling until a condition holds, with a deadline that fails the scenario."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable


def patience(n: int, base: float = 60.0) -> float:
    """Seconds to wait for `n` messages (grows with `$XRGW_FAULT_N`)."""
    return base + n / 250


async def until(check: Callable[[], bool], timeout: float,
                what: Callable[[], str] = lambda: "condition",
                also: Callable[[], Awaitable[None]] | None = None) -> None:
    """Until `check()`; `also()` runs between polls (sampling); AssertionError with
    `what()` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s: {what()}")
        if also is not None:
            await also()
        await asyncio.sleep(0.02)


async def until_async(count: Callable[[], Awaitable[int]], target: int,
                      timeout: float) -> None:
    """Until `await count()` reaches `target`."""
    deadline = time.monotonic() + timeout
    while (got := await count()) < target:
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s: {got} of {target}")
        await asyncio.sleep(0.1)
