"""AckPolicy.ALL bookkeeping (adapters/nats/acks.py): which message's +ACK covers the
settled prefix, and when no ack may go yet. The server rules it relies on are pinned
against a real nats-server in tests/integration/test_nats_ack_all.py."""

from __future__ import annotations

import pytest

from adapters.nats.acks import AckFrontier, AckSlot


def _frontier(*deliveries: tuple[int, int]) -> tuple[AckFrontier[str], list[AckSlot[str]]]:
    acks: AckFrontier[str] = AckFrontier()
    slots = [acks.track(seq, dseq, f"m{seq}@{dseq}") for seq, dseq in deliveries]
    return acks, slots


def test_settling_in_order_acks_once_per_burst_with_the_last_message() -> None:
    acks, slots = _frontier((1, 1), (2, 2), (3, 3))
    assert [acks.settle(s) for s in slots] == [True, True, True]
    assert acks.take() == "m3@3"  # the burst's one +ACK covers 1..3
    assert acks.take() is None  # taken once
    assert len(acks) == 0


def test_an_ack_never_passes_an_unsettled_message() -> None:
    acks, (one, two, three) = _frontier((1, 1), (2, 2), (3, 3))
    assert acks.settle(three) is False  # 1 and 2 still open: nothing to ack
    assert acks.settle(one) is True
    assert acks.take() == "m1@1"  # up to 1 only: 2 is still open
    assert acks.settle(two) is True
    assert acks.take() == "m3@3"  # 2 closes the gap: 3 covers both
    assert len(acks) == 0


def test_a_retried_message_holds_the_prefix_until_its_redelivery_settles() -> None:
    acks, (one, two, three) = _frontier((1, 1), (2, 2), (3, 3))
    assert acks.settle(one) is True
    assert acks.take() == "m1@1"
    # 2 was nacked for a retry (not settled); 3 is acked and must wait behind it.
    assert acks.settle(three) is False
    again = acks.track(2, 4, "m2@4")  # the redelivery takes 2's place
    assert again is two and again.message == "m2@4" and not again.done
    assert acks.settle(again) is True
    # The last of the prefix is 3 (delivery 3): its ack also covers 2 (delivery 4).
    assert acks.take() == "m3@3"


def test_a_redelivered_last_message_waits_for_an_earlier_delivery() -> None:
    """The server ignores an ack whose delivery sequence is at or below the highest one
    acked: acking 2 (delivered 4th) before 3 (delivered 3rd) would strand 3's ack."""
    acks, (one, _two, three) = _frontier((1, 1), (2, 2), (3, 3))
    acks.settle(one)
    acks.take()
    redelivered = acks.track(2, 4, "m2@4")
    assert acks.settle(redelivered) is False  # 3 (delivery 3) still open: wait
    assert acks.take() is None
    assert acks.settle(three) is True
    assert acks.take() == "m3@3"  # covers 2 as well
    assert len(acks) == 0


def test_a_delivery_below_the_tracked_ones_is_put_in_sequence_order() -> None:
    acks, (five,) = _frontier((5, 1))
    three = acks.track(3, 2, "m3@2")  # a redelivery after reconnecting, say
    assert acks.settle(five) is False  # 3 comes first
    assert acks.settle(three) is True
    # 5 ends the prefix and was delivered first: its ack (stream sequences up to 5)
    # covers 3 too, and no open message was delivered before it.
    assert acks.take() == "m5@1"
    assert len(acks) == 0


def test_an_out_of_order_last_message_is_acked_once_nothing_delivered_before_it_is_open(
) -> None:
    acks, (one,) = _frontier((1, 1))
    acks.track(2, 2, "m2@2")
    acks.settle(acks.track(2, 3, "m2@3"))  # redelivered (an ack_wait expiry) and acked
    assert acks.take() is None  # 1 is still open
    assert acks.settle(one) is True
    assert acks.take() == "m2@3"  # nothing open is left: the redelivery's ack is safe


def test_a_slot_settles_once_and_not_after_forget() -> None:
    acks, (one, two) = _frontier((1, 1), (2, 2))
    assert acks.settle(one) is True
    assert acks.settle(one) is False  # twice: nothing more
    acks.forget()
    assert acks.settle(two) is False  # the connection went: the server redelivers it
    assert acks.take() is None and len(acks) == 0


def test_a_slot_settled_again_after_its_ack_changes_nothing() -> None:
    acks, (one, two) = _frontier((1, 1), (2, 2))
    assert acks.settle(two) is False
    assert acks.settle(one) is True  # pops 1 and 2: nothing is tracked any more
    assert acks.take() == "m2@2"
    assert acks.settle(one) is False and acks.settle(two) is False
    assert acks.take() is None


def test_an_inserted_delivery_is_never_acked_past_one_delivered_before_it() -> None:
    acks, (five,) = _frontier((5, 1))
    three = acks.track(3, 2, "m3@2")  # below 5, delivered after it
    assert acks.settle(three) is False  # acking it (delivery 2) would strand 5's ack
    assert acks.take() is None
    assert acks.settle(five) is True
    assert acks.take() == "m5@1"


@pytest.mark.parametrize(("tracked", "late", "ack", "left"), [
    ([5, 6], 3, None, 3),  # below all of them: first in order, so nothing to ack yet
    ([5, 6, 7], 4, None, 4),
    ([2, 4, 6], 5, "m4", 2),  # between 4 and 6: the prefix stops at 4; 5 and 6 are left
])
def test_a_late_delivery_takes_its_place_in_sequence_order(
        tracked: list[int], late: int, ack: str | None, left: int) -> None:
    """Every tracked one settled, the late one not: the ack stops just before it."""
    acks: AckFrontier[str] = AckFrontier()
    slots = [acks.track(seq, n, f"m{seq}") for n, seq in enumerate(tracked, 1)]
    acks.track(late, len(tracked) + 1, f"m{late}")
    for slot in slots:
        acks.settle(slot)
    assert acks.take() == ack
    assert len(acks) == left
