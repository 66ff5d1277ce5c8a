"""A received message and its settlement: what a consumer hands the engine."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from gateway.ports._errors import AlreadySettled
from gateway.record import NativeMessage

#: The adapter's settlement hook: (ack, reason, retry). ack=True ignores reason/retry.
Settle = Callable[[bool, str, bool], Awaitable[None]]
#: The adapter's reply hook (request-reply): answer the sender with a record in the
#: source's protocol, or (None, why) when no answer came (HTTP: 504 with a problem body).
Answer = Callable[["NativeMessage | None", str], Awaitable[None]]
#: The adapter's "does the sender still wait?" hook: False once the sender was answered
#: without the settlement (an HTTP request answered 504 after `settle_timeout`).
Waiting = Callable[[], bool]


class Delivery:
    """One received message together with its settlement, settled exactly once.

    `ack()` means processed (or dead-lettered): the source may forget it. `nack(reason,
    retry=True)` asks for redelivery; `retry=False` means "never again" (the adapter drops
    it at the source). `settled` turns true at the first call, before the adapter's I/O,
    so concurrent double settlement is caught too.
    """

    __slots__ = ("_settle", "_waiting", "answer", "message", "settled", "undecodable")

    def __init__(self, message: NativeMessage, settle: Settle,
                 answer: Answer | None = None, waiting: Waiting | None = None,
                 undecodable: str | None = None) -> None:
        self.message = message
        self.settled = False
        self._settle = settle
        # Set when the sender waits for an answer the route can give (HTTP request, NATS
        # reply subject, MQTT 5 response topic); only `reply: true` routes use it.
        self.answer = answer
        self._waiting = waiting
        # Set when the adapter could not decode what the broker holds (why, one line):
        # `message` then carries what could be had (the raw bytes, where it was) and the
        # route dead-letters it as `undecodable` instead of converting it.
        self.undecodable = undecodable

    @property
    def abandoned(self) -> bool:
        """The sender no longer waits for this message's settlement: it was answered
        without it (HTTP 504 after `settle_timeout`) and will send it again if it wants
        it delivered. The route stops retrying such a message: a late copy would only be
        a duplicate of the sender's retry. Always False for a broker's message (it is
        redelivered, not resent)."""
        return self._waiting is not None and not self._waiting()

    async def ack(self) -> None:
        self.mark_settled()
        await self._settle(True, "", False)

    async def nack(self, reason: str, retry: bool = True) -> None:
        self.mark_settled()
        await self._settle(False, reason, retry)

    @property
    def settle_hook(self) -> Settle:
        """The adapter's hook (for `ack_all`, which acks runs of hooks in bulk)."""
        return self._settle

    def mark_settled(self) -> None:
        """Settled from now on (raises `AlreadySettled` if it was): `ack` and `nack` do
        it first; `ack_all` does it for the hooks it acks in bulk."""
        if self.settled:
            raise AlreadySettled("delivery already settled")
        self.settled = True

    def __repr__(self) -> str:
        state = "settled" if self.settled else "unsettled"
        return f"<Delivery {state} {self.message.to_line()[:120]}>"
