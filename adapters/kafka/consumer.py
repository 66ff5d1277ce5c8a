"""Kafka consumer (consumer group) and producer (aiokafka).

URI: `kafka://HOST:PORT[,HOST:PORT...]` (bootstrap servers; the one scheme of the KAFKA
profile, which the config check reads too: listener names such as `SSL://` are refused
saying so). Kafka has no TLS scheme: a `tls` block (`EndpointSettings.tls`) turns TLS on (see
`adapters/_tls.py`: the brokers are verified against `tls.ca_file`, default the system
CAs, and their host names; `tls.cert_file`/`key_file` add a client certificate), and a
`username` turns SASL on (`sasl_mechanism`, the password from `password`). So the
security protocol is SSL, SASL_SSL, SASL_PLAINTEXT or PLAINTEXT; `security_protocol`
may say so explicitly and must then agree. SASL PLAIN without TLS would send the
password in clear text and is refused; SCRAM never sends it. A refused login fails
`connect()` with `SASL authentication failed ...`, a failed handshake with `TLS: ...`.

Options: `adapters/_kafka_options.py` (one spec: names, xRegistry spellings, types,
defaults; rendered in docs/configuration.md).

Settlement. Offsets are committed by the adapter (auto commit off), only for acked
deliveries and per partition in order: the committed offset is one past the highest
*contiguous* settled offset, so an ack of offset 7 commits nothing while offset 5 is
unsettled, and a restart redelivers everything from the first unsettled offset on.
Settling does no I/O: an ack marks its offset and moves the partition's commit point; a
background task then commits every partition that moved in one request, so a burst of
acks (the engine settles a batch at a time) costs one commit, not one per message.
`aclose()` and a partition revocation flush the commits first. The tracking and the
commits are `adapters/_kafka_commits.py`.

`read_batch(limit)` hands over what aiokafka has prefetched (`getmany`), at most `limit`
and at most the free room below `max_in_flight`, partition by partition, each in offset
order.

`nack(retry=True)` of offset N seeks the partition back to N: N and every later
delivery of that partition still in flight become stale (settling them does nothing),
and the records from N on are fetched and delivered again. Acks of later offsets are
therefore redone, which is at-least-once. `nack(retry=False)` counts as an ack (the
caller dead-lettered or gave up on the record). Deliveries of a revoked partition or an
older connection are stale too: the new owner starts from the committed offset.

Back-pressure: at most `max_in_flight` deliveries are unsettled; `read_batch()` waits and no
record is taken from aiokafka meanwhile, and aiokafka does not refetch a partition whose
prefetched batch is not consumed, so nothing more is read from the broker. So that the
group does not evict a consumer that is merely waiting (aiokafka's max.poll.interval),
a long wait pauses the partitions and polls them empty once a minute.

Lag (`backlog()`, the `xrgw_consumer_lag` metric): per assigned partition, the end offset
minus the first offset this member has not settled (delivered and unsettled records
count: they are not done yet). The end is the higher of a ListOffsets answer (one
request for all partitions) and the high watermark of the last fetch: Tansu answers
ListOffsets with its last batch's base offset + 1. With nothing unsettled the first
unsettled offset is the one after the last record handed out; before the first one, the
group's committed offset (or where `autooffsetreset` starts). Not aiokafka's position:
that runs ahead with prefetched records.

Poison. Every codec Kafka defines is read (cramjam, with the aiokafka extras). What still
cannot be decoded -- a batch in an unknown codec, corrupt or failing its CRC, a record
with a header name that is not UTF-8 -- is handed over as a delivery marked `undecodable`
at its offsets (`adapters/_kafka_fetch.py`): the route dead-letters it (reason
`undecodable`, the raw bytes, topic/partition/offset), its ack commits past it, and the
records around it flow as usual; each partition logs it at most once a minute.

The consumer reads `read_committed` unless `isolation_level` says otherwise: records of
aborted transactions never become events (on brokers that report aborts in their fetch
answers; Tansu does not), records of open transactions wait for the commit.

Liveness. A broker that stops answering (a link that holds every byte, a hung broker)
makes aiokafka neither fail nor reconnect for a long while, and receiving nothing looks
like an idle topic. So `connected` is false while a fetch has had no answer for the
session timeout (at least 10 of aiokafka's 0.5 s fetch long-polls, which a broker answers
even when there is nothing to read): `/readyz` and `xrgw_endpoint_connected` say so, one
warning names the broker and the last error, one info line says when fetches are
answered again (`adapters/_kafka_liveness.py`). An idle topic, or a consumer holding
back (nothing is fetched then), stays connected.

The consumer leaves broker connectivity to aiokafka, which reconnects on its own;
errors aiokafka raises from a read (the broker refused the fetch, the connection broke:
no longer a record's fault) are logged with their cause, once a minute per kind, and
make `read_batch()` raise NotConnected.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import random
import ssl
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from aiokafka import (  # type: ignore[import-untyped]  # no py.typed
    AIOKafkaConsumer,
    AIOKafkaProducer,
    ConsumerRebalanceListener,
)
from aiokafka.errors import (  # type: ignore[import-untyped]
    AuthenticationFailedError,
    ConsumerStoppedError,
    CorruptRecordException,
    InvalidTopicError,
    KafkaError,
    MessageSizeTooLargeError,
    RecordListTooLargeError,
    RecordTooLargeError,
    SaslAuthenticationFailed,
    TopicAuthorizationFailedError,
    UnsupportedForMessageFormatError,
    UnsupportedSaslMechanismError,
)
from aiokafka.partitioner import murmur2  # type: ignore[import-untyped]
from aiokafka.record.default_records import (  # type: ignore[import-untyped]
    DefaultRecordBatchBuilder,
)

from adapters._kafka_commits import Commits, log
from adapters._kafka_fetch import RateLimitedLog, install
from adapters._kafka_liveness import install as watch_fetches
from adapters._kafka_liveness import watch_of
from adapters._kafka_options import CODECS, MECHANISMS, OPTIONS, SECURITY_PROTOCOLS
from adapters._kafka_record import KafkaRecordLike, SendArgs, to_send
from adapters._reconnect import ReconnectGate
from adapters._schemes import check_scheme
from adapters._tls import client_context, describe, probe
from gateway.observability.logs import CLIENT_ENDPOINT, fields
from gateway.ports import (
    Confirmation,
    Delivery,
    EndOfInput,
    EndpointSettings,
    NotConnected,
    Outcome,
    PartitionLag,
    confirmed,
)
from gateway.protocols import KAFKA, profile
from gateway.record import NativeMessage

__all__ = ["KafkaConsumer", "KafkaOptions", "KafkaProducer"]

_URIS = profile(KAFKA).endpoint.uris

# Records that do not decode become dead letters instead of stopping their partition
# (adapters/_kafka_fetch.py).
install(log)
# Fetches that go unanswered make the consumer not connected (adapters/_kafka_liveness.py).
watch_fetches()
#: Fetch errors, said once a minute per kind with their cause.
_fetch_warnings = RateLimitedLog(log)

#: Errors that are a verdict on the record itself: sending it again cannot succeed.
_VERDICTS: tuple[type[BaseException], ...] = (
    CorruptRecordException,
    InvalidTopicError,
    MessageSizeTooLargeError,
    RecordListTooLargeError,
    RecordTooLargeError,
    TopicAuthorizationFailedError,
    UnsupportedForMessageFormatError,
    # Raised by aiokafka's argument checks (e.g. a partition the topic does not have).
    AssertionError,
    TypeError,
    ValueError,
)

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
#: How often at most a producer moves its deadline on while a batch makes progress.
_RENEW_SECONDS = 1.0
#: How many keys' hashes a producer keeps (all are forgotten when it is full).
_HASHES_KEPT = 4096
#: A record's size as aiokafka counts it against max_request_size.
_estimate_size = DefaultRecordBatchBuilder.estimate_size_in_bytes


@dataclass(frozen=True)
class KafkaOptions:
    bootstrap: tuple[str, ...]
    topics: tuple[str, ...]
    group: str | None
    auto_offset_reset: str
    max_in_flight: int
    session_timeout_ms: int
    heartbeat_interval_ms: int
    topic: str | None
    enable_idempotence: bool
    connect_timeout: float
    publish_timeout: float
    reconnect_max: float
    acks: int | str = "all"
    linger_ms: int = 5
    max_batch_size: int = 1048576
    compression_type: str | None = None  # aiokafka's spelling: None, gzip, snappy, lz4, zstd
    isolation_level: str = "read_committed"
    # Headers every record gets unless it has one of the same name.
    headers: tuple[tuple[str, bytes], ...] = ()
    # aiokafka's security arguments (security_protocol, ssl_context, sasl_*); the password
    # is in there, so it stays out of the repr.
    security: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def parse(cls, settings: EndpointSettings) -> KafkaOptions:
        """Read the options (`adapters/_kafka_options.py`); raises ValueError naming the
        bad one."""
        opts = OPTIONS.read(settings.options)
        topics = opts["topics"] or ()
        acks = cast(int | str, opts["acks"])
        return cls(
            bootstrap=_bootstrap(settings.uri),
            topics=(topics,) if isinstance(topics, str) else tuple(cast(list[str], topics)),
            group=cast(str | None, opts["consumergroup"]),
            auto_offset_reset=cast(str, opts["autooffsetreset"]),
            max_in_flight=cast(int, opts["max_in_flight"]),
            session_timeout_ms=cast(int, opts["session_timeout_ms"]),
            heartbeat_interval_ms=cast(int, opts["heartbeat_interval_ms"]),
            topic=cast(str | None, opts["topic"]),
            enable_idempotence=cast(bool, opts["enable_idempotence"]),
            connect_timeout=cast(float, opts["connect_timeout"]),
            publish_timeout=cast(float, opts["publish_timeout"]),
            reconnect_max=cast(float, opts["reconnect_max"]),
            acks="all" if acks in (-1, "all") else acks,
            linger_ms=cast(int, opts["linger_ms"]),
            max_batch_size=cast(int, opts["max_batch_size"]),
            compression_type=_compression(cast(str, opts["compression_type"])),
            isolation_level=cast(str, opts["isolation_level"]),
            headers=tuple((name, value.encode()) for name, value in
                          cast(dict[str, str], opts["headers"] or {}).items()),
            security=_security(settings, opts),
        )

    @property
    def sasl(self) -> bool:
        return str(self.security.get("security_protocol", "")).startswith("SASL")




def _compression(name: str) -> str | None:
    """aiokafka's compression_type for the option; refused when its codec is missing
    (cramjam, a dependency, brings snappy, lz4 and zstd)."""
    if name == "none":
        return None
    if not CODECS[name]():
        raise ValueError(f"compression_type: {name} needs the cramjam package, which is "
                         "not installed")
    return name


def _security(settings: EndpointSettings, opts: Mapping[str, object]) -> dict[str, Any]:
    """aiokafka keyword arguments for TLS and SASL (empty: plaintext, anonymous)."""
    tls = settings.tls is not None
    sasl = bool(settings.username)
    derived = ("SASL_" if sasl else "") + ("SSL" if tls else "PLAINTEXT")
    protocol = str(opts.get("security_protocol") or derived).upper()
    if protocol not in SECURITY_PROTOCOLS:
        raise ValueError(f"security_protocol: expected one of {', '.join(SECURITY_PROTOCOLS)}, "
                         f"got {protocol!r}")
    if protocol.startswith("SASL") and not sasl:
        raise ValueError(f"security_protocol: {protocol} needs a username and password")
    if sasl and not protocol.startswith("SASL"):
        raise ValueError(f"security_protocol: {protocol} sends no credentials; "
                         "drop it (derived from username and tls) or use a SASL_ protocol")
    if protocol.endswith("PLAINTEXT") and tls:
        raise ValueError(f"security_protocol: {protocol} contradicts the tls settings")
    out: dict[str, Any] = {"security_protocol": protocol}
    if protocol.endswith("SSL"):
        out["ssl_context"] = client_context(settings.tls)
    if sasl:
        mechanism = str(opts.get("sasl_mechanism") or "PLAIN").upper()
        if mechanism not in MECHANISMS:
            raise ValueError(f"sasl_mechanism: expected one of {', '.join(MECHANISMS)}, "
                             f"got {mechanism!r}")
        if mechanism == "PLAIN" and protocol == "SASL_PLAINTEXT":
            raise ValueError("sasl_mechanism: PLAIN without TLS sends the password in clear "
                             "text; add a tls block or use SCRAM-SHA-256/512")
        out.update(sasl_mechanism=mechanism, sasl_plain_username=settings.username,
                   sasl_plain_password=settings.password or "")
    return out


def _connect_error(opts: KafkaOptions, exc: BaseException) -> str:
    """Why a connect failed, in words that point at the setting to check."""
    if isinstance(exc, (SaslAuthenticationFailed, AuthenticationFailedError, KeyError)) or (
        opts.sasl and isinstance(exc, UnsupportedSaslMechanismError)
    ):
        # aiokafka's SCRAM client raises KeyError('v') on a server-final error message.
        return ("SASL authentication failed (check the endpoint's username/password and "
                "sasl_mechanism)")
    if isinstance(exc, UnsupportedSaslMechanismError):
        return f"{exc} (check sasl_mechanism)"
    cause = exc.__cause__ or exc.__context__
    for candidate in (exc, cause):
        if isinstance(candidate, ssl.SSLError):
            return describe(candidate)
    return repr(exc)


async def _explain(opts: KafkaOptions, exc: BaseException) -> str:
    """`_connect_error`, and for a plain "cannot bootstrap" over TLS the handshake's own
    failure (aiokafka only logs it)."""
    text = _connect_error(opts, exc)
    context = opts.security.get("ssl_context")
    if isinstance(context, ssl.SSLContext) and text.startswith(("KafkaConnectionError",
                                                                "TimeoutError")):
        host, _, port = opts.bootstrap[0].rpartition(":")
        why = await probe(host.strip("[]"), int(port), context, 5.0)
        if why is not None:
            return why
    return text


def _bootstrap(uri: str) -> tuple[str, ...]:
    # Not urlsplit: a comma-separated host list has no valid port for it.
    scheme, sep, rest = uri.partition("://")
    if not sep:
        scheme, rest = "", uri
    check_scheme(scheme, _URIS)
    netloc = rest.split("/", 1)[0]
    if "@" in netloc:
        raise ValueError("uri: put credentials into username/password (or *_file), "
                         "not into the Kafka URI")
    servers = tuple(s.strip() for s in netloc.split(",") if s.strip())
    if not servers:
        raise ValueError("uri: expected kafka://HOST:PORT[,HOST:PORT...]")
    return tuple(s if ":" in s.rsplit("]", 1)[-1] else f"{s}:9092" for s in servers)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


async def _stop_quietly(client: Any, timeout: float) -> None:
    """Stop an aiokafka client; a dead broker must not make closing hang or raise."""
    with contextlib.suppress(Exception):
        async with asyncio.timeout(timeout):
            await client.stop()


# ====================================================================== consumer


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
        if not self._opts.topics:
            raise ValueError("topics: a consumer needs at least one topic")
        if self._opts.group is None:
            raise ValueError("consumergroup: a consumer needs a consumer group")
        self.client_id = settings.client_id or f"xrgw-{self._opts.group}"
        # Deliveries, their settlement and the offset commits; it holds the client.
        self._commits = Commits()
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
        """Whether no fetch of `client` is overdue (`adapters/_kafka_liveness.py`);
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
            group_id=opts.group,
            client_id=self.client_id,
            enable_auto_commit=False,
            auto_offset_reset=opts.auto_offset_reset,
            session_timeout_ms=opts.session_timeout_ms,
            heartbeat_interval_ms=opts.heartbeat_interval_ms,
            # read_committed by default: records of aborted transactions never become
            # events; records of open ones wait for their commit.
            isolation_level=opts.isolation_level,
            fetch_max_wait_ms=_FETCH_MAX_WAIT_MS,
            **opts.security,
        )
        client.subscribe(list(opts.topics), listener=_Rebalance(self._commits))
        # start() also waits for the first partition assignment, and after a member left
        # the group a broker may take a while to let a new one in (Tansu: about twice
        # the session timeout), so the join gets more time than the bootstrap.
        join_timeout = opts.connect_timeout + 3 * opts.session_timeout_ms / 1000
        try:
            async with asyncio.timeout(join_timeout):
                await client.start()
        except (KafkaError, OSError, TimeoutError, KeyError) as exc:
            await _stop_quietly(client, 1.0)
            raise NotConnected(
                f"cannot join via {','.join(opts.bootstrap)}: {await _explain(opts, exc)}"
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
        if self._opts.auto_offset_reset == "earliest":
            first: int = (await client.beginning_offsets([tp]))[tp]
            return first
        return end

    # -- delivery ----------------------------------------------------------------------------
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
        await _stop_quietly(client, self._opts.connect_timeout)
        self._commits.changed.set()


# ====================================================================== producer

#: A pending send: the future of the aiokafka batch that holds the record, or the
#: Outcome it already has.
_Pending = asyncio.Future[Any] | Outcome
#: Placeholder of a record while its batch is being filled.
_UNSENT = Outcome.failed("not sent")


async def _partitions(client: Any, topic: str) -> tuple[list[int], list[int]]:
    """The topic's partitions, all and available, in id order (the partitioner indexes
    them by key hash, as the Java client does), after waiting for its metadata."""
    every = sorted(await client.partitions_for(topic))
    available = sorted(client._metadata.available_partitions_for_topic(topic) or ())
    return every, available


class _Renewal:
    """Moves a deadline on while there is progress, so that a wait of a whole batch is
    bounded per step (a hang), not in total (a long batch). The deadline is renewed at most
    once per _RENEW_SECONDS: a step costs a clock read, not a timer."""

    __slots__ = ("_budget", "_deadline", "_loop", "_renewed")

    def __init__(self, deadline: asyncio.Timeout, budget: float) -> None:
        self._deadline = deadline
        self._budget = budget
        self._loop = asyncio.get_running_loop()
        self._renewed = self._loop.time()

    def progress(self) -> None:
        now = self._loop.time()
        if now - self._renewed > _RENEW_SECONDS:
            self._deadline.reschedule(now + self._budget)
            self._renewed = now


class _Partitioner:
    """The partition of a record without one, as aiokafka's DefaultPartitioner picks it
    (the Java client's murmur2 of the key; a random available partition for a record
    without a key); `_send_all` asks it, since records go to aiokafka in batches already
    placed. It remembers the hashes of recent keys: murmur2 is pure Python, about as
    costly as the rest of a send, and a route keys its records by the source's unit of
    order (few keys, many records)."""

    __slots__ = ("_hashes",)

    def __init__(self) -> None:
        self._hashes: dict[bytes, int] = {}

    def __call__(self, key: bytes | None, all_partitions: list[int],
                 available: list[int]) -> int:
        if key is None:
            return random.choice(available or all_partitions)
        hashed = self._hashes.get(key)
        if hashed is None:
            if len(self._hashes) >= _HASHES_KEPT:
                self._hashes.clear()
            hashed = self._hashes[key] = murmur2(key) & 0x7FFFFFFF
        return all_partitions[hashed % len(all_partitions)]


class KafkaProducer:
    """Sends records with acks=all and reports each as delivered once the broker has.

    `submit()` packs the records into per-partition record batches of up to
    `max_batch_size` bytes, queues them with aiokafka and returns at once; aiokafka has one
    produce request per broker under way, so consecutive submits share requests and keep
    their order. `linger_ms` (5 by default) lets small submits share a request; 0 costs
    more produce requests (measured: AMQP -> Kafka sink broker 27 -> 47 us per message)
    and, since the MQTT source acknowledges its reads at once, no longer lowers the
    latency (bench/bench_latency.py at 500/s: p50 10.9-11.3 ms with 0, 9.4-9.6 with 5).
    The Confirmation awaits the batches' futures.

    A send that fails for a reason other than the record itself fails the rest of its
    batch without trying them, and the Confirmation that sees such a failure drops the
    client; the next `submit()` reconnects, at most once per backoff interval (doubling up
    to `reconnect_max`), and meanwhile fails fast with a retryable Outcome.
    """

    def __init__(self, settings: EndpointSettings) -> None:
        self._opts = KafkaOptions.parse(settings)
        self.client_id = settings.client_id or f"xrgw-pub-{uuid.uuid4().hex[:12]}"
        self._client: Any = None  # AIOKafkaProducer
        self._partitioner = _Partitioner()
        # Per (topic, partition): the batch queued last and its future (_send_group).
        self._open: dict[tuple[str, int], tuple[Any, asyncio.Future[Any]]] = {}
        self._gate = ReconnectGate(self._opts.reconnect_max)
        # Submits take turns: one that waits for room in aiokafka's batches must not be
        # overtaken by a later one (order of records across submits).
        self._turn = asyncio.Lock()
        # A hung send or acknowledgement is cut off no sooner than one second after
        # aiokafka's own timeout (request_timeout_ms) would have reported it.
        self._budget = self._opts.publish_timeout + 1 + _RENEW_SECONDS

    @property
    def connected(self) -> bool:
        return self._client is not None

    @property
    def max_message_bytes(self) -> int | None:
        """aiokafka's `max_request_size`: a record (key, value, headers and the batch's
        overhead) larger than this is never sent (the broker's `message.max.bytes` may be
        lower: its MESSAGE_TOO_LARGE is a too-large refusal as well)."""
        client = self._client
        return None if client is None else int(client._max_request_size)

    async def connect(self) -> None:
        await self._gate.connect(self._connect)

    async def _connect(self) -> None:
        await self._drop_client()
        opts = self._opts
        client = AIOKafkaProducer(
            bootstrap_servers=list(opts.bootstrap),
            client_id=self.client_id,
            acks=opts.acks,
            enable_idempotence=opts.enable_idempotence,
            linger_ms=opts.linger_ms,
            max_batch_size=opts.max_batch_size,
            compression_type=opts.compression_type,
            # Bounds metadata waits and unanswered produce requests: no hang when the
            # broker is gone.
            request_timeout_ms=int(opts.publish_timeout * 1000),
            **opts.security,
        )
        try:
            async with asyncio.timeout(opts.connect_timeout):
                await client.start()
        except (KafkaError, OSError, TimeoutError, KeyError) as exc:
            await _stop_quietly(client, 1.0)
            raise NotConnected(
                f"cannot reach {','.join(opts.bootstrap)}: {await _explain(opts, exc)}"
            ) from None
        self._client = client

    async def submit(self, messages: Sequence[NativeMessage]) -> Confirmation:
        async with self._turn:
            if self._client is None:
                reason = await self._try_reconnect()
                if reason is not None:
                    return confirmed([Outcome.failed(reason) for _ in messages])
            client = self._client
            pending = await self._send_all(client, messages)
        return self._confirm(client, pending)

    async def _send_all(self, client: Any, messages: Sequence[NativeMessage]) -> list[_Pending]:
        """The records, packed per partition into aiokafka record batches and queued in
        order; each record's item is its batch's future (or its own Outcome when it
        cannot be sent). Batches, not one `send()` per record: `send()` costs ~26 us of
        CPU per record, this whole path 7.5-9 us (bench/bench_kafka_producer.py); the
        checks `send()` makes per record, size and partition, are made here too."""
        pending: list[_Pending] = []
        groups: dict[tuple[str, int], list[tuple[int, SendArgs]]] = {}
        partitions: dict[str, tuple[list[int], list[int]]] = {}  # topic: (all, available)
        topic, headers = self._opts.topic, self._opts.headers
        most = client._max_request_size  # aiokafka's max_request_size (no public getter)
        failure: Outcome | None = None  # of the link: the rest is not attempted
        try:
            async with asyncio.timeout(self._budget) as deadline:
                renewal = _Renewal(deadline, self._budget)
                for index, record in enumerate(messages):
                    try:
                        args = to_send(record, topic, headers)
                        size = _estimate_size(args.key, args.value, args.headers)
                        if size > most:
                            raise MessageSizeTooLargeError(
                                f"the record is {size} bytes, over max_request_size {most}")
                        known = partitions.get(args.topic)
                        if known is None:
                            known = partitions[args.topic] = await _partitions(client,
                                                                                args.topic)
                        partition = self._partition(args, *known)
                    except Exception as exc:  # aiokafka raises more than KafkaError
                        outcome = (Outcome.failed(str(exc), retryable=False)
                                   if isinstance(exc, ValueError) else _failure(exc))
                        pending.append(outcome)
                        if outcome.retryable:
                            failure = outcome
                            break
                        continue
                    pending.append(_UNSENT)
                    groups.setdefault((args.topic, partition), []).append((index, args))
                for (to_topic, partition), members in groups.items():
                    await self._send_group(client, to_topic, partition, members, pending)
                    renewal.progress()
        except Exception as exc:  # the deadline, or aiokafka refusing a batch
            failure = _failure(exc)
        if failure is not None:
            skipped = Outcome.failed(f"not attempted: {failure.reason}")
            pending += [skipped] * (len(messages) - len(pending))
            pending = [failure if item is _UNSENT else item for item in pending]
        return pending

    def _partition(self, args: SendArgs, all_partitions: list[int],
                   available: list[int]) -> int:
        if args.partition is None:
            return self._partitioner(args.key, all_partitions, available)
        if args.partition not in all_partitions:
            raise ValueError(f"partition {args.partition} does not exist in topic "
                             f"{args.topic}")
        return args.partition

    async def _send_group(self, client: Any, topic: str, partition: int,
                          members: list[tuple[int, SendArgs]], pending: list[_Pending]) -> None:
        """Queue one partition's records; a batch's future stands for each of its records.

        Records first join the batch this producer queued last for the partition while
        aiokafka has not taken it yet (a produce request for the broker is under way): so
        small submits share requests as they did with `send()`. aiokafka closes a batch
        when it builds the request; `append` then answers None and a new batch is queued
        (`send_batch` waits while the partition already has one waiting)."""
        key = (topic, partition)
        # `future` is set while `batch` is one aiokafka holds; None while it is new.
        batch, future = self._open.get(key, (None, None))
        if future is not None and future.done():  # sent, or failed before it was sent
            batch = future = None
        new: list[int] = []  # members in the new batch, queued when it is full or at the end
        for index, args in members:
            if batch is None or batch.append(timestamp=args.timestamp_ms, key=args.key,
                                             value=args.value, headers=args.headers) is None:
                if new:
                    future = await client.send_batch(batch, topic, partition=partition)
                    for queued in new:
                        pending[queued] = future
                batch, future, new = client.create_batch(), None, []
                # An empty batch takes any record, even one over max_batch_size.
                batch.append(timestamp=args.timestamp_ms, key=args.key, value=args.value,
                             headers=args.headers)
            if future is None:
                new.append(index)
            else:
                pending[index] = future  # joined the batch aiokafka holds
        if new:
            future = await client.send_batch(batch, topic, partition=partition)
            for queued in new:
                pending[queued] = future
        if batch is not None and future is not None and self._open.get(key) != (batch, future):
            self._open[key] = (batch, future)
            # Not kept once sent: its buffer can be up to max_batch_size.
            future.add_done_callback(functools.partial(self._sent, key, batch))

    def _sent(self, key: tuple[str, int], batch: Any, _: asyncio.Future[Any]) -> None:
        if self._open.get(key, (None,))[0] is batch:
            del self._open[key]

    async def _confirm(self, client: Any, pending: list[_Pending]) -> list[Outcome]:
        outcomes = await self._outcomes(pending)
        if self._client is client and any(not o.delivered and o.retryable for o in outcomes):
            await self._drop_client()  # reconnect (with backoff) on the next submit
        return outcomes

    async def _outcomes(self, pending: list[_Pending]) -> list[Outcome]:
        # aiokafka resolves the futures of a whole batch together, so this waits once per
        # produce request, not per record; a future that is done costs no wait.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._budget) as deadline:
                renewal = _Renewal(deadline, self._budget)
                for item in pending:
                    if not isinstance(item, Outcome) and not item.done():
                        # wait(), not await: a cancelled future must not look like our
                        # own cancellation (the deadline).
                        await asyncio.wait((item,))
                        renewal.progress()
        # Past the deadline, the futures still pending report the timeout.
        return [_outcome(item) for item in pending]

    async def _try_reconnect(self) -> str | None:
        return await self._gate.try_reconnect(lambda: self._client is not None, self._connect)

    async def _drop_client(self) -> None:
        client, self._client = self._client, None
        self._open.clear()
        if client is not None:
            # Nothing is lost by a short timeout: unsent records were reported failed.
            await _stop_quietly(client, 2.0)

    async def aclose(self) -> None:
        await self._drop_client()


def _outcome(item: _Pending) -> Outcome:
    """The Outcome of one send: its own, or its future's."""
    if isinstance(item, Outcome):
        return item
    if not item.done():
        return _failure(TimeoutError())
    if item.cancelled():
        return Outcome.failed("kafka: send cancelled (producer closed)")
    exc = item.exception()
    return Outcome.ok() if exc is None else _failure(exc)


#: Refusals of a record for its size (by aiokafka before sending, or by the broker).
_TOO_LARGE: tuple[type[BaseException], ...] = (
    MessageSizeTooLargeError, RecordListTooLargeError, RecordTooLargeError)


def _failure(exc: BaseException) -> Outcome:
    if isinstance(exc, TimeoutError):
        return Outcome.failed("no acknowledgement from the broker in time")
    if isinstance(exc, _TOO_LARGE):
        return Outcome.refused_as_too_large(f"kafka: {exc!r}")
    return Outcome.failed(f"kafka: {exc!r}", retryable=not isinstance(exc, _VERDICTS))
