"""The adapter kit's `Inbox` (gateway/ports/inbox.py): the read_batch wait of the
push-based consumers, without a broker."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from gateway.ports import EndOfInput, NotConnected
from gateway.ports.inbox import Inbox


def _take(inbox: Inbox[int]) -> Callable[[int], list[int]]:
    def take(count: int) -> list[int]:
        return [inbox.buffer.popleft() for _ in range(count)]
    return take


def test_a_batch_takes_what_is_buffered_up_to_the_limit_in_order() -> None:
    async def main() -> None:
        inbox: Inbox[int] = Inbox(max_in_flight=10)
        inbox.extend(range(5))
        assert await inbox.read_batch(3, _take(inbox), lambda: True) == [0, 1, 2]
        assert await inbox.read_batch(3, _take(inbox), lambda: True) == [3, 4]
        assert inbox.unsettled == 5
    asyncio.run(main())


def test_the_window_bounds_a_batch_and_a_settlement_reopens_it() -> None:
    async def main() -> None:
        inbox: Inbox[int] = Inbox(max_in_flight=2)
        inbox.extend(range(4))
        assert await inbox.read_batch(10, _take(inbox), lambda: True) == [0, 1]
        waiting = asyncio.ensure_future(inbox.read_batch(10, _take(inbox), lambda: True))
        await asyncio.sleep(0)
        assert not waiting.done()  # the window is full: it waits, buffered or not
        inbox.settled()
        assert await waiting == [2]
        assert inbox.unsettled == 2
    asyncio.run(main())


def test_a_waiting_read_wakes_on_arrival() -> None:
    async def main() -> None:
        inbox: Inbox[int] = Inbox(max_in_flight=4)
        waiting = asyncio.ensure_future(inbox.read_batch(10, _take(inbox), lambda: True))
        await asyncio.sleep(0)
        assert not waiting.done()
        inbox.put(7)
        assert await waiting == [7]
    asyncio.run(main())


def test_closed_is_end_of_input_even_with_messages_buffered() -> None:
    async def main() -> None:
        inbox: Inbox[int] = Inbox(max_in_flight=4)
        waiting = asyncio.ensure_future(inbox.read_batch(10, _take(inbox), lambda: True))
        await asyncio.sleep(0)
        inbox.close()
        with pytest.raises(EndOfInput):
            await waiting
        inbox.put(1)
        with pytest.raises(EndOfInput):
            await inbox.read_batch(10, _take(inbox), lambda: True)
    asyncio.run(main())


def test_nothing_to_hand_out_and_no_connection_is_not_connected() -> None:
    async def main() -> None:
        connected = True
        inbox: Inbox[int] = Inbox(max_in_flight=4)
        inbox.put(1)
        # Buffered messages are handed out even while the connection is down.
        assert await inbox.read_batch(10, _take(inbox), lambda: connected) == [1]
        waiting = asyncio.ensure_future(
            inbox.read_batch(10, _take(inbox), lambda: connected, "not listening"))
        await asyncio.sleep(0)
        connected = False
        inbox.wake()
        with pytest.raises(NotConnected, match="not listening"):
            await waiting
    asyncio.run(main())


def test_items_the_take_drops_do_not_end_the_wait() -> None:
    """The HTTP ingress drops requests answered before they were read: a batch of only
    such items is no batch, and the read waits for the next arrival."""
    async def main() -> None:
        inbox: Inbox[int] = Inbox()  # no window: nothing is counted

        def take(count: int) -> list[int]:
            batch: list[int] = []
            while inbox.buffer and len(batch) < count:
                item = inbox.buffer.popleft()
                if item >= 0:
                    batch.append(item)
            return batch

        inbox.extend([-1, -2])
        waiting = asyncio.ensure_future(inbox.read_batch(10, take, lambda: True))
        await asyncio.sleep(0)
        assert not waiting.done() and not inbox.buffer
        inbox.extend([-3, 4, 5])
        assert await waiting == [4, 5]
        assert inbox.unsettled == 0
    asyncio.run(main())


def test_full_says_when_the_buffer_holds_a_window() -> None:
    inbox: Inbox[int] = Inbox(max_in_flight=2)
    fullness = []
    for item in (1, 2):
        inbox.put(item)
        fullness.append(inbox.full)
    assert fullness == [False, True]
    assert not Inbox[int]().full  # no window: never full


def test_each_settlement_frees_one_place_of_the_window() -> None:
    async def main() -> None:
        inbox: Inbox[int] = Inbox(max_in_flight=3)
        inbox.extend(range(5))
        assert await inbox.read_batch(10, _take(inbox), lambda: True) == [0, 1, 2]
        inbox.settled()
        assert inbox.unsettled == 2
        inbox.settled()
        assert inbox.unsettled == 1
        assert await inbox.read_batch(10, _take(inbox), lambda: True) == [3, 4]
    asyncio.run(main())


def test_the_errors_say_what_happened_by_default() -> None:
    """Their text reaches the route's log line and `/readyz`: never empty."""
    async def main() -> None:
        inbox: Inbox[int] = Inbox(max_in_flight=2)
        with pytest.raises(NotConnected) as gone:
            await inbox.read_batch(10, _take(inbox), lambda: False)
        assert str(gone.value) == "not connected"
        inbox.close()
        with pytest.raises(EndOfInput) as closed:
            await inbox.read_batch(10, _take(inbox), lambda: True)
        assert str(closed.value) == "consumer closed"
    asyncio.run(main())
