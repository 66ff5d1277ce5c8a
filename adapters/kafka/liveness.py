"""Whether a Kafka consumer's brokers answer its fetches: the consumer's liveness signal.

aiokafka reconnects on its own and raises nothing from `getmany()` when a broker stops
answering: a link that holds every byte (a partition, a hung broker) looks exactly like
an idle topic, and the consumer would stay "connected" for ever.

The signal is the fetch long-poll. aiokafka keeps one Fetch request in flight per broker
whenever one of its partitions there wants records (assigned, not paused, nothing
prefetched left to hand out), and the broker answers it within `fetch_max_wait_ms` (0.5
s) even when there is nothing to read. So a Fetch that stays unanswered, or fails and is
retried without an answer, for many times that long means the broker (or the way to it)
is gone; an idle topic is answered twice a second, and a consumer holding back (its
window full, partitions paused, records prefetched) sends no fetch and so waits for none.

- `FetchWatch` is the pure part: per broker, since when a fetch has been waiting for an
  answer (`sent` / `answered` / `failed` / `cancelled`), and which is overdue.
- `WatchedFetcher` is aiokafka's Fetcher whose client reports its Fetch requests to a
  `FetchWatch` (`fetcher.watch`); `install()` makes aiokafka's consumer create it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiokafka.consumer import consumer as _consumer_module  # type: ignore[import-untyped]
from aiokafka.consumer import fetcher as _fetcher_module

__all__ = ["FetchWatch", "Overdue", "WatchedFetcher", "install"]

#: Kafka's API key of a Fetch request.
_FETCH_API_KEY = 1


@dataclass(frozen=True)
class Overdue:
    """A broker whose fetches have had no answer for `seconds`; `error` is the last
    failure aiokafka reported meanwhile (None: the request is simply unanswered)."""

    node: object
    seconds: float
    error: str | None


class FetchWatch:
    """Per broker: since when a fetch waits for an answer. A failure keeps the wait
    (aiokafka retries; the wait goes on until something is answered). A cancelled fetch
    (a rebalance, the consumer closing) ends the wait unless it was already overdue: a
    link that is gone stays reported until a fetch is answered."""

    __slots__ = ("_clock", "_errors", "_waiting", "overdue_after")

    def __init__(self, overdue_after: float = 10.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        #: Seconds without an answer after which a broker is overdue.
        self.overdue_after = overdue_after
        self._clock = clock
        self._waiting: dict[object, float] = {}  # node: since when
        self._errors: dict[object, str] = {}  # node: the last failure while waiting

    def sent(self, node: object) -> None:
        self._waiting.setdefault(node, self._clock())

    def answered(self, node: object) -> None:
        self._waiting.pop(node, None)
        self._errors.pop(node, None)

    def failed(self, node: object, error: BaseException) -> None:
        self._errors[node] = f"{type(error).__name__}: {error}"

    def cancelled(self, node: object) -> None:
        since = self._waiting.get(node)
        if since is not None and self._clock() - since < self.overdue_after:
            self.answered(node)

    def overdue(self) -> Overdue | None:
        """The broker waited on longest, if it is overdue."""
        if not self._waiting:
            return None
        node, since = min(self._waiting.items(), key=lambda item: item[1])
        seconds = self._clock() - since
        if seconds < self.overdue_after:
            return None
        return Overdue(node, seconds, self._errors.get(node))


class _WatchedClient:
    """aiokafka's client as the fetcher sees it: Fetch requests are reported to the
    watch, everything else passes through."""

    def __init__(self, client: Any, watch: FetchWatch) -> None:
        self._client = client
        self._watch = watch

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    async def send(self, node_id: Any, request: Any, **kwargs: Any) -> Any:
        if getattr(request, "API_KEY", None) != _FETCH_API_KEY:
            return await self._client.send(node_id, request, **kwargs)
        watch = self._watch
        watch.sent(node_id)
        try:
            response = await self._client.send(node_id, request, **kwargs)
        except Exception as exc:
            watch.failed(node_id, exc)
            raise
        except BaseException:  # cancelled: the fetcher dropped the request
            watch.cancelled(node_id)
            raise
        watch.answered(node_id)
        return response


class WatchedFetcher(_fetcher_module.Fetcher):  # type: ignore[misc]
    """aiokafka's Fetcher, its Fetch requests watched by `self.watch`."""

    def __init__(self, client: Any, *args: Any, **kwargs: Any) -> None:
        # Before the base starts its fetch routine: every fetch is watched.
        self.watch = FetchWatch()
        super().__init__(_WatchedClient(client, self.watch), *args, **kwargs)


def install() -> bool:
    """Make aiokafka's consumer create `WatchedFetcher`s (idempotent); False when this
    aiokafka does not create its fetcher the way this relies on (then a consumer has no
    watch and reports itself connected while its client exists, as before)."""
    current = getattr(_consumer_module, "Fetcher", None)
    if current not in (_fetcher_module.Fetcher, WatchedFetcher):
        return False
    _consumer_module.Fetcher = WatchedFetcher
    return True


def watch_of(client: Any) -> FetchWatch | None:
    """The FetchWatch of a started AIOKafkaConsumer, None without one."""
    watch = getattr(getattr(client, "_fetcher", None), "watch", None)
    return watch if isinstance(watch, FetchWatch) else None
