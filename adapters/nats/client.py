"""The nats-py client as the adapter uses it: a subclass that overrides some of nats-py's
private members (header parsing, server INFO, PINGs, the pending buffer) to keep repeated
header names, refuse a server that drops TLS, and confirm what reached the server.
pyproject.toml bounds nats-py to the versions whose private members these are.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import nats.errors
import nats.js.errors
from nats.aio.client import Client as NatsClient

from adapters.nats.record import parse_header_block


class Client(NatsClient):
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

Callback = Callable[[], Awaitable[None]]
