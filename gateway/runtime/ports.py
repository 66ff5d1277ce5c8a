"""What the runtime needs from adapters, stated structurally.

The core never imports an adapter. These protocols describe the shape of
`adapters.base.Consumer`/`Producer`/`Delivery`/`Outcome`; any object with that shape
plugs in (the five protocol adapters, the in-memory adapter of the tests).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from gateway.record import NativeMessage


class DeliveryLike(Protocol):
    message: NativeMessage

    async def ack(self) -> None: ...

    async def nack(self, reason: str, retry: bool = True) -> None: ...


class OutcomeLike(Protocol):
    @property
    def delivered(self) -> bool: ...

    @property
    def retryable(self) -> bool: ...

    @property
    def reason(self) -> str | None: ...


class ConsumerLike(Protocol):
    @property
    def connected(self) -> bool: ...

    async def connect(self) -> None: ...

    async def read(self) -> DeliveryLike: ...

    async def aclose(self) -> None: ...


class ProducerLike(Protocol):
    @property
    def connected(self) -> bool: ...

    async def connect(self) -> None: ...

    async def write(self, messages: Sequence[NativeMessage]) -> Sequence[OutcomeLike]: ...

    async def aclose(self) -> None: ...


def is_not_connected(exc: BaseException) -> bool:
    """The adapters' `NotConnected`, recognised by name (the core cannot import it)."""
    return any(cls.__name__ == "NotConnected" for cls in type(exc).__mro__)


def is_end_of_input(exc: BaseException) -> bool:
    return any(cls.__name__ == "EndOfInput" for cls in type(exc).__mro__)
