"""NATS core and JetStream consumer and producer (nats-py).

Options: `adapters/_nats_options.py` (one spec: names, xRegistry spellings, types,
defaults; rendered in docs/configuration.md).

Security. `tls://host:4222` (or a `tls` block) connects with TLS, and only with TLS: a
server whose INFO does not require TLS is refused before any credential is sent (see
`adapters/_tls.py`). The server is verified against `tls.ca_file` (default: the system
CAs) and its host name, and `tls.cert_file`/`tls.key_file` add a client certificate
(servers with `verify: true`). Authentication: `username` + `password` -> user/password;
a `password` without a `username` -> the server's authorization token; or `creds_file` /
`nkey_seed_file`. A refused login fails `connect()` with `authorization violation (check
the endpoint's credentials)`, a rejected certificate with `TLS: ...`. Nothing secret is
logged.

Connections. nats-py reconnects on its own (forever, every `reconnect_wait` seconds)
and restores the subscriptions, so a lost connection is not an error for the engine:
`connected` is false meanwhile, `read_batch()` waits, and `connect()` waits up to
`connect_timeout` for nats-py. Only a client that never connected, or that nats-py gave
up on, is built anew.

Batches. nats-py hands each received message to a callback that appends it to a deque;
`read_batch(limit)` waits for the first and then takes everything buffered (at most
`limit`, and no more than `max_in_flight` unsettled), with one receive timestamp per
batch. Settlements are publishes into nats-py's pending buffer, which its flusher task
writes in one go: a burst of acks is one socket write and no round trip.

Core mode is at-most-once by nature: the server keeps nothing, so `ack()` and `nack()`
do nothing (a nacked message is gone). Back-pressure: at most `max_in_flight` deliveries
are unsettled and at most `max_in_flight` more are buffered; beyond that nats-py keeps up
to `pending_*_limit` per subscription and then drops (a "slow consumer": nothing pushes
back on a core publisher). Drops are counted in `dropped` and logged once per episode.

JetStream mode uses a durable *push* consumer (measured here: push ran 2x faster than
pull fetch). `max_ack_pending = max_in_flight` makes the server stop sending while the
gateway holds that many unacked messages, so nothing is dropped. The durable acknowledges
with AckPolicy.ALL: one `+ACK` for the contiguous settled prefix per settling burst
(`adapters/_nats_acks.py`), where one per message loaded the server about twice as much
per message as the plain bridge. `nack(retry=True)` -> `-NAK` of that message (after
`nak_delay`); `nack(retry=False)` settles like an ack (never redelivered). With a queue
group the durable is shared, and keeps explicit acks: `ack()` -> `+ACK`,
`nack(retry=False)` -> `+TERM`, one per message. Unsettled deliveries come again after
`ack_wait`, also after a gateway restart. An existing durable keeps its own settings,
its ack policy included (a warning names differences in `max_ack_pending`). `backlog()`
(the `xrgw_consumer_pending` metric) asks the server for the durable's `num_pending +
num_ack_pending`; core mode has no backlog.

Producer. `submit()` publishes the whole batch into nats-py's buffer and returns; the
confirmation follows. Core: one PING/PONG round trip per batch, the PING written behind
the batch's publishes (the server has read everything before it): that is all core NATS
confirms. It counts only on the connection the batch was queued on (`_Client.confirm`,
not nats-py's `flush()`, which returns without a round trip while nats-py reconnects or
after its read loop died); if that connection breaks first, or no PONG comes within
`publish_timeout`, the whole batch is reported retryable and sent again by the route
(at-least-once: a batch the server read before the break comes twice). A missing PONG
also forces a reconnect and makes the producer not ready (`connected` false, one log
line) until the server confirms again: a partitioned link still takes writes for a
while, and nats-py alone would notice only after two idle PINGs two minutes apart. On a
reconnect the publishes still queued for the old connection are dropped: the route sends
them again, before anything new (`gateway/runtime/resend.py`), so the order per subject
survives a broken link. With
`jetstream: true` each record carries its own reply subject on one inbox subscription
and is delivered once its PubAck arrives; the batch waits for all of them together,
until `publish_timeout`. While disconnected, `submit()` fails fast with retryable
outcomes instead of letting nats-py buffer the messages. JetStream stores no reply
subject: a record's `reply-to` is not sent with `jetstream: true`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import ssl
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import urlsplit

import nats.errors
import nats.js.errors
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js.api import AckPolicy, ConsumerConfig, ConsumerInfo, DeliverPolicy

from adapters._nats_acks import AckFrontier
from adapters._nats_credentials import check_creds_file, check_seed_file
from adapters._nats_options import OPTIONS
from adapters._nats_record import (
    JetStreamAck,
    jetstream_ack,
    parse_header_block,
    publish_frame,
    to_publish,
    to_record,
)
from adapters._reconnect import ReconnectGate
from adapters._schemes import check_scheme
from adapters._tls import client_context, describe
from gateway.json.values import JSON
from gateway.observability.logs import fields
from gateway.ports import (
    CORRELATION_ATTRIBUTE,
    Answer,
    Confirmation,
    Delivery,
    EndOfInput,
    EndpointSettings,
    NotConnected,
    Opened,
    Outcome,
    ReplyTable,
    Settle,
    StreamPending,
    confirmed,
)
from gateway.protocols import NATS, profile
from gateway.record import NativeMessage

__all__ = ["NatsConsumer", "NatsOptions", "NatsProducer"]

_URIS = profile(NATS).endpoint.uris

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NatsOptions:
    servers: tuple[str, ...]
    subjects: tuple[str, ...]
    queuegroup: str
    stream: str | None
    durable: str | None
    jetstream: bool
    observe: bool
    max_in_flight: int
    ack_wait: float
    nak_delay: float
    pending_msgs_limit: int
    pending_bytes_limit: int
    connect_timeout: float
    reconnect_wait: float
    publish_timeout: float
    reconnect_max: float
    tls: ssl.SSLContext | None = None
    creds_file: str | None = None
    nkey_seed_file: str | None = None

    @classmethod
    def parse(cls, settings: EndpointSettings) -> NatsOptions:
        """Read the options (`adapters/_nats_options.py`); raises ValueError naming the
        bad one."""
        servers = tuple(s.strip() for s in settings.uri.split(",") if s.strip())
        schemes = {urlsplit(server).scheme for server in servers}
        for scheme in sorted(schemes):
            check_scheme(scheme, _URIS)
        secure_schemes = {s for s in schemes if _URIS.is_tls(s)}
        if secure_schemes and secure_schemes != schemes:
            raise ValueError("uri: mixes tls:// and nats:// servers; use tls:// for all")
        secure = bool(secure_schemes) or settings.tls is not None
        opts = OPTIONS.read(settings.options)
        creds_file = _text(opts, "creds_file")
        nkey_seed_file = _text(opts, "nkey_seed_file")
        # Read and checked as the client will sign with them (also by `xrgw validate`).
        if creds_file is not None:
            check_creds_file(creds_file)
        if nkey_seed_file is not None:
            check_seed_file(nkey_seed_file)
        raw_subjects = opts["subjectfilter"] or ()
        stream = _text(opts, "stream")
        return cls(
            servers=servers or ("nats://127.0.0.1:4222",),
            subjects=(raw_subjects,) if isinstance(raw_subjects, str) else tuple(
                cast(list[str], raw_subjects)),
            queuegroup=_text(opts, "queuegroup") or "",
            stream=stream,
            durable=_text(opts, "durable"),
            jetstream=cast(bool, opts["jetstream"]) or stream is not None,
            observe=cast(bool, opts["observe"]),
            max_in_flight=cast(int, opts["max_in_flight"]),
            ack_wait=cast(float, opts["ack_wait"]),
            nak_delay=cast(float, opts["nak_delay"]),
            pending_msgs_limit=cast(int, opts["pending_msgs_limit"]),
            pending_bytes_limit=cast(int, opts["pending_bytes_limit"]),
            connect_timeout=cast(float, opts["connect_timeout"]),
            reconnect_wait=cast(float, opts["reconnect_wait"]),
            publish_timeout=cast(float, opts["publish_timeout"]),
            reconnect_max=cast(float, opts["reconnect_max"]),
            tls=client_context(settings.tls) if secure else None,
            creds_file=creds_file,
            nkey_seed_file=nkey_seed_file,
        )


def _text(opts: Mapping[str, object], name: str) -> str | None:
    value = opts.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ValueError(f"{name}: expected a non-empty string, got {value!r}")
    return value


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class _Client(NatsClient):
    """nats-py client whose received headers keep repeated names (see _nats_record), that
    refuses a server not requiring TLS when TLS was asked for (nats-py upgrades only
    when the server's INFO says `tls_required`; without this check it would send the
    credentials in clear text to such a server, or to whoever rewrote its INFO), and
    that can say whether what was queued on one connection reached the server
    (`confirm`, the core producer's delivery)."""

    require_tls = False

    def __init__(self) -> None:
        super().__init__()
        #: Which connection this is: +1 whenever nats-py starts reconnecting. Bytes
        #: queued on one connection and a PONG on another prove nothing about each other.
        self.connection = 0
        self._confirming: set[asyncio.Future[bool]] = set()
        #: A producer's client drops what it had queued when the connection breaks:
        #: nats-py would write it on the next connection, after the route has already
        #: been told those batches failed and resends them -- a stale copy arriving
        #: ahead of messages submitted since, out of order. Called after dropping.
        self.on_lost: Callable[[], None] | None = None

    async def confirm(self, connection: int, timeout: float) -> str | None:
        """None when the server answered a PING written behind everything queued so far,
        on connection `connection` (`self.connection` read before queueing); else why
        not. nats-py's `flush()` cannot say this: while it reconnects (its read and
        flusher tasks cancelled) it returns at once without a round trip, after a
        reconnect the old PINGs' futures are dropped unanswered, and a PONG resolves
        whatever future is oldest -- so a batch written into a connection that then
        broke could count as delivered."""
        if connection != self.connection or not self.is_connected:
            return "the connection broke before the flush"
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._confirming.add(future)
        try:
            await self._send_ping(future)
            done, _ = await asyncio.wait([future], timeout=timeout)
        finally:
            self._confirming.discard(future)
        if not done:
            return f"no PONG in {timeout:g}s"
        if not future.result() or connection != self.connection:
            return "the connection broke before the PONG"
        return None

    def _lose_connection(self) -> None:
        """The connection is gone: PINGs written to it will never be answered."""
        self.connection += 1
        confirming, self._confirming = self._confirming, set()
        for future in confirming:
            if not future.done():
                future.set_result(False)
        if self.on_lost is not None:
            # SUBs are replayed by nats-py from its subscription table, so only
            # publishes are lost here -- and the route sends those again.
            self._pending = []
            self._pending_data_size = 0
            self.on_lost()

    async def _attempt_reconnect(self) -> None:
        self._lose_connection()
        await super()._attempt_reconnect()

    async def _close(self, status: int, do_cbs: bool = True) -> None:
        self._lose_connection()
        await super()._close(status, do_cbs)

    async def _process_pong(self) -> None:
        # nats-py sets the result of the oldest waiting future, which raises
        # InvalidStateError (and ends its read loop) when `flush()` cancelled that future
        # after a timeout. The future still holds the place of its PING, so it is popped
        # and skipped rather than removed early: the PONGs stay matched to their PINGs.
        if self._pongs:
            future = self._pongs.pop(0)
            if not future.done():
                future.set_result(True)
            self._pongs_received += 1
            self._pings_outstanding = 0

    async def _process_info(
        self, info: dict[str, Any], initial_connection: bool = False
    ) -> None:
        if initial_connection and self.require_tls and not info.get("tls_required"):
            raise nats.errors.Error(
                "nats: the server does not offer TLS, which the endpoint requires "
                "(tls:// or a tls block); refusing to connect in clear text")
        await super()._process_info(info, initial_connection)

    @staticmethod
    def _parse_header_lines(raw: bytes) -> dict[str, str]:
        return parse_header_block(raw)

    async def _send_ping(self, future: asyncio.Future[Any] | None = None) -> None:
        # nats-py (2.16) writes PING straight to the socket, ahead of the publishes still
        # in its pending buffer (its flusher task writes those later), so the PONG that
        # `flush()` waits for would confirm nothing about them: the core producer's
        # delivered-after-flush needs them written first, as the flusher would.
        transport = self._transport
        if self._pending and transport is not None and self.is_connected:
            transport.writelines(self._pending[:])
            self._pending = []
            self._pending_data_size = 0
        await super()._send_ping(future)

    async def send_frames(self, frames: list[bytes], size: int) -> None:
        """Queue ready-made PUB/HPUB frames (`publish_frame`) as nats-py's `publish`
        queues one: the same state checks, buffer limit and flusher wake-up, once per
        batch. Raises what `publish` raises for the connection."""
        if self.is_closed:
            raise nats.errors.ConnectionClosedError
        if self.is_draining_pubs:
            raise nats.errors.ConnectionDrainingError
        if not self.is_connected and (self._max_pending_size <= 0
                                      or size + self._pending_data_size > self._max_pending_size):
            raise nats.errors.OutboundBufferLimitError
        self.stats["out_msgs"] += len(frames)
        self.stats["out_bytes"] += size
        self._pending.extend(frames)
        self._pending_data_size += size
        if 0 < self._max_pending_size < self._pending_data_size:
            await self._flush_pending(force_flush=True)
        if self._flush_queue is not None and self._flush_queue.empty():
            await self._flush_pending()


_Callback = Callable[[], Awaitable[None]]


async def _open(
    settings: EndpointSettings,
    opts: NatsOptions,
    error_cb: Callable[[Exception], Awaitable[None]],
    changed_cb: _Callback,
) -> _Client:
    """A connected client that reconnects on its own; raises NotConnected."""
    client = _Client()
    extra: dict[str, Any] = {}
    if settings.username:
        extra["user"] = settings.username
        extra["password"] = settings.password or ""
    elif settings.password:
        extra["token"] = settings.password
    if opts.creds_file:
        extra["user_credentials"] = opts.creds_file
    if opts.nkey_seed_file:
        extra["nkeys_seed"] = opts.nkey_seed_file
    if opts.tls is not None:
        client.require_tls = True
        extra["tls"] = opts.tls
        extra["tls_hostname"] = urlsplit(opts.servers[0]).hostname
    # nats-py retries a refused first connect until the timeout; what the server said
    # (e.g. "authorization violation") is only passed to the error callback.
    errors: list[Exception] = []

    async def first_errors(exc: Exception) -> None:
        # Keep the telling one: a refused login or certificate is followed by broken
        # pipes. One only: reconnects may go on for long.
        if not client.is_connected and (
            not errors or not _is_telling(errors[0]) or _is_telling(exc)
        ):
            errors[:] = [exc]
        await error_cb(exc)

    try:
        # nats-py retries the first connect forever when reconnecting is unlimited;
        # the timeout turns that into one bounded attempt.
        async with asyncio.timeout(opts.connect_timeout):
            await client.connect(
                list(opts.servers),
                name=settings.client_id or "xrgw",
                error_cb=first_errors,
                disconnected_cb=changed_cb,
                reconnected_cb=changed_cb,
                closed_cb=changed_cb,
                allow_reconnect=True,
                max_reconnect_attempts=-1,
                reconnect_time_wait=opts.reconnect_wait,  # type: ignore[arg-type]
                connect_timeout=max(1, round(opts.connect_timeout)),
                **extra,
            )
    except (TimeoutError, OSError, nats.errors.Error) as exc:
        with contextlib.suppress(Exception):
            await client.close()
        # TLS 1.3: a refused client certificate arrives after our side of the handshake,
        # so connect() itself may fail with a broken pipe while the callback got the alert.
        telling = errors and (isinstance(exc, TimeoutError) or _is_telling(errors[0]))
        cause = errors[-1] if telling else exc
        raise NotConnected(
            f"cannot connect to {', '.join(_shown(s) for s in opts.servers)}: {_why(cause)}"
        ) from None
    return client


def _shown(server: str) -> str:
    """A server URL without its `user:password@` / `token@` part (errors are logged)."""
    scheme, sep, rest = server.rpartition("://")
    return f"{scheme}{sep}{rest.rpartition('@')[2]}"


def _is_auth_error(exc: BaseException) -> bool:
    return isinstance(exc, nats.errors.AuthorizationError) or (
        "authorization violation" in str(exc).lower())


def _is_telling(exc: BaseException) -> bool:
    """Says why the server refused us (not just that the connection broke)."""
    return _is_auth_error(exc) or isinstance(exc, ssl.SSLError)


def _why(exc: BaseException) -> str:
    text = str(exc).strip().strip("'\"")
    if _is_auth_error(exc):
        return "authorization violation (check the endpoint's credentials)"
    if isinstance(exc, ssl.SSLError) or "ssl" in text.lower():
        return describe(exc)
    if isinstance(exc, nats.errors.Error) and text:
        return text
    return repr(exc)


async def _await_reconnect(client: _Client, timeout: float) -> None:
    """Wait for nats-py's own reconnect; raises NotConnected when it does not happen."""
    deadline = time.monotonic() + timeout
    while not client.is_connected:
        if client.is_closed or time.monotonic() >= deadline:
            raise NotConnected("not connected (nats-py is reconnecting)")
        await asyncio.sleep(0.05)


# ====================================================================== consumer


class NatsConsumer:
    """Core subscriptions (`subjects`) or a JetStream durable push consumer (`stream`)."""

    def __init__(self, settings: EndpointSettings) -> None:
        self._settings = settings
        self._opts = opts = NatsOptions.parse(settings)
        self.jetstream = opts.stream is not None
        # Shadow mode on JetStream: an ephemeral consumer with ack policy none; nothing
        # is acknowledged (or nacked) to the server.
        self.ephemeral = self.jetstream and opts.observe
        if opts.jetstream and not self.jetstream:
            raise ValueError("stream: a JetStream consumer needs the stream to consume")
        if not self.jetstream and not opts.subjects:
            raise ValueError("subjects: a core consumer needs at least one subject")
        self.durable = opts.durable or (
            "xrgw-"
            + hashlib.sha256(
                "\n".join((opts.stream or "", *sorted(opts.subjects))).encode()
            ).hexdigest()[:16]
        )
        self._client: _Client | None = None
        self._subs: list[Subscription] = []
        self._buffer: deque[Msg] = deque()
        self._unsettled = 0
        self._changed = asyncio.Event()  # buffer, settlement or connection changed
        self._space = asyncio.Event()  # the buffer has room again
        self._closed = False
        self._dropped = 0
        self._dropping = False
        # AckPolicy.ALL durables: which message's +ACK covers the settled prefix.
        self._acks: AckFrontier[Msg] | None = None
        self._ack_scheduled = False
        self._ack_tasks: set[asyncio.Task[None]] = set()

    @property
    def connected(self) -> bool:
        return self._client is not None and self._client.is_connected

    @property
    def unsettled(self) -> int:
        return self._unsettled

    @property
    def buffered(self) -> int:
        """Messages received and not yet handed out by `read_batch`."""
        return len(self._buffer)

    @property
    def dropped(self) -> int:
        """Messages nats-py dropped because its pending limits were reached (core)."""
        return self._dropped

    async def connect(self) -> None:
        if self._closed:
            raise EndOfInput("consumer closed")
        client = self._client
        if client is not None and not client.is_closed:
            await _await_reconnect(client, self._opts.connect_timeout)
            return
        await self._drop_client()
        client = await _open(self._settings, self._opts, self._on_error, self._on_change)
        self._client = client
        try:
            if self.jetstream:
                await self._subscribe_jetstream(client)
            else:
                await self._subscribe_core(client)
        except (nats.errors.Error, TimeoutError) as exc:
            await self._drop_client()
            raise NotConnected(f"cannot subscribe: {exc!r}") from exc
        self._changed.set()

    async def read_batch(self, limit: int) -> list[Delivery]:
        while True:
            if self._closed:
                raise EndOfInput("consumer closed")
            count = min(limit, self._opts.max_in_flight - self._unsettled, len(self._buffer))
            if count > 0:
                return self._take(count)
            # While nats-py reconnects the subscriptions come back by themselves: wait.
            if self._client is None or self._client.is_closed:
                raise NotConnected("not connected")
            self._changed.clear()
            await self._changed.wait()

    async def aclose(self) -> None:
        self._closed = True
        if self.jetstream and not self.ephemeral:
            # Buffered but never handed out: ask for redelivery now, not after ack_wait.
            for msg in self._buffer:
                with contextlib.suppress(Exception):
                    await msg.nak()
        self._buffer.clear()
        await self._drop_client()

    async def backlog(self) -> list[StreamPending]:
        stream = self._opts.stream
        if stream is None or self.ephemeral:
            return []  # core NATS keeps nothing for a subscriber; an observer owes nothing
        client = self._client
        if client is None or not client.is_connected:
            raise NotConnected("not connected")
        info = await client.jetstream(timeout=self._opts.connect_timeout).consumer_info(
            stream, self.durable)
        waiting = (info.num_pending or 0) + (info.num_ack_pending or 0)
        return [StreamPending(stream, self.durable, waiting)]

    # -- internals ---------------------------------------------------------------------
    async def _subscribe_core(self, client: _Client) -> None:
        for subject in self._opts.subjects:
            sub = await client.subscribe(
                subject,
                queue=self._opts.queuegroup,
                cb=self._on_message,
                pending_msgs_limit=self._opts.pending_msgs_limit,
                pending_bytes_limit=self._opts.pending_bytes_limit,
            )
            self._subs.append(sub)
        # One round trip so that the subscriptions are in place when connect() returns.
        await client.flush(timeout=max(1, round(self._opts.connect_timeout)))

    async def _subscribe_jetstream(self, client: _Client) -> None:
        opts = self._opts
        assert opts.stream is not None
        js = client.jetstream(timeout=opts.connect_timeout)
        if self.ephemeral:
            await self._subscribe_ephemeral(client, js)
            return
        try:
            info = await js.consumer_info(opts.stream, self.durable)
        except nats.js.errors.NotFoundError:
            info = await js.add_consumer(opts.stream, config=self._consumer_config(client))
            self._check_filter(info)
        config = info.config
        if not config.deliver_subject:
            raise nats.errors.Error(f"durable {self.durable!r} is a pull consumer")
        if config.max_ack_pending != opts.max_in_flight:
            log.warning(
                "NATS durable %r has max_ack_pending=%s, not max_in_flight=%s",
                self.durable,
                config.max_ack_pending,
                opts.max_in_flight,
            )
        # The durable's own policy decides (one made by an older xrgw acks explicitly).
        ack_all = config.ack_policy == AckPolicy.ALL
        if ack_all and opts.queuegroup:
            raise nats.errors.Error(
                f"durable {self.durable!r} acknowledges with ack policy all, which a queue "
                "group cannot share (one member's ack would cover another's messages): "
                "delete it to have it made again with explicit acks, or name another "
                "durable")
        self._acks = AckFrontier() if ack_all else None
        psub = await js.subscribe_bind(
            stream=opts.stream,
            config=config,
            consumer=info.name,
            cb=self._on_message,
            manual_ack=True,
            pending_msgs_limit=opts.pending_msgs_limit,
            pending_bytes_limit=opts.pending_bytes_limit,
        )
        self._subs.append(psub._sub)

    async def _subscribe_ephemeral(self, client: _Client, js: Any) -> None:
        """Shadow mode: an ephemeral push consumer of the stream's new messages that
        acknowledges nothing; the server removes it when the gateway goes."""
        opts = self._opts
        assert opts.stream is not None
        subjects = list(opts.subjects)
        config = ConsumerConfig(
            deliver_subject=client.new_inbox(),
            ack_policy=AckPolicy.NONE,
            deliver_policy=DeliverPolicy.NEW,
            filter_subject=subjects[0] if len(subjects) == 1 else None,
            filter_subjects=subjects if len(subjects) > 1 else None,
            inactive_threshold=60.0,
        )
        info = await js.add_consumer(opts.stream, config=config)
        self._check_filter(info)
        psub = await js.subscribe_bind(
            stream=opts.stream, config=info.config, consumer=info.name,
            cb=self._on_message, manual_ack=True,
            pending_msgs_limit=opts.pending_msgs_limit,
            pending_bytes_limit=opts.pending_bytes_limit)
        self._subs.append(psub._sub)

    def _consumer_config(self, client: _Client) -> ConsumerConfig:
        opts = self._opts
        subjects = list(opts.subjects)
        return ConsumerConfig(
            durable_name=self.durable,
            deliver_subject=client.new_inbox(),
            deliver_group=opts.queuegroup or None,
            # One +ACK per settled burst (adapters/_nats_acks.py). A queue group shares
            # the durable: one member's ack would cover what another still holds.
            ack_policy=AckPolicy.EXPLICIT if opts.queuegroup else AckPolicy.ALL,
            max_ack_pending=opts.max_in_flight,
            ack_wait=opts.ack_wait,
            filter_subject=subjects[0] if len(subjects) == 1 else None,
            filter_subjects=subjects if len(subjects) > 1 else None,
        )

    def _check_filter(self, info: ConsumerInfo) -> None:
        # A server before 2.10 ignores filter_subjects and would deliver the whole stream.
        if len(self._opts.subjects) > 1 and not info.config.filter_subjects:
            raise nats.errors.Error("several subjects need nats-server 2.10+ (filter_subjects)")

    def _take(self, count: int) -> list[Delivery]:
        """The next `count` buffered messages as deliveries, without awaiting anything."""
        buffer = self._buffer
        msgs = [buffer.popleft() for _ in range(count)]
        self._unsettled += count
        self._space.set()
        received_at = _now()  # one clock read per batch: they arrived together
        jetstream = self.jetstream
        acks = self._acks
        if acks is not None:
            out = []
            for msg in msgs:
                ack = jetstream_ack(msg.reply)  # read once: the record's and the ack's
                out.append(Delivery(to_record(msg, True, received_at, ack),
                                    self._ack_all_settler(msg, ack, acks)))
            return out
        return [
            Delivery(to_record(msg, jetstream, received_at), self._settler(msg),
                     None if jetstream or not msg.reply else self._answerer(msg.reply))
            for msg in msgs
        ]

    def _answerer(self, reply_to: str) -> Answer:
        """Request-reply: publish the answer to the request's reply subject. No answer ->
        nothing is sent: the requester's own timeout tells it (NATS has no status to
        send for "the service did not answer")."""
        async def answer(reply: NativeMessage | None, why: str) -> None:
            client = self._client
            if reply is None or client is None:
                return
            args = to_publish(reply.replace_fields({**reply.fields, "subject": reply_to}))
            await client.publish(args.subject, args.payload, headers=args.headers)

        return answer

    def _settler(self, msg: Msg) -> Settle:
        async def settle(ack: bool, reason: str, retry: bool) -> None:
            self._unsettled -= 1
            self._changed.set()
            if not self.jetstream or self.ephemeral:
                return  # core NATS / an observer: nothing to tell the server
            try:
                if ack:
                    await msg.ack()
                elif retry:
                    await msg.nak(delay=self._opts.nak_delay or None)
                else:
                    await msg.term()
            except nats.errors.Error as exc:
                # The server redelivers after ack_wait: at-least-once still holds.
                log.debug("NATS settlement not sent (%r); redelivery after ack_wait", exc)

        return settle

    def _ack_all_settler(self, msg: Msg, ack: JetStreamAck | None,
                         acks: AckFrontier[Msg]) -> Settle:
        """Settlement under AckPolicy.ALL: an ack (or a dead-lettered message) only moves
        the frontier; the +ACK goes once the settling burst yields. A retry is a -NAK of
        this message, which keeps its place until its redelivery settles."""
        if ack is None:
            return self._settler(msg)  # no position to order by: settle it on its own
        slot = acks.track(ack.sequence, ack.delivery, msg)

        async def settle(ack: bool, reason: str, retry: bool) -> None:
            self._unsettled -= 1
            self._changed.set()
            if not ack and retry:
                await self._nak(msg)
            elif acks.settle(slot) and not self._ack_scheduled:
                self._ack_scheduled = True
                asyncio.get_running_loop().call_soon(self._send_ack, acks)

        return settle

    def _send_ack(self, acks: AckFrontier[Msg]) -> None:
        self._ack_scheduled = False
        msg = acks.take()
        if msg is None or acks is not self._acks:
            return  # nothing new, or the connection went since
        task = asyncio.ensure_future(self._ack(msg))
        self._ack_tasks.add(task)
        task.add_done_callback(self._ack_tasks.discard)

    async def _ack(self, msg: Msg) -> None:
        try:
            await msg.ack()
        except nats.errors.Error as exc:
            # The server redelivers after ack_wait: at-least-once still holds.
            log.debug("NATS ack not sent (%r); redelivery after ack_wait", exc)

    async def _nak(self, msg: Msg) -> None:
        try:
            await msg.nak(delay=self._opts.nak_delay or None)
        except nats.errors.Error as exc:
            log.debug("NATS nak not sent (%r); redelivery after ack_wait", exc)

    async def _on_message(self, msg: Msg) -> None:
        # Runs in nats-py's per-subscription task: waiting here leaves the next messages
        # in nats-py's bounded pending queue (which drops when full, see `dropped`).
        while len(self._buffer) >= self._opts.max_in_flight and not self._closed:
            self._space.clear()
            await self._space.wait()
        if self._closed:
            return
        if self._dropping:
            self._dropping = False
            log.warning(
                "NATS slow consumer episode over; %d messages dropped so far", self._dropped
            )
        self._buffer.append(msg)
        self._changed.set()

    async def _on_error(self, exc: Exception) -> None:
        if isinstance(exc, nats.errors.SlowConsumerError):
            self._dropped += 1
            if not self._dropping:
                self._dropping = True
                log.warning("NATS slow consumer: dropping messages on %s", exc.subject)
            return
        log.debug("NATS client error", extra=fields(error=exc))

    async def _on_change(self) -> None:
        self._changed.set()

    async def _drop_client(self) -> None:
        client, self._client = self._client, None
        self._subs = []
        acks, self._acks = self._acks, None
        last = None
        if acks is not None:
            last = acks.take()  # settled, its +ACK not sent yet: send it before closing
            acks.forget()  # the server redelivers whatever else was not acknowledged
        self._space.set()  # release a callback waiting for room
        if client is not None:
            if last is not None:
                await self._ack(last)
            if self._ack_tasks:
                await asyncio.gather(*self._ack_tasks, return_exceptions=True)
            with contextlib.suppress(Exception):
                await client.flush(timeout=1)  # settlements still in nats-py's buffer
            with contextlib.suppress(Exception):
                await client.close()
        self._changed.set()


# ====================================================================== producer

#: JetStream publishes awaiting their PubAck, per producer; `submit` waits (up to
#: `publish_timeout`) for room beyond that. The engine's own window usually binds first;
#: this keeps a runaway caller from growing the reply table without bound.
_MAX_UNACKED = 16_384

_NO_PUBACK = Outcome.failed("no PubAck in time")


class NatsProducer:
    """Publishes batches; a batch is delivered after one flush round trip (core) or when
    its PubAcks arrived (JetStream). `submit` returns once the batch is in nats-py's
    buffer, so the next batch follows on the wire while this one is being confirmed."""

    def __init__(self, settings: EndpointSettings) -> None:
        self._settings = settings
        self._opts = NatsOptions.parse(settings)
        self._client: _Client | None = None
        self._pub_acks: _PubAcks | None = None  # JetStream: the client's reply inbox
        self._gate = ReconnectGate(self._opts.reconnect_max)
        # Request-reply: answers come to `<inbox>.<token>` on one wildcard subscription.
        self.replies = ReplyTable()
        self._inbox: str | None = None
        #: The connection (`_Client.connection`) that left a batch without a PONG; a new
        #: connection (nats-py's reconnect ends with a PING/PONG) or a confirmed batch
        #: clears it.
        self._unconfirmed: int | None = None

    @property
    def connected(self) -> bool:
        """Connected, and the server answered the last flush: a connection that takes
        writes but confirms nothing (a partition, a hung server) is not ready."""
        client = self._client
        return (client is not None and client.is_connected
                and self._unconfirmed != client.connection)

    @property
    def max_message_bytes(self) -> int | None:
        """The server's `max_payload` (from its INFO; headers count against it too)."""
        client = self._client
        return None if client is None else client.max_payload

    async def connect(self) -> None:
        await self._gate.connect(self._connect)

    async def _connect(self) -> None:
        client = self._client
        if client is not None and not client.is_closed:
            await _await_reconnect(client, self._opts.connect_timeout)
            return
        await self._drop_client("connection closed")
        client = await _open(self._settings, self._opts, self._on_error, _nothing)
        client.on_lost = self._connection_lost
        if self._opts.jetstream:
            try:
                self._pub_acks = await _PubAcks.start(client)
            except (nats.errors.Error, TimeoutError) as exc:
                with contextlib.suppress(Exception):
                    await client.close()
                raise NotConnected(f"cannot subscribe to the PubAck inbox: {exc!r}") from exc
        self._client = client

    async def submit(self, messages: Sequence[NativeMessage]) -> Confirmation:
        client = await self._ready()
        if isinstance(client, str):
            return confirmed([Outcome.failed(client) for _ in messages])
        if self._opts.jetstream:
            acks = self._pub_acks
            assert acks is not None  # subscribed before the client was kept
            return await self._submit_jetstream(client, acks, messages)
        return await self._submit_core(client, messages)

    async def _ready(self) -> _Client | str:
        """The connected client, or at once why there is none."""
        if self._client is None or self._client.is_closed:
            reason = await self._gate.try_reconnect(
                lambda: self._client is not None and not self._client.is_closed, self._connect
            )
            if reason is not None:
                return reason
        client = self._client
        assert client is not None
        if not client.is_connected:
            # nats-py would buffer and send later; the engine wants an answer now.
            return "not connected (nats-py is reconnecting)"
        return client

    async def _submit_core(
        self, client: _Client, messages: Sequence[NativeMessage]
    ) -> Confirmation:
        connection = client.connection  # before queueing: the frames may go out at once
        outcomes = await _publish_all(client, messages, lambda _: "")
        if all(o is not None for o in outcomes):
            return confirmed(cast(list[Outcome], outcomes))
        # One PING for the whole batch, sent behind its publishes (see _Client._send_ping).
        return asyncio.create_task(self._flushed(client, connection, outcomes))

    async def _flushed(self, client: _Client, connection: int,
                       outcomes: list[Outcome | None]) -> list[Outcome]:
        """The batch's outcomes once the server confirmed it on the connection it was
        queued on; if that connection broke first, or the PONG did not come, the whole
        batch is retryable (sent again: at-least-once, duplicates at most a window)."""
        why = await client.confirm(connection, self._opts.publish_timeout)
        if why is None:
            if self._unconfirmed is not None:
                self._unconfirmed = None
                log.info("NATS server %s confirms publishes again",
                         ", ".join(_shown(s) for s in self._opts.servers))
            return [o if o is not None else Outcome.ok() for o in outcomes]
        if why.startswith("no PONG") and connection == client.connection:
            # A connection that holds a PING this long is as good as dead (a partition,
            # a hung server); nats-py would notice only after two idle PINGs two minutes
            # apart. Reconnecting fails every batch still waiting on it, at once.
            self._suspect(connection, why)
            with contextlib.suppress(Exception):
                await client.force_reconnect()
        failed = Outcome.failed(f"not confirmed by the server: {why}")
        return [o if o is not None else failed for o in outcomes]

    def _connection_lost(self) -> None:
        """What waits for an answer on the broken connection gets none: fail it now."""
        if self._pub_acks is not None:
            self._pub_acks.abandon("the connection broke before the PubAck")

    def _suspect(self, connection: int, why: str) -> None:
        """Not ready until reconnected or a batch is confirmed; logged once per episode."""
        if self._unconfirmed is None:
            log.warning("NATS server %s does not confirm publishes (%s); reconnecting",
                        ", ".join(_shown(s) for s in self._opts.servers), why)
        self._unconfirmed = connection

    async def _submit_jetstream(
        self, client: _Client, acks: _PubAcks, messages: Sequence[NativeMessage]
    ) -> Confirmation:
        timeout = self._opts.publish_timeout
        if not await acks.room(timeout):
            return confirmed([Outcome.failed("too many PubAcks outstanding") for _ in messages])
        batch = _Batch(acks, len(messages), asyncio.get_running_loop().time() + timeout)
        unsent = await _publish_all(client, messages, batch.expect)
        for index, outcome in enumerate(unsent):
            if outcome is not None:
                batch.unsent(index, outcome)
        return asyncio.create_task(batch.confirmed())

    async def request(self, messages: Sequence[NativeMessage], timeout: float) -> Confirmation:
        """Core NATS request-reply: each message is published with a reply subject of
        the gateway's inbox whose last token correlates the answer; the Confirmation
        resolves when every answer came or `timeout` passed. A binary CloudEvent also
        carries the token as its `correlationid` extension. "No responders" (the server
        says no one subscribes) fails the message retryably."""
        client = await self._ready()
        if isinstance(client, str):
            return confirmed([Outcome.failed(client) for _ in messages])
        inbox = await self._reply_inbox(client)
        if inbox is None:
            return confirmed([Outcome.failed("cannot subscribe to the reply inbox")
                              for _ in messages])
        waiting = [self.replies.open() for _ in messages]
        tokens = [token for token, _ in waiting]
        # The same batched publish as `submit`, each with its token's reply subject.
        unsent = await _publish_all(
            client, [_correlated(r, t) for r, t in zip(messages, tokens, strict=True)],
            lambda index: inbox + tokens[index])
        for token, outcome in zip(tokens, unsent, strict=True):
            if outcome is not None:
                self.replies.refuse(token, outcome)
        opened: list[Opened] = list(waiting)
        return asyncio.create_task(self.replies.collect(opened, timeout))

    async def _reply_inbox(self, client: _Client) -> str | None:
        if self._inbox is None:
            inbox = f"_INBOX.xrgw.{client.new_inbox().rpartition('.')[2]}."
            try:
                await client.subscribe(inbox + "*", cb=self._on_answer)
            except (nats.errors.Error, TimeoutError):
                return None
            self._inbox = inbox
        return self._inbox

    async def _on_answer(self, msg: Msg) -> None:
        token = msg.subject.rpartition(".")[2]
        if msg.headers and msg.headers.get("Status") == "503" and not msg.data:
            self.replies.refuse(token, Outcome.failed("no responders"))
            return
        self.replies.resolve(token, to_record(msg, False, _now()))

    async def _on_error(self, exc: Exception) -> None:
        log.debug("NATS client error", extra=fields(error=exc))

    async def _drop_client(self, reason: str) -> None:
        client, self._client = self._client, None
        if self._inbox is not None:
            self._inbox = None  # subscribed on the old connection
            self.replies.abandon(reason)
        acks, self._pub_acks = self._pub_acks, None
        if acks is not None:
            acks.abandon(reason)  # their PubAcks went to the old connection's inbox
        if client is not None:
            with contextlib.suppress(Exception):
                await client.close()

    async def aclose(self) -> None:
        await self._drop_client("producer closed")


def _correlated(record: NativeMessage, token: str) -> NativeMessage:
    """`record` with the `correlationid` extension when it is a binary CloudEvent."""
    pairs = record.pairs("headers")
    if not any(name.lower() == "ce-specversion" for name, _ in pairs):
        return record
    headers: list[JSON] = [{"name": n, "value": v} for n, v in pairs]
    headers.append({"name": f"ce-{CORRELATION_ATTRIBUTE}", "value": token})
    return record.replace_fields({**record.fields, "headers": headers})


async def _nothing() -> None:
    return None


async def _publish_all(
    client: _Client,
    messages: Sequence[NativeMessage],
    reply_of: Callable[[int], str],
) -> list[Outcome | None]:
    """Publish in order into nats-py's buffer (no awaiting the network unless that buffer
    is full): the failure of each message that was not sent, None for the sent ones.
    `reply_of(i)` is the reply subject of message i ("": the record's own)."""
    outcomes: list[Outcome | None] = [None] * len(messages)
    frames: list[bytes] = []
    sent: list[int] = []
    size = 0
    max_payload = client.max_payload
    for index, record in enumerate(messages):
        try:
            args = to_publish(record)
            if len(args.payload) > max_payload:
                outcomes[index] = Outcome.oversize(len(args.payload), max_payload,
                                                   "payload (server max_payload)")
                continue
            frame = publish_frame(args, reply_of(index))
        except ValueError as exc:
            outcomes[index] = Outcome.failed(str(exc), retryable=False)
            continue
        if len(frame) > max_payload:
            # The server counts an HPUB's headers against max_payload too: the frame
            # less its protocol line and final CRLF (only measured when it could be over).
            total = len(frame) - frame.index(b"\r\n") - 4
            if total > max_payload:
                outcomes[index] = Outcome.oversize(total, max_payload,
                                                   "headers and payload (server max_payload)")
                continue
        frames.append(frame)
        sent.append(index)
        size += len(args.payload)
    if frames:
        try:
            await client.send_frames(frames, size)
        except nats.errors.Error as exc:
            # The connection, not the messages: none of the batch was queued.
            outcome = _failure(exc)
            for index in sent:
                outcomes[index] = outcome
    return outcomes


class _PubAcks:
    """The PubAcks of a client's JetStream publishes: one wildcard inbox subscription,
    a reply subject per message (`<inbox>.<n>`), answers routed to the message's batch.
    (nats-py's `publish_async` does the same, but with a future, a done callback and a
    wait_for task per message, and a new inbox per `jetstream()` context.)"""

    def __init__(self, prefix: str) -> None:
        self._prefix = prefix
        self._serial = 0
        self._waiting: dict[str, tuple[_Batch, int]] = {}
        self._room = asyncio.Event()
        self._room.set()

    @classmethod
    async def start(cls, client: _Client) -> _PubAcks:
        acks = cls(client.new_inbox() + ".")
        await client.subscribe(acks._prefix + "*", cb=acks._on_reply)
        return acks

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    async def room(self, timeout: float) -> bool:
        """Wait until fewer than _MAX_UNACKED are waiting; False after `timeout`."""
        if len(self._waiting) < _MAX_UNACKED:
            return True
        try:
            async with asyncio.timeout(timeout):
                while len(self._waiting) >= _MAX_UNACKED:
                    self._room.clear()
                    await self._room.wait()
        except TimeoutError:
            return False
        return True

    def expect(self, batch: _Batch, index: int) -> str:
        """A new reply subject whose answer settles message `index` of `batch`."""
        self._serial += 1
        reply = f"{self._prefix}{self._serial}"
        self._waiting[reply] = (batch, index)
        return reply

    def forget(self, reply: str) -> None:
        """No answer is awaited on `reply` any more (not sent, or timed out)."""
        if self._waiting.pop(reply, None) is not None and len(self._waiting) < _MAX_UNACKED:
            self._room.set()

    def abandon(self, reason: str) -> None:
        """Fail every publish still waiting: its answer can no longer arrive."""
        waiting, self._waiting = self._waiting, {}
        failed = Outcome.failed(reason)
        for batch, index in waiting.values():
            batch.settle(index, failed)
        self._room.set()

    async def _on_reply(self, msg: Msg) -> None:
        entry = self._waiting.pop(msg.subject, None)
        if entry is None:
            return  # its batch stopped waiting (timeout, closed)
        if len(self._waiting) < _MAX_UNACKED:
            self._room.set()
        batch, index = entry
        batch.settle(index, _pub_ack_outcome(msg))


class _Batch:
    """One JetStream `submit`: its outcomes fill in as the PubAcks arrive; `confirmed()`
    waits for the last one, or until the deadline (one timer per batch)."""

    def __init__(self, acks: _PubAcks, size: int, deadline: float) -> None:
        self._acks = acks
        self._deadline = deadline
        self.outcomes: list[Outcome | None] = [None] * size
        self._replies: list[str] = [""] * size
        self._remaining = size
        self._done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def expect(self, index: int) -> str:
        reply = self._replies[index] = self._acks.expect(self, index)
        return reply

    def unsent(self, index: int, outcome: Outcome) -> None:
        """Message `index` was not sent: no PubAck to wait for."""
        self._acks.forget(self._replies[index])
        self.settle(index, outcome)

    def settle(self, index: int, outcome: Outcome) -> None:
        if self.outcomes[index] is None:
            self.outcomes[index] = outcome
            self._count_down()

    def _count_down(self) -> None:
        self._remaining -= 1
        if self._remaining == 0 and not self._done.done():
            self._done.set_result(None)

    async def confirmed(self) -> list[Outcome]:
        if self._remaining:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout_at(self._deadline):
                    await self._done
        for index, outcome in enumerate(self.outcomes):
            if outcome is None:
                self._acks.forget(self._replies[index])
        return [o if o is not None else _NO_PUBACK for o in self.outcomes]


#: JetStream's API error "message size exceeds maximum allowed" (JSStreamMessageExceedsMaximumErr).
_JS_MESSAGE_TOO_LARGE = 10054


def _pub_ack_outcome(msg: Msg) -> Outcome:
    """The answer of JetStream to one publish: a PubAck, an API error, or "no responders"
    (no stream takes the subject)."""
    if msg.headers and msg.headers.get("Status") == "503":
        return _failure(nats.js.errors.NoStreamResponseError())
    try:
        answer = json.loads(msg.data)
    except (ValueError, UnicodeDecodeError):
        return Outcome.failed(f"unreadable PubAck {msg.data[:80]!r}")
    error = answer.get("error") if isinstance(answer, dict) else None
    if isinstance(error, dict):
        code = error.get("code")
        code = code if isinstance(code, int) else 0
        if error.get("err_code") == _JS_MESSAGE_TOO_LARGE:
            return Outcome.refused_as_too_large(
                f"JetStream refused: {error.get('description')} (the stream's max_msg_size)")
        return Outcome.failed(
            f"JetStream refused: {error.get('description')} (code {code}, err_code "
            f"{error.get('err_code')})",
            retryable=code >= 500,
        )
    return Outcome.ok()


def _failure(exc: nats.errors.Error) -> Outcome:
    """A per-message publish error as an Outcome: a verdict on the message or the link."""
    if isinstance(exc, nats.js.errors.NoStreamResponseError):
        # No stream takes the subject -- or JetStream is still starting after a restart.
        return Outcome.failed("no JetStream stream answered for the subject")
    if isinstance(exc, nats.errors.MaxPayloadError):
        return Outcome.refused_as_too_large(f"refused: {exc!r}")
    permanent = (
        nats.errors.BadSubjectError,
        nats.errors.BadHeaderError,
    )
    if isinstance(exc, permanent):
        return Outcome.failed(f"refused: {exc!r}", retryable=False)
    return Outcome.failed(repr(exc))
