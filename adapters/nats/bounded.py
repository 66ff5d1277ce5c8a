"""Bounding a third-party coroutine that may swallow a cancellation: adapter machinery.

`asyncio.timeout()` cancels the task once. On Python 3.11, `asyncio.wait_for()` returns
the inner result instead of raising when that cancellation meets an inner future that has
just finished (fixed in 3.12), and a client library's retry loop built on it (nats-py
retries a first connect forever when reconnecting is unlimited) then runs on as if nothing
happened: the bound is gone. Under load the two events meet often enough to hang a
connect for good (issue 33: a NATS connect with a wrong token looped for 300 s under two
CPU hogs). `within()` cancels again until the work has really stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["within"]

T = TypeVar("T")
#: How long one cancellation is given to end the work before the next is sent.
_CANCEL_AGAIN = 0.1


async def within(seconds: float, work: Coroutine[Any, Any, T]) -> T:
    """`work`'s result, or TimeoutError after `seconds`, once `work` has ended."""
    task = asyncio.ensure_future(work)
    try:
        done, _ = await asyncio.wait({task}, timeout=seconds)
    except BaseException:
        task.cancel()  # our caller was cancelled: so is the work
        raise
    if task in done:
        return task.result()
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=_CANCEL_AGAIN)
    with contextlib.suppress(BaseException):
        task.result()  # retrieved: what it ended with no longer matters
    raise TimeoutError(f"not done within {seconds:g} s")
