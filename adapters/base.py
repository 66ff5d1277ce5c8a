"""The adapter contract: what every protocol adapter offers the core, and nothing else.

    Consumer  connect() -> read() -> Delivery ... -> aclose()
    Producer  connect() -> write([NativeMessage, ...]) -> [Outcome, ...] -> aclose()

Exceptions (the vocabulary the engine acts on)::

    AdapterError
    ├── NotConnected     connect() failed or the connection dropped: reconnect with backoff
    ├── EndOfInput       the consumer has nothing more to give (closed): stop cleanly
    └── AlreadySettled   a Delivery was acked/nacked a second time: a bug in the caller

Per-message failures of a producer are values (`Outcome`), never exceptions, so one bad
message in a batch does not hide the result of the others.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from gateway.record import NativeMessage

__all__ = [
    "AdapterError",
    "AlreadySettled",
    "Consumer",
    "Delivery",
    "EndOfInput",
    "EndpointSettings",
    "NotConnected",
    "Outcome",
    "Producer",
    "ReconnectGate",
    "Settle",
    "TlsSettings",
]


class AdapterError(Exception):
    """Base of the adapter vocabulary."""


class NotConnected(AdapterError):
    """No usable connection; the caller should call `connect()` again after a backoff."""


class EndOfInput(AdapterError):
    """The consumer was closed or its input is exhausted; stop reading."""


class AlreadySettled(AdapterError):
    """A delivery was settled twice. Raised rather than ignored: a second settlement means
    the caller's bookkeeping is wrong (e.g. a fan-out tracker settling per part), and
    silently ignoring it would hide an ack that stands in for a failed send."""


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


@dataclass(frozen=True)
class Outcome:
    """The result of writing one message: delivered, or failed with a reason.

    `retryable` tells the engine whether sending the same message again may succeed
    (broker down, timeout) or not (rejected as malformed or unauthorized).
    """

    delivered: bool
    retryable: bool = False
    reason: str | None = None

    @classmethod
    def ok(cls) -> Outcome:
        return _DELIVERED

    @classmethod
    def failed(cls, reason: str, retryable: bool = True) -> Outcome:
        return cls(False, retryable, reason)


_DELIVERED = Outcome(True)


@dataclass(frozen=True)
class TlsSettings:
    """TLS files (PEM) and the test-only switch that skips server verification; what each
    protocol does with them is in `adapters/_tls.py`. Paths only: nothing secret."""

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    insecure: bool = False


@dataclass(frozen=True)
class EndpointSettings:
    """Where and how to connect; filled by the config layer.

    `options` holds the protocol-specific settings (topic filters, QoS, group, ...) that
    each adapter documents and reads itself; unknown keys are the config layer's problem.
    """

    uri: str
    username: str | None = None
    password: str | None = None  # or a token (NATS, HTTP bearer); never in repr or logs
    client_id: str | None = None
    options: Mapping[str, object] = field(default_factory=dict)
    tls: TlsSettings | None = None

    def __repr__(self) -> str:
        # Hand-written: the password, and a password inside the URI, must not print.
        password = None if self.password is None else "***"
        return (f"EndpointSettings(uri={_redact_uri(self.uri)!r}, username={self.username!r}, "
                f"password={password!r}, client_id={self.client_id!r}, "
                f"options={dict(self.options)!r}, tls={self.tls!r})")


def _redact_uri(uri: str) -> str:
    """`scheme://user:secret@host` -> `scheme://user:***@host` (every address of a list)."""
    return re.sub(r"(://[^:/@,\s]*):[^@/,\s]*@", r"\1:***@", uri)


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
    reports a delivery only once the broker has confirmed it."""

    @property
    def connected(self) -> bool: ...

    async def connect(self) -> None:
        """Connect (or reconnect); raises NotConnected on failure."""

    async def write(self, messages: Sequence[NativeMessage]) -> list[Outcome]: ...

    async def aclose(self) -> None: ...


class ReconnectGate:
    """Reconnects of a producer: one attempt at a time, spaced by a doubling backoff (from
    0.1 s up to `maximum`), and writers never wait out the backoff: while it runs they are
    told at once that the endpoint is down, so the engine retries or dead-letters instead
    of blocking on a dead broker."""

    def __init__(self, maximum: float) -> None:
        self._maximum = maximum
        self._backoff = 0.0
        self._next_attempt = 0.0
        self._lock = asyncio.Lock()

    async def connect(self, attempt: Callable[[], Awaitable[None]]) -> None:
        """Run `attempt` now (an explicit `connect()`); NotConnected propagates."""
        async with self._lock:
            await self._attempt(attempt)

    async def try_reconnect(
        self, connected: Callable[[], bool], attempt: Callable[[], Awaitable[None]]
    ) -> str | None:
        """None when connected (again), else why not, without waiting out the backoff."""
        async with self._lock:
            if connected():
                return None
            if time.monotonic() < self._next_attempt:
                return "not connected (reconnect backing off)"
            try:
                await self._attempt(attempt)
            except NotConnected as exc:
                return str(exc)
            return None

    async def _attempt(self, attempt: Callable[[], Awaitable[None]]) -> None:
        try:
            await attempt()
        except NotConnected:
            self._backoff = min(max(self._backoff * 2, 0.1), self._maximum)
            self._next_attempt = time.monotonic() + self._backoff
            raise
        self._backoff = 0.0
