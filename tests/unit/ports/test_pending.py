"""The adapter kit's `PendingBatch` (gateway/ports/pending.py): a submitted batch's
outcomes by index, countdown and deadline, without a broker."""

from __future__ import annotations

import asyncio

from gateway.ports import Outcome
from gateway.ports.pending import PendingBatch

MISSING = Outcome.failed("no confirmation in time")


def test_the_future_resolves_when_the_last_outcome_arrives_in_index_order() -> None:
    async def main() -> None:
        batch = PendingBatch(3, MISSING)
        assert not batch.resolve(2, Outcome.ok())
        assert not batch.resolve(0, Outcome.failed("nope"))
        assert not batch.future.done()
        assert batch.resolve(1, Outcome.ok())
        assert batch.complete
        outcomes = await batch.future
        assert [o.delivered for o in outcomes] == [False, True, True]
        assert outcomes[0].reason == "nope"
    asyncio.run(main())


def test_the_first_outcome_of_an_index_counts() -> None:
    async def main() -> None:
        batch = PendingBatch(2, MISSING)
        batch.resolve(0, Outcome.ok())
        batch.resolve(0, Outcome.failed("late duplicate"))
        assert not batch.complete  # a second word on index 0 is not index 1's
        batch.resolve(1, Outcome.ok())
        assert all(o.delivered for o in await batch.future)
    asyncio.run(main())


def test_the_deadline_confirms_with_the_missing_outcome_standing_in() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        batch = PendingBatch(2, MISSING, loop.time() + 0.01)
        batch.resolve(0, Outcome.ok())
        outcomes = await batch.future  # resolves by the timer: nothing else comes
        assert outcomes[0].delivered and outcomes[1] is MISSING
        assert not batch.complete
        # A late confirmation still fills in the batch; what was confirmed stays.
        assert batch.resolve(1, Outcome.ok())
        assert outcomes[1] is MISSING
    asyncio.run(main())


def test_giving_up_names_the_cause() -> None:
    async def main() -> None:
        batch = PendingBatch(2, MISSING)
        batch.resolve(1, Outcome.ok())
        lost = Outcome.failed("connection lost")
        batch.give_up(lost)
        assert await batch.future == [lost, batch.outcomes[1]]
        batch.give_up()  # once confirmed, nothing changes
        assert batch.future.result()[0] is lost
    asyncio.run(main())


def test_an_empty_batch_is_confirmed_at_once() -> None:
    async def main() -> None:
        batch = PendingBatch(0, MISSING, asyncio.get_running_loop().time() + 60)
        assert batch.future.done() and batch.future.result() == []
    asyncio.run(main())


def test_a_cancelled_waiter_does_not_break_later_confirmations() -> None:
    async def main() -> None:
        batch = PendingBatch(1, MISSING)
        waiter = asyncio.ensure_future(batch.future)
        await asyncio.sleep(0)
        batch.future.cancel()
        await asyncio.sleep(0)
        assert waiter.cancelled()
        assert batch.resolve(0, Outcome.ok())  # no InvalidStateError
        assert batch.results()[0].delivered
    asyncio.run(main())


def test_a_one_message_batch_is_given_up_at_its_deadline() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        batch = PendingBatch(1, MISSING, loop.time() + 0.01)
        assert await batch.future == [MISSING]  # resolves by the timer alone
    asyncio.run(main())


def test_results_stand_in_the_batch_s_own_missing_outcome_unless_told_otherwise() -> None:
    async def main() -> None:
        batch = PendingBatch(2, MISSING)
        batch.resolve(1, Outcome.ok())
        assert batch.results() == [MISSING, batch.outcomes[1]]
        lost = Outcome.failed("connection lost")
        assert batch.results(lost) == [lost, batch.outcomes[1]]
    asyncio.run(main())
