"""The two roles an adapter plays: a Consumer (messages in) and a Producer (messages out)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from gateway.ports._delivery import Delivery
from gateway.ports._outcome import Outcome
from gateway.record import NativeMessage


@runtime_checkable
class Consumer(Protocol):
    """Receives native messages. `read()` blocks until a delivery is available and,
    for back-pressure, while the adapter's limit of unsettled deliveries is reached."""

    @property
    def connected(self) -> bool: ...

    async def connect(self) -> None:
        """Connect (or reconnect); raises NotConnected on failure."""

    async def read(self) -> Delivery:
        """Next delivery; raises NotConnected (reconnect) or EndOfInput (stop)."""
        ...

    async def aclose(self) -> None: ...


@runtime_checkable
class Producer(Protocol):
    """Sends native messages; `write` returns one Outcome per message, in order, and
    reports a delivery only once the broker has confirmed it. One attempt per message:
    a failure is reported (with `retryable` and, when the receiver said so,
    `retry_after`), not retried."""

    @property
    def connected(self) -> bool: ...

    async def connect(self) -> None:
        """Connect (or reconnect); raises NotConnected on failure."""

    async def write(self, messages: Sequence[NativeMessage]) -> list[Outcome]: ...

    async def aclose(self) -> None: ...
