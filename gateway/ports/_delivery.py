"""A received message and its settlement: what a consumer hands the engine."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from gateway.ports._errors import AlreadySettled
from gateway.record import NativeMessage

#: The adapter's settlement hook: (ack, reason, retry). ack=True ignores reason/retry.
Settle = Callable[[bool, str, bool], Awaitable[None]]


class Delivery:
    """One received message together with its settlement, settled exactly once.

    `ack()` means processed (or dead-lettered): the source may forget it. `nack(reason,
    retry=True)` asks for redelivery; `retry=False` means "never again" (the adapter drops
    it at the source). `settled` turns true at the first call, before the adapter's I/O,
    so concurrent double settlement is caught too.
    """

    __slots__ = ("_settle", "message", "settled")

    def __init__(self, message: NativeMessage, settle: Settle) -> None:
        self.message = message
        self.settled = False
        self._settle = settle

    async def ack(self) -> None:
        self._mark()
        await self._settle(True, "", False)

    async def nack(self, reason: str, retry: bool = True) -> None:
        self._mark()
        await self._settle(False, reason, retry)

    def _mark(self) -> None:
        if self.settled:
            raise AlreadySettled("delivery already settled")
        self.settled = True

    def __repr__(self) -> str:
        state = "settled" if self.settled else "unsettled"
        return f"<Delivery {state} {self.message.to_line()[:120]}>"
