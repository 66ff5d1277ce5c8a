"""`ports.all_delivered`: whether a batch's outcomes all say delivered, answered by one
count of the shared delivered outcome (the settler's shortcut past its loops)."""

from __future__ import annotations

from gateway.ports import Outcome, all_delivered
from gateway.record import NativeMessage


def test_only_plain_deliveries_make_a_batch_all_delivered() -> None:
    ok = Outcome.ok()
    assert all_delivered([])
    assert all_delivered([ok, ok, ok])
    assert all_delivered([ok, Outcome(True)])  # equal by value: a delivery as well
    assert not all_delivered([ok, Outcome.failed("down")])
    assert not all_delivered([Outcome.oversize(10, 5)])
    # Answered (request-reply): delivered, but the answer must be read, not skipped.
    assert not all_delivered([ok, Outcome.answered(NativeMessage("NATS", {"subject": "s"}))])
