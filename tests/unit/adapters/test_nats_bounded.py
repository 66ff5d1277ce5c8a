"""`adapters.nats.bounded.within`: a bound that holds even when the work swallows a
cancellation, as nats-py's first-connect loop can on Python 3.11 (issue 33: a NATS
connect looped for 300 s under load)."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from adapters.nats.bounded import within

GUARD = 30.0  # far longer than any bound below: only a bound that does not hold reaches it


async def _swallows_one_cancellation(stopped: list[str]) -> None:
    """Loops until cancelled twice: the first cancellation is lost, as when 3.11's
    `wait_for` returns an inner result that finished in the same turn."""
    swallowed = False
    try:
        while True:
            try:
                await asyncio.sleep(0.01)
            except asyncio.CancelledError:
                if swallowed:
                    raise
                swallowed = True
    finally:
        stopped.append("stopped")


async def _ended(task: asyncio.Task[object]) -> bool:
    done, _ = await asyncio.wait({task}, timeout=GUARD)
    return task in done


def test_the_bound_holds_when_the_work_swallows_a_cancellation() -> None:
    async def scenario() -> tuple[bool, BaseException | None, list[str]]:
        stopped: list[str] = []
        task = asyncio.ensure_future(within(0.05, _swallows_one_cancellation(stopped)))
        ended = await _ended(task)
        if not ended:
            task.cancel()
        return ended, task.exception() if ended else None, stopped

    ended, error, stopped = asyncio.run(scenario())
    assert ended, "within() did not return: the swallowed cancellation lifted the bound"
    assert isinstance(error, TimeoutError)
    assert stopped == ["stopped"]  # the work has ended by the time within() raises


def test_asyncio_timeout_alone_does_not_hold_there() -> None:
    """Why `within` exists: the same work under `asyncio.timeout` runs on."""
    async def bounded_once() -> None:
        async with asyncio.timeout(0.05):
            await _swallows_one_cancellation([])

    async def scenario() -> bool:
        task = asyncio.ensure_future(bounded_once())
        done, _ = await asyncio.wait({task}, timeout=0.5)  # ten times the bound
        task.cancel()
        return task in done

    assert not asyncio.run(scenario())


def test_in_time_the_result_or_the_error_of_the_work_comes_back() -> None:
    async def answer() -> int:
        await asyncio.sleep(0)
        return 42

    async def refuse() -> int:
        raise ConnectionRefusedError("refused")

    assert asyncio.run(within(GUARD, answer())) == 42
    with pytest.raises(ConnectionRefusedError):
        asyncio.run(within(GUARD, refuse()))


def test_cancelling_the_caller_cancels_the_work() -> None:
    async def scenario() -> bool:
        started, stopped = asyncio.Event(), asyncio.Event()

        async def work() -> None:
            started.set()
            try:
                await asyncio.sleep(GUARD)
            finally:
                stopped.set()

        caller = asyncio.ensure_future(within(GUARD, work()))
        await started.wait()
        caller.cancel()
        with pytest.raises(asyncio.CancelledError):
            await caller
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stopped.wait(), GUARD)
        return stopped.is_set()

    assert asyncio.run(scenario())
