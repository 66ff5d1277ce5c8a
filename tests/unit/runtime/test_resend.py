"""gateway.runtime.resend: after a retryable failure, new batches wait until the failed
ones were sent again, in the order the route's settler resends them."""

from __future__ import annotations

import gc

from gateway.ports import Outcome
from gateway.protocols import NATS
from gateway.record import NativeMessage
from gateway.runtime.resend import HELD, ResendFirst


def _batch(*seqs: int) -> list[NativeMessage]:
    return [NativeMessage(NATS, {"subject": "s"}, {"seq": n}) for n in seqs]


def test_nothing_owed_everything_goes() -> None:
    order = ResendFirst()
    first = _batch(1, 2)
    assert order.admit(first)
    order.settled(first, [Outcome.ok(), Outcome.ok()])
    assert order.admit(_batch(3)) and order.owed == 0


def test_new_batches_wait_for_the_resend_of_a_failed_one() -> None:
    order = ResendFirst()
    b1, b2, b3, b5 = _batch(1, 2), _batch(3), _batch(4), _batch(5)  # the route holds them
    assert order.admit(b1) and order.admit(b2)
    order.settled(b1, [Outcome.ok(), Outcome.failed("link broke")])  # 2 is owed
    assert not order.admit(b3)  # new: held back, and owed itself
    assert order.owed == 2
    assert order.admit([b1[1]])  # the settler resends 2 ...
    assert not order.admit(b5)  # ... 4 is still owed: 5 waits too
    assert order.admit(b3)  # then 4
    assert not order.admit(_batch(6))  # 5 was held: owed until resent
    assert order.admit(b5) and order.admit(_batch(7))


def test_only_retryable_failures_are_owed() -> None:
    order = ResendFirst()
    batch = _batch(1)
    assert order.admit(batch)
    order.settled(batch, [Outcome.failed("too large", retryable=False)])
    assert order.admit(_batch(2))


def test_a_record_the_route_gave_up_on_is_forgotten() -> None:
    order = ResendFirst()
    batch = _batch(1)
    assert order.admit(batch)
    order.settled(batch, [Outcome.failed("link broke")])
    assert order.owed == 1
    del batch  # dead-lettered and released by the route
    gc.collect()
    assert order.admit(_batch(2))


def test_a_hold_without_resends_ends_after_its_patience(caplog) -> None:
    order = ResendFirst(patience=0.0)
    kept = _batch(1)  # still referenced, never resent
    assert order.admit(kept)
    order.settled(kept, [Outcome.failed("link broke")])
    assert order.admit(_batch(2))  # the valve: not held for ever
    assert "no longer holding" in caplog.text


def test_held_is_a_retryable_failure() -> None:
    assert not HELD.delivered and HELD.retryable


def test_patience_counts_from_the_first_failure_not_from_an_older_resend(monkeypatch) -> None:
    """A hold lasts `patience` from when something became owed: a quiet hour before the
    failure does not end the hold at once."""
    now = [0.0]
    monkeypatch.setattr("gateway.runtime.resend.time.monotonic", lambda: now[0])
    order = ResendFirst(patience=10.0)
    now[0] = 3600.0  # an hour without any failure
    failed = _batch(1)
    assert order.admit(failed)
    order.settled(failed, [Outcome.failed("link broke")])
    now[0] = 3601.0
    assert not order.admit(_batch(2))  # held: the failure is a second old
    now[0] = 3612.0
    assert order.admit(_batch(3))  # patience over: no longer held
