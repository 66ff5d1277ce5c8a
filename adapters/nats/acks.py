"""The JetStream consumer's acknowledgements under AckPolicy.ALL: one `+ACK` per settled
burst instead of one per message. Adapter machinery with no I/O of its own:
`adapters/nats/` tracks each delivery here and sends what `settle` returns.

The server's rules this relies on (nats-server 2.10, pinned by
tests/integration/test_nats_ack_all.py):
- `+ACK` of a message acknowledges every pending message whose stream sequence is at or
  below its own;
- an ack whose *delivery* sequence is at or below the highest one acknowledged so far is
  ignored. A redelivered message has a new, higher delivery sequence, so acknowledging it
  while a message delivered before it is still pending would make the server ignore that
  message's later ack (it would come again after `ack_wait`: duplicates, not loss);
- `-NAK` acts on its own message.

So the deliveries not yet acknowledged are kept in stream-sequence order, and one ack per
settling burst goes to the last message of the *contiguous* settled prefix (an ack past an
unsettled message would acknowledge it too, and lose it if it is then retried). When that
message was redelivered and a message still pending has a lower delivery sequence, the ack
waits: the prefix reaches past that message later, and a later message's ack covers both.

`nack(retry=False)` settles like an ack (the later `+ACK` acknowledges it; no `+TERM`,
whose effect on the delivery floor is not documented). `nack(retry=True)` sends `-NAK`
for the message and keeps its place: its redelivery takes the place over.

With a queue group several gateways share the durable, and an ack of one would acknowledge
messages another still holds: such consumers keep AckPolicy.EXPLICIT (`adapters/nats/`).
"""

from __future__ import annotations

from collections import deque
from typing import Generic, TypeVar

__all__ = ["AckFrontier", "AckSlot"]

M = TypeVar("M")


class AckSlot(Generic[M]):
    """One delivered stream sequence not yet acknowledged on the server."""

    __slots__ = ("delivery", "done", "message", "out_of_order", "sequence")

    def __init__(self, sequence: int, delivery: int, message: M, out_of_order: bool) -> None:
        self.sequence = sequence  # stream sequence
        self.delivery = delivery  # consumer (delivery) sequence of the latest delivery
        self.message = message  # the latest delivery: its ack subject is the one to use
        self.done = False
        # A redelivery, or a message delivered after a higher stream sequence: the only
        # kind whose delivery sequence may exceed a later pending message's.
        self.out_of_order = out_of_order


class AckFrontier(Generic[M]):
    """Deliveries in stream-sequence order; which message to `+ACK` as they settle."""

    def __init__(self) -> None:
        self._slots: deque[AckSlot[M]] = deque()
        self._by_sequence: dict[int, AckSlot[M]] = {}
        self._ack: M | None = None  # the newest message to +ACK, not yet taken

    def __len__(self) -> int:
        return len(self._slots)

    def track(self, sequence: int, delivery: int, message: M) -> AckSlot[M]:
        """The slot of a delivery; a redelivery takes its sequence's slot over."""
        slot = self._by_sequence.get(sequence)
        if slot is not None:
            slot.delivery, slot.message = delivery, message
            slot.done, slot.out_of_order = False, True
            return slot
        slots = self._slots
        if not slots or slots[-1].sequence < sequence:
            slot = AckSlot(sequence, delivery, message, False)
            slots.append(slot)
        else:
            # Below the highest tracked sequence (a redelivery after the connection came
            # back): its place in order. Rare, so a scan from the end is fine.
            slot = AckSlot(sequence, delivery, message, True)
            place = len(slots)
            while place > 0 and slots[place - 1].sequence > sequence:
                place -= 1
            slots.insert(place, slot)
        self._by_sequence[sequence] = slot
        return slot

    def settle(self, slot: AckSlot[M]) -> bool:
        """Mark a slot settled (acked or given up). True when there is now a message to
        `+ACK` (`take`): settling does no I/O, so a burst of settlements is one ack."""
        if self._by_sequence.get(slot.sequence) is not slot:
            return False  # acknowledged already, or from an earlier connection
        slot.done = True
        slots = self._slots
        if not slots[0].done:
            return False
        last = slots.popleft()
        del self._by_sequence[last.sequence]
        while slots and slots[0].done:
            last = slots.popleft()
            del self._by_sequence[last.sequence]
        if last.out_of_order and any(s.delivery < last.delivery for s in slots):
            # The server would ignore the pending message's later ack; a later ack of
            # the prefix (which will reach past it) covers this one.
            return False
        self._ack = last.message
        return True

    def take(self) -> M | None:
        """The message whose `+ACK` acknowledges everything settled so far, once."""
        ack, self._ack = self._ack, None
        return ack

    def forget(self) -> None:
        """The connection went: nothing tracked can be acknowledged any more."""
        self._slots.clear()
        self._by_sequence.clear()
        self._ack = None
