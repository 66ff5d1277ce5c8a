"""The HTTP ingress's settlement hook, without a server: a request's `_Pending` hands the
first settlement of its delivery to the handler waiting to answer, and none once the
request was answered without it (504, shutdown, client gone). How each verdict becomes a
status code is checked against a real server in the integration and fuzz tests."""

from __future__ import annotations

import asyncio

from adapters.http.consumer import _Pending


def test_the_first_settlement_is_the_verdict() -> None:
    async def main() -> None:
        pending = _Pending(asyncio.get_running_loop().create_future())
        assert pending.waiting()
        await pending.settle(False, "poison", False)
        assert not pending.waiting()
        await pending.settle(True, "", False)  # no second word
        assert pending.verdict.result() == (False, "poison", False)
    asyncio.run(main())


def test_a_settlement_after_the_request_was_answered_changes_nothing() -> None:
    async def main() -> None:
        pending = _Pending(asyncio.get_running_loop().create_future())
        pending.abandoned = True  # answered 504 / the client went
        assert not pending.waiting()
        await pending.settle(True, "", False)
        assert not pending.verdict.done()
    asyncio.run(main())
