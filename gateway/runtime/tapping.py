"""The route's contact with `xrgw tap` (`gateway/tap`): after a batch settled (or, in an
observing route, was matched and acked), the open taps are offered what became of each
of its messages. With no tap open the settler checks one attribute per batch and does
nothing else; `TapHub.offer_batch` never waits (bounded queues that drop)."""

from __future__ import annotations

from collections.abc import Iterator

from gateway.record import NativeMessage
from gateway.redaction.redactor import Redactor
from gateway.runtime.ledger import Batch
from gateway.tap.hub import TapHub
from gateway.tap.item import Tapped


class TapPoint:
    """Where one route meets the gateway's taps."""

    __slots__ = ("hub", "observe", "redactor", "route")

    def __init__(self, hub: TapHub, route: str, redactor: Redactor, observe: bool) -> None:
        self.hub = hub
        self.route = route
        self.redactor = redactor
        self.observe = observe

    def offer(self, batch: Batch) -> None:
        """Call when `self.hub.attached`: the batch's messages, read only if a tap wants
        this route."""
        self.hub.offer_batch(self.route, tapped(batch), self.redactor, observe=self.observe,
                             count=lambda: tapped_count(batch))


def tapped_count(batch: Batch) -> int:
    """How many items `tapped(batch)` yields, without building them."""
    return sum(1 if message.whole is not None else len(message.members)
               for message in batch.messages)


def tapped(batch: Batch) -> Iterator[Tapped]:
    """The settled batch as `xrgw tap` sees it: per message (per event of an HTTP batch)
    the record in, its conversion, its dead-letter reason and the native records it was
    rendered to."""
    natives: dict[int, list[tuple[str, NativeMessage]]] = {}
    for sent in batch.sent:
        if sent.output.deliver == "native":
            for owner, record in zip(sent.owners, sent.records, strict=True):
                natives.setdefault(id(owner), []).append((sent.output.endpoint_id, record))
    for message in batch.messages:
        whole = message.whole
        if whole is not None:
            yield Tapped(whole.source, whole.conversion, whole.reason, whole.failures)
            continue
        several = len(message.members) > 1
        for member in message.members:
            yield Tapped(member.original() if several else member.source, member.conversion,
                         member.reason, member.failures, natives.get(id(member), ()))


__all__ = ["TapPoint", "tapped", "tapped_count"]
