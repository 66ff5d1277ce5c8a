"""The proton thread's side of the AMQP consumer's settlement, without a broker: the
dispositions `_ReceiverHandler.settle_burst` puts on each delivery and the credit it
gives back afterwards. Proton's deliveries and receiver are replaced by stand-ins that
record what is done to them. (The asyncio side, which gathers a burst, is in
test_amqp_bridge.py; that RabbitMQ requeues or drops accordingly, in the integration
tests.)"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, cast

import pytest
from proton import Delivery as ProtonDelivery
from proton import Link

from adapters.amqp.consumer import _ReceiverHandler, _Settler
from adapters.amqp.options import AmqpOptions
from gateway.ports import EndpointSettings


class _Delivery:
    def __init__(self) -> None:
        self.local = SimpleNamespace(failed=False, condition=None)
        self.states: list[int] = []
        self.settled = False

    def update(self, state: int) -> None:
        self.states.append(state)

    def settle(self) -> None:
        self.settled = True


class _Receiver:
    def __init__(self, state: int = Link.LOCAL_ACTIVE | Link.REMOTE_ACTIVE) -> None:
        self.state = state
        self.credit: list[int] = []

    def flow(self, credit: int) -> None:
        self.credit.append(credit)


class _Thread:
    def __init__(self) -> None:
        self.calls: list[Callable[[], None]] = []

    def call(self, fn: Callable[[], None]) -> None:
        self.calls.append(fn)


def _handler(tokens: int) -> tuple[_ReceiverHandler, list[_Delivery], _Receiver, _Thread]:
    handler = _ReceiverHandler(AmqpOptions.parse(EndpointSettings(
        "amqp://127.0.0.1:1", options={"node": "/queue/q"})), "/queue/q", "configuration")
    deliveries = [_Delivery() for _ in range(tokens)]
    handler._unsettled = {token: cast(Any, d) for token, d in enumerate(deliveries)}
    receiver, thread = _Receiver(), _Thread()
    handler._receiver = cast(Any, receiver)
    handler.thread = cast(Any, thread)
    return handler, deliveries, receiver, thread


def test_each_outcome_gets_its_disposition_and_is_settled() -> None:
    handler, (accepted, released, modified, rejected, bare), _, _ = _handler(5)
    handler.settle_burst([
        (0, ProtonDelivery.ACCEPTED, ""),
        (1, ProtonDelivery.RELEASED, "later"),
        (2, ProtonDelivery.MODIFIED, "later"),
        (3, ProtonDelivery.REJECTED, "poison"),
        (4, ProtonDelivery.REJECTED, ""),
    ])
    assert [d.states for d in (accepted, released, modified, rejected, bare)] == [
        [ProtonDelivery.ACCEPTED], [ProtonDelivery.RELEASED], [ProtonDelivery.MODIFIED],
        [ProtonDelivery.REJECTED], [ProtonDelivery.REJECTED]]
    assert all(d.settled for d in (accepted, released, modified, rejected, bare))
    # MODIFIED counts the attempt (delivery-count + 1); RELEASED does not.
    assert modified.local.failed and not released.local.failed and not accepted.local.failed
    # A rejection carries the reason; without one, no description.
    condition = rejected.local.condition
    assert condition is not None
    assert (condition.name, condition.description) == ("xrgw:rejected", "poison")
    assert bare.local.condition.description is None
    assert accepted.local.condition is None and modified.local.condition is None
    assert handler._unsettled == {}


def test_the_credit_of_a_burst_goes_back_once_on_a_later_turn() -> None:
    handler, _, receiver, thread = _handler(4)
    handler.settle_burst([(0, ProtonDelivery.ACCEPTED, ""), (1, ProtonDelivery.ACCEPTED, "")])
    handler.settle_burst([(2, ProtonDelivery.ACCEPTED, "")])
    assert receiver.credit == []  # not in the turn that wrote the dispositions
    assert len(thread.calls) == 1  # one call for both bursts
    thread.calls[0]()
    assert receiver.credit == [3]
    thread.calls[0]()  # nothing due any more: no empty flow
    assert receiver.credit == [3]
    handler.settle_burst([(3, ProtonDelivery.ACCEPTED, "")])
    assert len(thread.calls) == 2  # the next burst asks again
    thread.calls[1]()
    assert receiver.credit == [3, 1]


def test_tokens_not_held_any_more_are_skipped_and_return_no_credit() -> None:
    handler, (first, _), receiver, thread = _handler(2)
    handler.settle_burst([(7, ProtonDelivery.ACCEPTED, ""), (0, ProtonDelivery.ACCEPTED, ""),
                          (0, ProtonDelivery.REJECTED, "twice")])
    assert first.states == [ProtonDelivery.ACCEPTED]  # the second word on 0 is not sent
    assert handler._credit_due == 1
    handler.settle_burst([(9, ProtonDelivery.ACCEPTED, "")])
    assert len(thread.calls) == 1
    thread.calls[0]()
    assert receiver.credit == [1]


def test_nothing_is_sent_once_the_link_is_closing_or_not_active() -> None:
    handler, deliveries, receiver, thread = _handler(2)
    handler.closing = True
    handler.settle_burst([(0, ProtonDelivery.ACCEPTED, "")])
    assert deliveries[0].states == [] and not deliveries[0].settled and thread.calls == []

    handler, _, receiver, thread = _handler(2)
    handler.settle_burst([(0, ProtonDelivery.ACCEPTED, "")])
    receiver.state = Link.LOCAL_CLOSED | Link.REMOTE_ACTIVE
    thread.calls[0]()
    assert receiver.credit == []  # a closed link takes no credit

    handler, _, receiver, thread = _handler(2)
    handler.settle_burst([(0, ProtonDelivery.ACCEPTED, "")])
    handler.closing = True
    thread.calls[0]()
    assert receiver.credit == []

    handler, _, receiver, thread = _handler(2)
    handler.settle_burst([(0, ProtonDelivery.ACCEPTED, "")])
    handler._receiver = None  # the link is gone
    thread.calls[0]()  # does not fail
    assert handler._credit_due == 0


def _settler(nack_outcome: str) -> tuple[_Settler, _Thread, list[list[tuple[int, int, str]]]]:
    thread = _Thread()
    bursts: list[list[tuple[int, int, str]]] = []
    handler = SimpleNamespace(settle_burst=bursts.append)
    counted: list[None] = []
    settler = _Settler(cast(Any, thread), cast(Any, handler), cast(Any, nack_outcome),
                       lambda: counted.append(None))
    return settler, thread, bursts


@pytest.mark.parametrize(("nack_outcome", "state"), [
    ("modified", ProtonDelivery.MODIFIED), ("released", ProtonDelivery.RELEASED)])
def test_a_retry_is_the_configured_outcome_and_a_lone_settlement_is_handed_over(
        nack_outcome: str, state: int) -> None:
    async def main() -> None:
        settler, thread, bursts = _settler(nack_outcome)
        await settler.settle(4, False, "later", True)
        assert thread.calls == []
        await asyncio.sleep(0)
        assert len(thread.calls) == 1  # a burst of one goes too
        thread.calls[0]()
        assert bursts == [[(4, state, "later")]]
    asyncio.run(main())
