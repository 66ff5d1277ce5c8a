"""`ports.ack_all`: a settled batch acked in bulk where the hooks name a `BulkAcker`,
with the same outcome as acking each delivery in order (`gateway/ports/_bulk.py`)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.ports import AlreadySettled, Delivery, ack_all
from gateway.record import NativeMessage

_RECORD = NativeMessage("TEST", {}, None)


class _Acker:
    """Acks runs of hooks; writes what it acked, in order, into a shared log."""

    def __init__(self, name: str, said: list[tuple[str, int]], fail: bool = False) -> None:
        self.name = name
        self.said = said
        self.runs: list[int] = []
        self.fail = fail

    def ack_bulk(self, hooks: Sequence[_Hook]) -> None:
        self.runs.append(len(hooks))
        if self.fail:
            raise RuntimeError("acker broke")
        self.said.extend((self.name, hook.number) for hook in hooks)


class _Hook:
    def __init__(self, number: int, said: list[tuple[str, int]],
                 bulk: _Acker | None) -> None:
        self.number = number
        self.said = said
        if bulk is not None:
            self.bulk = bulk

    async def __call__(self, ack: bool, reason: str, retry: bool) -> None:
        self.said.append(("one", self.number))


# Per delivery: which acker its hook names (None: none), and whether it was settled before.
_PLANS = st.lists(st.tuples(st.sampled_from(["a", "b", None]), st.booleans()), max_size=12)


@given(_PLANS)
def test_every_delivery_is_acked_once_in_order_and_runs_go_in_bulk(
        plan: list[tuple[str | None, bool]]) -> None:
    said: list[tuple[str, int]] = []
    ackers = {"a": _Acker("a", said), "b": _Acker("b", said)}
    deliveries = []
    for number, (owner, settled_before) in enumerate(plan):
        delivery = Delivery(_RECORD, _Hook(number, said,
                                           None if owner is None else ackers[owner]))
        if settled_before:
            delivery.mark_settled()
        deliveries.append(delivery)
    first_settled = next((n for n, (_, before) in enumerate(plan) if before), None)
    if first_settled is None:
        asyncio.run(ack_all(deliveries))
        reached = plan
    else:
        with pytest.raises(AlreadySettled):
            asyncio.run(ack_all(deliveries))
        reached = plan[:first_settled]
    # Each delivery before the first one settled already, in order, by its own acker.
    assert said == [(owner or "one", n) for n, (owner, _) in enumerate(reached)]
    assert all(d.settled for d in deliveries[:len(reached)])
    # One call per run of consecutive hooks of one acker.
    runs: list[tuple[str, int]] = []
    for owner, _ in reached:
        if owner is not None and runs and runs[-1][0] == owner:
            runs[-1] = (owner, runs[-1][1] + 1)
        else:
            runs.append((owner or "", 1))
    for name, acker in ackers.items():
        assert acker.runs == [count for owner, count in runs if owner == name]


def test_a_run_whose_acker_fails_is_not_acked_again() -> None:
    said: list[tuple[str, int]] = []
    broken = _Acker("a", said, fail=True)
    deliveries = [Delivery(_RECORD, _Hook(n, said, broken)) for n in range(3)]
    deliveries.append(Delivery(_RECORD, _Hook(3, said, _Acker("b", said))))
    with pytest.raises(RuntimeError, match="acker broke"):
        asyncio.run(ack_all(deliveries))
    assert broken.runs == [3]  # once, not again on the way out
