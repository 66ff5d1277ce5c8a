"""The event loop `xrgw run` runs on: uvloop where it is installed, else asyncio's own.

Every message crosses the event loop several times (a socket read, the route's tasks, a
socket write, the acks), so the loop's own cost is part of each route's CPU per message.
uvloop (libuv under asyncio's interface) runs the same code with less of it; measured with
the passthrough harness (2026-11-28, one interleaved run, same binary, loop switched
by `XRGW_EVENT_LOOP`): see docs/operations.md, "Event loop".

- `eventloop: auto` (the default): uvloop when it can be imported (it is a dependency on
  every platform it supports), else asyncio. `uvloop` insists on it (start-up fails
  without it); `asyncio` never uses it -- the way back should a library misbehave on it.
- `XRGW_EVENT_LOOP` overrides the config's value, as `XRGW_LOG_LEVEL` does the level:
  an operator can switch loops without editing a mounted config.

Only the daemon chooses: tests, `validate`, `learn` and Spark run on asyncio's loop.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, Literal, TypeVar, get_args

EventLoopName = Literal["auto", "uvloop", "asyncio"]
EVENT_LOOPS: tuple[str, ...] = get_args(EventLoopName)
ENV = "XRGW_EVENT_LOOP"

T = TypeVar("T")
LoopFactory = Callable[[], asyncio.AbstractEventLoop]


class EventLoopError(RuntimeError):
    """The chosen loop cannot be had (an unknown name, or uvloop asked for and missing)."""


def chosen_name(configured: str, environ: Mapping[str, str] | None = None) -> str:
    """The loop asked for: `XRGW_EVENT_LOOP` when set (not empty), else the config's."""
    env = os.environ if environ is None else environ
    value = env.get(ENV, "").strip().lower() or configured
    if value not in EVENT_LOOPS:
        raise EventLoopError(f"{ENV}={value!r}: not one of {', '.join(EVENT_LOOPS)}")
    return value


def asyncio_loop() -> asyncio.AbstractEventLoop:
    """asyncio's own loop for this platform, whatever event loop policy is installed."""
    return asyncio.DefaultEventLoopPolicy().new_event_loop()


def loop_factory(name: str) -> tuple[str, LoopFactory]:
    """The loop `name` stands for: (what runs, what makes it)."""
    if name == "asyncio":
        return "asyncio", asyncio_loop
    try:
        import uvloop
    except ImportError as exc:
        if name == "uvloop":
            raise EventLoopError(f"eventloop uvloop: uvloop cannot be imported ({exc})") from exc
        return "asyncio", asyncio_loop
    return "uvloop", uvloop.new_event_loop


def run(main: Coroutine[Any, Any, T], factory: LoopFactory) -> T:
    """`asyncio.run(main)` on the loop `factory` makes."""
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)


__all__ = ["ENV", "EVENT_LOOPS", "EventLoopError", "EventLoopName", "chosen_name",
           "loop_factory", "run"]
