"""The Kafka source: an aiokafka group member whose records are handed over in batches,
their offsets committed in order as deliveries settle (`commits.py`), undecodable
records salvaged (`fetch.py`), unanswered fetches reported (`liveness.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from typing import Any

from aiokafka import (  # type: ignore[import-untyped]  # no py.typed
    AIOKafkaConsumer,
    ConsumerRebalanceListener,
)
from aiokafka.errors import (  # type: ignore[import-untyped]
    ConsumerStoppedError,
    KafkaError,
)

from adapters.kafka.commits import Commits, log
from adapters.kafka.connection import explain, stop_quietly
from adapters.kafka.fetch import RateLimitedLog, install
from adapters.kafka.liveness import install as watch_fetches
from adapters.kafka.liveness import watch_of
from adapters.kafka.options import KafkaOptions
from adapters.kafka.record import KafkaRecordLike
from adapters.kafka.reply import AnswerSender
from gateway.observability.logs import CLIENT_ENDPOINT, fields
from gateway.ports import Delivery, EndOfInput, EndpointSettings, NotConnected, PartitionLag

# Records that do not decode become dead letters instead of stopping their partition
# (adapters/kafka/fetch.py).
install(log)

# Fetches that go unanswered make the consumer not connected (adapters/kafka/liveness.py).
watch_fetches()

#: Fetch errors, said once a minute per kind with their cause.
_fetch_warnings = RateLimitedLog(log)

#: How long read_batch() waits with a full window before it keeps the group membership alive.
_KEEPALIVE_SECONDS = 60.0

#: How long one getmany() waits for records before read_batch() looks at its own state
#: again (closed, reconnected); records that arrive meanwhile end the wait at once.
_POLL_MS = 1000

#: aiokafka's fetch long-poll: a broker answers a fetch within this even with nothing to
#: read (passed explicitly: the liveness check below counts in it).
_FETCH_MAX_WAIT_MS = 500

#: A fetch unanswered for this many long-polls (or the session timeout, if longer) means
#: the broker or the way to it is gone: the consumer is not connected until one is answered.
_FETCH_POLLS_OVERDUE = 10


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class _Rebalance(ConsumerRebalanceListener):  # type: ignore[misc]  # untyped base
    def __init__(self, commits: Commits) -> None:
        self._commits = commits

    async def on_partitions_revoked(self, revoked: Sequence[Any]) -> None:
        await self._commits.revoked(revoked)

    async def on_partitions_assigned(self, assigned: Sequence[Any]) -> None:
        self._commits.assigned(assigned)


class KafkaConsumer:
    """Reads `topics` in consumer group `consumergroup`; commits contiguous acked offsets."""

    def __init__(self, settings: EndpointSettings) -> None:
        self._opts = KafkaOptions.parse(settings)
        if not self._opts.subscribed:
            raise ValueError("topics: a consumer needs at least one topic")
        if self._opts.consumergroup is None:
            raise ValueError("consumergroup: a consumer needs a consumer group")
        self.client_id = settings.client_id or f"xrgw-{self._opts.consumergroup}"
        # Deliveries, their settlement and the offset commits; it holds the client.
        self._commits = Commits()
        # Request-reply: a record naming a reply topic is answered there (reply.py).
        self._answers = AnswerSender(self._opts, self.client_id)
        self._commits.answerer = self._answers.answerer
        self._paused = False
        self._closed = False
        # Since when fetches go unanswered (monotonic), while that is reported.
        self._unanswered_since: float | None = None
        # The endpoint's name for those lines (the route names it around connect()):
        # they are said wherever `connected` is asked, a probe or a metrics scrape too.
        self._endpoint: str | None = None

    @property
    def _client(self) -> Any:
        """The AIOKafkaConsumer, None while not connected."""
        return self._commits.client

    @_client.setter
    def _client(self, client: Any) -> None:
        self._commits.client = client

    @property
    def connected(self) -> bool:
        """A client, and its brokers answer its fetches: a link that holds every byte
        (aiokafka neither fails nor reconnects for a long while) is not connected, an
        idle topic is (its fetches are answered every `fetch_max_wait_ms`)."""
        client = self._client
        return client is not None and self._answering(client)

    def _answering(self, client: Any) -> bool:
        """Whether no fetch of `client` is overdue (`adapters/kafka/liveness.py`);
        a warning when that starts, with the broker and the last error, and an info line
        when it ends."""
        watch = watch_of(client)
        overdue = None if watch is None else watch.overdue()
        if overdue is None:
            if self._unanswered_since is not None:
                log.info("kafka: %s answers fetches again (none answered for %.1f s)",
                         ",".join(self._opts.bootstrap),
                         time.monotonic() - self._unanswered_since,
                         extra=fields(endpoint=self._endpoint))
                self._unanswered_since = None
            return True
        if self._unanswered_since is None:
            self._unanswered_since = time.monotonic() - overdue.seconds
            log.warning(
                "kafka: broker %s (via %s) has not answered a fetch for %.1f s; not "
                "connected until it does", overdue.node, ",".join(self._opts.bootstrap),
                overdue.seconds, extra=fields(endpoint=self._endpoint,
                                              error=overdue.error or "no answer"))
        return False

    @property
    def unsettled(self) -> int:
        return self._commits.unsettled

    async def connect(self) -> None:
        if self._closed:
            raise EndOfInput("consumer closed")
        await self._drop_client()
        self._endpoint = CLIENT_ENDPOINT.get()
        opts = self._opts
        client = AIOKafkaConsumer(
            bootstrap_servers=list(opts.bootstrap),
            group_id=opts.consumergroup,
            client_id=self.client_id,
            enable_auto_commit=False,
            auto_offset_reset=opts.autooffsetreset,
            session_timeout_ms=opts.session_timeout_ms,
            heartbeat_interval_ms=opts.heartbeat_interval_ms,
            # read_committed by default: records of aborted transactions never become
            # events; records of open ones wait for their commit.
            isolation_level=opts.isolation_level,
            fetch_max_wait_ms=_FETCH_MAX_WAIT_MS,
            **opts.security,
        )
        client.subscribe(list(opts.subscribed), listener=_Rebalance(self._commits))
        # start() also waits for the first partition assignment, and after a member left
        # the group a broker may take a while to let a new one in (Tansu: about twice
        # the session timeout), so the join gets more time than the bootstrap.
        join_timeout = opts.connect_timeout + 3 * opts.session_timeout_ms / 1000
        try:
            async with asyncio.timeout(join_timeout):
                await client.start()
        except (KafkaError, OSError, TimeoutError, KeyError) as exc:
            await stop_quietly(client, 1.0)
            raise NotConnected(
                f"cannot join via {','.join(opts.bootstrap)}: {await explain(opts, exc)}"
            ) from None
        watch = watch_of(client)
        if watch is not None:
            # The session timeout: as long as the broker itself would wait for a silent
            # member; never less than many long-polls.
            watch.overdue_after = max(opts.session_timeout_ms,
                                      _FETCH_POLLS_OVERDUE * _FETCH_MAX_WAIT_MS) / 1000
        self._client = client
        self._commits.changed.set()

    async def read_batch(self, limit: int) -> list[Delivery]:
        while True:
            client = self._live_client()
            room = self._opts.max_in_flight - self._commits.unsettled
            if room <= 0:
                await self._wait_for_room(client)
                continue
            if self._paused:
                self._paused = False
                client.resume(*client.assignment())
            fetched = await self._fetch(client, min(limit, room))
            if client is not self._client:
                continue  # reconnected or closed while waiting: the records are stale
            if fetched:
                return self._deliver(fetched)
            # Nothing came: say so now if the broker stopped answering (not only when
            # someone asks `connected`).
            self._answering(client)

    def _live_client(self) -> Any:
        if self._closed:
            raise EndOfInput("consumer closed")
        if self._client is None:
            raise NotConnected("not connected")
        return self._client

    async def _fetch(self, client: Any, most: int) -> dict[Any, list[KafkaRecordLike]]:
        """What aiokafka has prefetched, at most `most` records (empty after _POLL_MS
        without any)."""
        try:
            fetched: dict[Any, list[KafkaRecordLike]] = await client.getmany(
                timeout_ms=_POLL_MS, max_records=most
            )
        except ConsumerStoppedError:
            if self._closed:
                raise EndOfInput("consumer closed") from None
            raise NotConnected("consumer stopped") from None
        except KafkaError as exc:
            # Not a record's fault (those arrive as undecodable deliveries): the broker
            # refused the fetch or the connection broke. Said once with its cause, then
            # the consumer rejoins from the committed offset.
            _fetch_warnings.warning(
                type(exc), f"kafka: fetch from {','.join(self._opts.bootstrap)} failed, "
                "reconnecting", fields(error=exc))
            await self._drop_client()
            raise NotConnected(f"kafka: {exc!r}") from None
        return fetched

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._drop_client()
        await self._answers.aclose()
        self._commits.changed.set()

    async def backlog(self) -> list[PartitionLag]:
        client = self._client
        if client is None:
            raise NotConnected("not connected")
        assigned = sorted(client.assignment(), key=lambda tp: (tp.topic, tp.partition))
        if not assigned:
            return []
        listed = await client.end_offsets(assigned)
        lags = []
        for tp in assigned:
            # Both are lower bounds of the true end: the fetch's high watermark may be
            # older, a broker's ListOffsets answer may be short (Tansu's is).
            end = max(listed[tp], client.highwater(tp) or 0)
            done = self._commits.first_unsettled(tp)
            if done is None:
                done = await self._start_offset(client, tp, end)
            lags.append(PartitionLag(tp.topic, tp.partition, max(0, end - done)))
        return lags

    async def _start_offset(self, client: Any, tp: Any, end: int) -> int:
        """Where this member starts reading a partition it has handed nothing out of."""
        committed: int | None = await client.committed(tp)
        if committed is not None:
            return committed
        if self._opts.autooffsetreset == "earliest":
            first: int = (await client.beginning_offsets([tp]))[tp]
            return first
        return end

    # -- delivery ----------------------------------------------------------------------------
    def answer_nobody(self) -> None:
        """No answer hooks (`ports.answer_nobody`): the records' headers go unsearched for
        a reply topic."""
        self._commits.answerer = None

    def defer_bodies(self) -> None:
        """Bodies parsed when first read (`ports.defer_bodies`)."""
        self._commits.parse_bodies = False

    def _deliver(self, fetched: dict[Any, list[KafkaRecordLike]]) -> list[Delivery]:
        """Deliveries of a getmany() answer: partition by partition, each in offset order
        (the only order Kafka defines)."""
        # One clock read per batch: the records arrived together.
        return self._commits.deliver(fetched, _now())

    # -- back-pressure ------------------------------------------------------------------------
    async def _wait_for_room(self, client: Any) -> None:
        changed = self._commits.changed
        changed.clear()
        try:
            async with asyncio.timeout(_KEEPALIVE_SECONDS):
                await changed.wait()
            return
        except TimeoutError:
            pass
        # Still full: a poll keeps aiokafka's max.poll.interval from expiring, and paused
        # partitions make sure it hands out nothing (their prefetch is refetched later).
        self._paused = True
        client.pause(*client.assignment())
        with contextlib.suppress(KafkaError):
            await client.getmany(timeout_ms=0)

    # -- connection --------------------------------------------------------------------------
    async def _drop_client(self) -> None:
        client = self._client
        if client is None:
            return
        # Flushes the commits, then forgets the partitions and the client.
        await self._commits.detach(self._opts.connect_timeout)
        self._paused = False
        await stop_quietly(client, self._opts.connect_timeout)
        self._commits.changed.set()
