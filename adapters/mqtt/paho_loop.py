"""Drive one paho-mqtt 2 client connection from the asyncio event loop, in batches.

Why not aiomqtt: it creates its paho client without manual acks and drops messages when
its queue is full. Why not paho's own thread (loop_start): callbacks would then run on
another thread, and back-pressure would mean blocking paho's network thread. Instead, as
aiomqtt does internally, paho's socket is watched with `loop.add_reader/add_writer` and
`loop_misc` runs once a second, so every paho callback runs on the event loop thread
and `pause_reading()` pushes back on the broker through TCP. Nothing crosses a thread
per message: a burst of received messages or of acks costs no hand-over at all.

Only `connect()` leaves the loop: paho's connect resolves and connects a blocking socket,
so it runs in a worker thread; the socket callbacks it fires are marshalled back.

Batched socket I/O (`_BatchingClient`). Left alone, paho reads a packet with three
recv() calls (type byte, length bytes, body), parses one packet per `loop_read()` when
it has no outgoing messages (a consumer), and sends every packet with its own send():
four system calls and one event-loop turn per message, and one TCP segment per PUBACK.
The client here reads whatever the socket has with one recv() into a buffer that paho
parses from, and collects paho's sends into one buffer written with one send() per
writable event. Received PUBLISH and PUBACK packets are decoded by the codec in
`adapters/mqtt/record.py` rather than paho's, which builds two property tables per
packet (unusual packets still go to paho). It also drops paho's per-packet debug
lines, which paho formats (properties and all) whenever a log callback is set; only
errors are kept.

Publish window. paho's own in-flight limit ignores the broker's Receive Maximum and
scans every outstanding message on each PUBACK; the link keeps its own window instead
(the Receive Maximum from CONNACK, MQTT 5; `_V311_WINDOW` on 3.1.1) and a backlog of
messages waiting for a slot, sent in order as PUBACKs free slots.

One `PahoLink` is one connection: after it is lost, make a new one (the broker keeps the
session; paho's in-memory state of the old connection is deliberately not reused).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Literal

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion, MQTTErrorCode, MQTTProtocolVersion
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode

from adapters.mqtt.record import (
    ACK_PROPERTIES,
    PublishArgs,
    UnusualPacket,
    ack_success,
    decode_publish,
)
from gateway.ports import NotConnected, Outcome
from gateway.ports.pending import PendingBatch
from gateway.ports.tls import describe, describe_text

__all__ = ["PahoLink", "new_properties"]

#: MQTT 5 reason codes that refuse a message for its size: 0x95 Packet too large.
_TOO_LARGE_CODES = frozenset({0x95})

#: Most bytes taken from the socket per readable event (then the loop gets a turn).
_READ_SIZE = 256 * 1024
#: Largest piece handed to one TLS send(): one record, and a retried write after
#: SSLWantWrite then starts with the same bytes, as OpenSSL requires.
_TLS_CHUNK = 16 * 1024
#: QoS>=1 publishes in flight on a 3.1.1 connection. 3.1.1 has no flow control to say
#: how many a broker takes; paho's default is 20. 100 keeps more than a round trip's
#: worth in flight without flooding a broker that caps in-flight messages per client.
_V311_WINDOW = 100
#: The Receive Maximum of an MQTT 5 server that announces none (MQTT 5.0, 3.2.2.3.3).
_V5_DEFAULT_WINDOW = 65535

_OK = MQTTErrorCode.MQTT_ERR_SUCCESS
#: Linux only; elsewhere the kernel's delayed ACKs stay as they are.
_TCP_QUICKACK: int | None = getattr(socket, "TCP_QUICKACK", None)


def new_properties(packet_type: int, **values: object) -> Properties:
    """paho MQTT 5 properties (the class is untyped and sets attributes dynamically)."""
    props = Properties(packet_type)  # type: ignore[no-untyped-call]
    for name, value in values.items():
        setattr(props, name, value)
    return props


def _ack_now(sock: Any) -> None:
    """Have the kernel acknowledge what was just read at once instead of delaying the ACK.

    Why: a broker that leaves Nagle's algorithm on (Mosquitto does unless
    `set_tcp_nodelay true`) holds its next PUBLISH until the previous one is ACKed, and
    this client sends its PUBACK -- the segment a delayed ACK would ride on -- only after
    the sinks confirmed. Each message then waited for the last one's sink round trip:
    4.3 ms median from publish to receipt at 500 msg/s (bench/bench_latency.py), 0.5 ms
    with this. The kernel clears the flag again by itself, so it is set after every read
    (one system call per read burst, not per message)."""
    if _TCP_QUICKACK is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, _TCP_QUICKACK, 1)


class _BatchingClient(paho.Client):
    """paho's client with buffered socket I/O, the common packets decoded by
    `adapters/mqtt/record.py`, and only its error log lines (see the module docstring).
    It overrides private paho methods: tests/unit/adapters/test_mqtt_wire.py fails if a
    paho release renames one, and checks the results against plain paho."""

    def __init__(self, **kwargs: Any) -> None:
        # Set before paho's __init__, which may already log or close a socket.
        self._rbuf = b""
        self._rpos = 0
        self._eof = False
        self._recv_error: OSError | None = None
        self._wbuf = bytearray()
        self.last_error: str | None = None
        super().__init__(**kwargs)

    # -- reading: one recv() per readable event, paho parses from the buffer -----------
    @property
    def buffered(self) -> int:
        """Received bytes paho has not taken yet."""
        return len(self._rbuf) - self._rpos

    def fill(self) -> None:
        """Append what the socket has now to the read buffer, without blocking: one
        recv() (TLS: record by record, as each recv() returns one record's data)."""
        sock = self._sock
        room = _READ_SIZE - self.buffered
        if sock is None or room <= 0 or self._eof or self._recv_error is not None:
            return
        chunks: list[bytes] = []
        try:
            while room > 0:
                data = sock.recv(room)
                if not data:
                    self._eof = True
                    break
                chunks.append(data)
                room -= len(data)
                if not isinstance(sock, ssl.SSLSocket):
                    break  # the kernel gave all it had (or `room`)
        except (BlockingIOError, ssl.SSLWantReadError):
            pass
        except ssl.SSLWantWriteError:
            self._call_socket_register_write()
        except OSError as exc:
            self._recv_error = exc  # raised to paho once the buffer is parsed
        if chunks:
            _ack_now(sock)
            rest = self._rbuf[self._rpos:]
            self._rbuf = chunks[0] if not rest and len(chunks) == 1 else b"".join((rest, *chunks))
            self._rpos = 0

    def _sock_recv(self, bufsize: int) -> bytes:
        if self._sock is None:
            raise ConnectionError("self._sock is None")
        start, size = self._rpos, len(self._rbuf)
        if start < size:
            end = min(start + bufsize, size)
            self._rpos = end
            return self._rbuf[start:end]
        if self._recv_error is not None:
            raise self._recv_error
        if self._eof:
            return b""  # paho's cue for "connection lost"
        raise BlockingIOError

    # -- writing: paho's sends are collected, one send() per writable event ------------
    def _sock_send(self, buf: bytes | bytearray) -> int:
        if self._sock is None:
            raise ConnectionError("self._sock is None")
        self._wbuf += buf
        return len(buf)

    def _packet_write(self) -> MQTTErrorCode:
        rc = super()._packet_write()
        try:
            self._flush()
        except OSError as exc:
            self._easy_log(paho.MQTT_LOG_ERR, "failed to send on socket: %s", exc)
            return MQTTErrorCode.MQTT_ERR_CONN_LOST
        return rc

    def want_write(self) -> bool:
        # What the socket did not take yet keeps the writer registered (loop_write asks).
        return bool(self._wbuf) or super().want_write()

    def _flush(self) -> None:
        sock = self._sock
        if sock is None:
            return
        tls = isinstance(sock, ssl.SSLSocket)
        with contextlib.suppress(BlockingIOError, ssl.SSLWantWriteError, ssl.SSLWantReadError):
            while self._wbuf:
                sent = sock.send(self._wbuf[:_TLS_CHUNK] if tls else self._wbuf)
                del self._wbuf[:sent]
                if not tls:
                    break  # the kernel took what fits; the rest when writable again

    def _sock_close(self) -> None:
        # DISCONNECT (paho closes right after "sending" it) and any acks queued before it
        # still leave, best effort.
        with contextlib.suppress(OSError):
            self._flush()
        self._wbuf.clear()
        self._rbuf, self._rpos, self._eof, self._recv_error = b"", 0, False, None
        super()._sock_close()

    # -- the common packets, decoded without paho's Properties machinery --------------
    def _handle_publish(self) -> MQTTErrorCode:
        header = self._in_packet["command"]
        if header & 0x06 not in (0x00, 0x02):
            return super()._handle_publish()  # QoS 2 (the PUBREC exchange), or invalid
        try:
            message = decode_publish(header, self._in_packet["packet"],
                                     self._protocol == paho.MQTTv5)
        except (UnusualPacket, UnicodeDecodeError, IndexError):
            return super()._handle_publish()
        message.timestamp = paho.time_func()  # as paho stamps it
        self._handle_on_message(message)
        if message.qos == 1 and not self._manual_ack:
            return self._send_puback(message.mid)
        return _OK

    def _handle_on_message(self, message: paho.MQTTMessage) -> None:
        # paho looks for per-topic callbacks (`message_callback_add`, never used here)
        # first, with a matcher that makes a self-referencing closure per message: a
        # reference cycle per message for the cyclic collector (measured: 6 objects per
        # message, 180,052 for 30,000 messages), and its CPU. Straight to `on_message`,
        # with paho's own locking and error handling.
        on_message = self.on_message
        if on_message is None:
            return
        with self._in_callback_mutex:
            try:
                on_message(self, self._userdata, message)
            except Exception as err:
                self._easy_log(paho.MQTT_LOG_ERR, "Caught exception in on_message: %s", err)
                if not self.suppress_exceptions:
                    raise

    def _handle_pubackcomp(self, cmd: Literal["PUBACK", "PUBCOMP"]) -> MQTTErrorCode:
        data = self._in_packet["packet"]
        reason = ack_success(cmd, data, self._protocol == paho.MQTTv5)
        if reason is None:
            return super()._handle_pubackcomp(cmd)  # a failure, or properties: paho's
        mid = (data[0] << 8) | data[1]
        with self._out_message_mutex:
            if mid in self._out_messages:
                return self._do_on_publish(mid, reason, ACK_PROPERTIES[cmd])
        return _OK

    # -- logging ----------------------------------------------------------------------
    def _easy_log(self, level: int, fmt: str, *args: Any) -> None:
        # paho reports socket and TLS failures only to its log; the last error explains a
        # refused handshake or a dropped connection better than "Unspecified error".
        if level == paho.MQTT_LOG_ERR:
            self.last_error = fmt % args


class PahoLink:
    """One MQTT connection, owned by the event loop that created it."""

    def __init__(
        self,
        *,
        client_id: str,
        v5: bool,
        clean_start: bool,
        manual_ack: bool,
        on_message: Callable[[paho.MQTTMessage], None] | None = None,
        on_lost: Callable[[str], None] | None = None,
        tls: ssl.SSLContext | None = None,
        username: str | None = None,
        password: str | None = None,
    ) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self.v5 = v5
        self._clean_start = clean_start
        self.client = _BatchingClient(
            callback_api_version=CallbackAPIVersion.VERSION2,
            client_id=client_id,
            protocol=MQTTProtocolVersion.MQTTv5 if v5 else MQTTProtocolVersion.MQTTv311,
            # 3.1.1 only; for 5.0 clean start is a connect() argument.
            clean_session=None if v5 else clean_start,
            manual_ack=manual_ack,
            reconnect_on_failure=False,
        )
        # 0 = no limit in paho: the link keeps the window (see the module docstring).
        self.client.max_inflight_messages = 0
        if tls is not None:
            self.client.tls_set_context(tls)
        if username:
            self.client.username_pw_set(username, password)
        self._on_message_cb = on_message
        self._on_lost_cb = on_lost
        self._connack: asyncio.Future[bool] = self._loop.create_future()
        # Publishing: mid -> (batch, index in it, qos) until PUBACK/PUBCOMP (QoS 0: written).
        self._pending: dict[int, tuple[PendingBatch, int, int]] = {}
        self._backlog: deque[tuple[PublishArgs, PendingBatch, int]] = deque()
        self._in_flight = 0  # QoS>=1 publishes sent and not confirmed
        self._window = _V5_DEFAULT_WINDOW if v5 else _V311_WINDOW
        self._room = asyncio.Event()  # the backlog shrank, or the link is gone
        self._subacks: dict[int, asyncio.Future[list[int]]] = {}
        # The socket's fd, kept as an int: after paho closes the socket, sock.fileno() is
        # -1 and the loop's registration could no longer be removed by the socket object.
        self._fd: int | None = None
        self._reading = False
        self._paused = False
        self._misc: asyncio.Task[None] | None = None
        self.connected = False
        self.session_present = False
        # MQTT 5: the broker's Maximum Packet Size from its CONNACK (None: it set none).
        self.max_packet_size: int | None = None
        c = self.client
        c.on_connect = self._on_connect
        c.on_disconnect = self._on_disconnect
        c.on_message = self._on_message
        c.on_publish = self._on_publish
        c.on_subscribe = self._on_subscribe
        c.on_socket_open = self._on_socket_open
        c.on_socket_close = self._on_socket_close
        c.on_socket_register_write = self._on_register_write
        c.on_socket_unregister_write = self._on_unregister_write

    @property
    def window(self) -> int:
        """QoS>=1 publishes that may be unconfirmed at once (the broker's Receive Maximum)."""
        return self._window

    # -- lifecycle ---------------------------------------------------------------------
    async def connect(
        self,
        host: str,
        port: int,
        *,
        keepalive: int = 30,
        properties: Properties | None = None,
        timeout: float = 10.0,
    ) -> bool:
        """Connect and wait for a successful CONNACK; return session_present."""
        self.client.connect_timeout = timeout
        try:
            await asyncio.to_thread(
                self.client.connect,
                host,
                port,
                keepalive,
                clean_start=self._clean_start if self.v5 else paho.MQTT_CLEAN_START_FIRST_ONLY,
                properties=properties,
            )
        except (OSError, ValueError) as exc:
            self._teardown()
            raise NotConnected(f"cannot connect to {host}:{port}: {describe(exc)}") from None
        try:
            async with asyncio.timeout(timeout):
                self.session_present = await self._connack
        except TimeoutError:
            self._teardown()
            raise NotConnected(f"no CONNACK from {host}:{port} within {timeout}s") from None
        except NotConnected as exc:
            self._teardown()
            last_error = self.client.last_error
            if last_error and "CONNACK" not in str(exc):
                raise NotConnected(f"connection to {host}:{port} lost before CONNACK: "
                                   f"{describe_text(last_error)}") from None
            raise
        return self.session_present

    async def subscribe(self, filters: list[tuple[str, int]], timeout: float = 10.0) -> list[int]:
        """Subscribe and return the granted QoS (or reason code >= 0x80) per filter."""
        result, mid = self.client.subscribe(filters)
        if result != _OK or mid is None:
            raise NotConnected(f"subscribe failed: {paho.error_string(result)}")
        future: asyncio.Future[list[int]] = self._loop.create_future()
        self._subacks[mid] = future
        async with asyncio.timeout(timeout):
            granted: list[int] = await future
        return granted

    def publish_batch(
        self, items: Sequence[PublishArgs | Outcome], unconfirmed: Outcome,
        deadline: float | None = None,
    ) -> PendingBatch:
        """Queue PUBLISHes in order, as many as the window allows at once, the rest in the
        backlog (sent as PUBACKs come in). An Outcome among `items` is a message that
        failed before (it keeps its place in the batch). Nothing waits here: the socket
        write happens when the loop next finds it writable, once for the whole batch."""
        batch = PendingBatch(len(items), unconfirmed, deadline, self._loop)
        for index, item in enumerate(items):
            if isinstance(item, Outcome):
                batch.resolve(index, item)
            elif not self.connected:
                batch.resolve(index, Outcome.failed("not connected"))
            elif self._backlog or (item.qos and self._in_flight >= self._window):
                # Behind the backlog even at QoS 0: messages leave in submit order.
                self._backlog.append((item, batch, index))
            else:
                self._send(item, batch, index)
        return batch

    def withdraw(self, batch: PendingBatch) -> None:
        """Drop the batch's messages that are still waiting for a window slot (they keep
        the outcome they report now)."""
        self._backlog = deque(entry for entry in self._backlog if entry[1] is not batch)
        self._room.set()

    async def wait_for_room(self, limit: int) -> None:
        """Back-pressure for producers: wait while `limit` or more messages are waiting for
        a window slot (returns at once when the link is down: publishing then fails)."""
        while self.connected and len(self._backlog) >= limit:
            self._room.clear()
            await self._room.wait()

    def ack(self, mid: int, qos: int) -> None:
        """Queue PUBACK (QoS 1) / PUBCOMP (QoS 2); the acks of a burst leave in one write."""
        if self.connected:
            self.client.ack(mid, qos)

    async def disconnect(self) -> None:
        """Send DISCONNECT (the session survives: clean start is off) and close."""
        if self.connected:
            self.client.disconnect()
            # paho writes DISCONNECT from the writer callback; give it one turn.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(1.0):
                    while self._fd is not None:
                        await asyncio.sleep(0.01)
        self._teardown()

    # -- publishing internals ----------------------------------------------------------
    def _send(self, args: PublishArgs, batch: PendingBatch, index: int) -> None:
        try:
            info = self.client.publish(args.topic, args.payload, args.qos, args.retain,
                                       args.properties)
        except ValueError as exc:  # paho's own checks: a wildcard in the topic, too large
            batch.resolve(index, Outcome.failed(f"invalid message: {exc}", retryable=False))
            return
        if info.rc != _OK:
            batch.resolve(index, Outcome.failed(f"publish failed: {paho.error_string(info.rc)}"))
        elif args.qos == 0 and info.is_published():
            batch.resolve(index, Outcome.ok())
        else:
            self._pending[info.mid] = (batch, index, args.qos)
            if args.qos:
                self._in_flight += 1

    def _send_backlog(self) -> None:
        backlog = self._backlog
        sent = False
        while backlog and self.connected and (
                backlog[0][0].qos == 0 or self._in_flight < self._window):
            self._send(*backlog.popleft())
            sent = True
        if sent:
            self._room.set()

    # -- back-pressure -----------------------------------------------------------------
    def pause_reading(self) -> None:
        self._paused = True
        self._stop_reader()

    def resume_reading(self) -> None:
        was_paused, self._paused = self._paused, False
        self._start_reader()
        if was_paused and self._reading:
            # Bytes read before the pause wait in the client's buffer (and TLS data in the
            # SSL object): the fd will not signal them again.
            self._loop.call_soon(self._readable)

    def _start_reader(self) -> None:
        if self._fd is not None and not self._reading and not self._paused:
            self._loop.add_reader(self._fd, self._readable)
            self._reading = True

    def _stop_reader(self) -> None:
        if self._fd is not None and self._reading:
            self._loop.remove_reader(self._fd)
        self._reading = False

    # -- paho callbacks (all on the loop thread, except socket open/register during connect)
    def _call(self, fn: Callable[[], None]) -> None:
        if threading.get_ident() == self._loop_thread:
            fn()
        else:
            self._loop.call_soon_threadsafe(fn)

    def _on_socket_open(self, client: paho.Client, userdata: Any, sock: Any) -> None:
        # The client coalesces its writes itself (one send per burst); Nagle's algorithm
        # would only hold that send back until the broker's (delayed) ACK of the last.
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def opened() -> None:
            self._fd = sock.fileno()
            self._start_reader()
            self._misc = self._loop.create_task(self._misc_loop())

        self._call(opened)

    def _on_socket_close(self, client: paho.Client, userdata: Any, sock: Any) -> None:
        self._call(self._forget_socket)

    def _on_register_write(self, client: paho.Client, userdata: Any, sock: Any) -> None:
        fd = sock.fileno()
        self._call(lambda: self._loop.add_writer(fd, self._writable))

    def _on_unregister_write(self, client: paho.Client, userdata: Any, sock: Any) -> None:
        def unregister() -> None:
            if self._fd is not None:
                self._loop.remove_writer(self._fd)

        self._call(unregister)

    def _readable(self) -> None:
        """One recv(), then paho parses every complete packet read (it takes one per
        loop_read() when it has no outgoing messages), until the consumer pauses."""
        if not self._reading:
            return  # paused (or gone) since this call was scheduled
        client = self.client
        client.fill()
        try:
            client.loop_read()  # also when nothing was read: reports EOF and errors
            while self._reading and client.buffered:
                client.loop_read()
        except Exception as exc:  # paho raises on broken sockets; that ends the link
            self._lost(f"read failed: {describe(exc)}")
            return
        if self._backlog:
            self._send_backlog()  # the PUBACKs just read freed window slots
        self._more_tls_soon()

    def _more_tls_soon(self) -> None:
        # TLS data beyond what one event takes sits in the SSL object, not in the kernel,
        # so the fd does not signal readable again.
        sock = self.client.socket()
        if self._reading and isinstance(sock, ssl.SSLSocket) and sock.pending() > 0:
            self._loop.call_soon(self._readable)

    def _writable(self) -> None:
        try:
            self.client.loop_write()
        except Exception as exc:
            self._lost(f"write failed: {exc}")

    async def _misc_loop(self) -> None:
        # Keepalive pings and timeouts; paho returns an error once the socket is gone.
        while self.client.loop_misc() == _OK:
            await asyncio.sleep(1.0)

    def _on_connect(
        self, client: paho.Client, userdata: Any, flags: Any, reason: ReasonCode, props: Any
    ) -> None:
        if self._connack.done():
            return
        if reason.is_failure:
            hint = ""
            if str(reason) in ("Not authorized", "Bad user name or password"):
                hint = " (check the endpoint's username/password or client certificate)"
            self._connack.set_exception(NotConnected(f"CONNACK refused: {reason}{hint}"))
            return
        if self.v5:
            # The broker's flow control: more unacknowledged QoS>=1 PUBLISHes than this
            # is a protocol error it answers by disconnecting.
            self._window = int(getattr(props, "ReceiveMaximum", _V5_DEFAULT_WINDOW))
            # A larger packet is a protocol error the broker answers by disconnecting.
            most = getattr(props, "MaximumPacketSize", None)
            self.max_packet_size = int(most) if isinstance(most, int) else None
        self.connected = True
        self._connack.set_result(bool(flags.session_present))

    def _on_disconnect(
        self, client: paho.Client, userdata: Any, flags: Any, reason: ReasonCode, props: Any
    ) -> None:
        # paho has closed the socket already and holds its (non-reentrant) callback lock:
        # closing the socket again from here would deadlock.
        why = f"disconnected: {reason}"
        last_error = self.client.last_error
        if last_error and reason.is_failure:
            why += f" ({last_error})"
        self._lost(why, close_socket=False)

    def _on_message(self, client: paho.Client, userdata: Any, message: paho.MQTTMessage) -> None:
        if self._on_message_cb is not None:
            self._on_message_cb(message)

    def _on_publish(
        self, client: paho.Client, userdata: Any, mid: int, reason: ReasonCode, props: Any
    ) -> None:
        entry = self._pending.pop(mid, None)
        if entry is None:
            return
        batch, index, qos = entry
        if qos:
            self._in_flight -= 1
        # MQTT 5 PUBACK may carry a failure code (e.g. 0x87 not authorized): a verdict
        # on the message, so sending it again would not help.
        if not reason.is_failure:
            batch.resolve(index, Outcome.ok())
        elif int(reason.value) in _TOO_LARGE_CODES:
            batch.resolve(index, Outcome.refused_as_too_large(f"broker refused: {reason}"))
        else:
            batch.resolve(index, Outcome.failed(f"broker refused: {reason}", retryable=False))

    def _on_subscribe(
        self, client: paho.Client, userdata: Any, mid: int, reasons: list[ReasonCode], props: Any
    ) -> None:
        future = self._subacks.pop(mid, None)
        if future is not None and not future.done():
            future.set_result([int(r.value) for r in reasons])

    # -- teardown ----------------------------------------------------------------------
    def _lost(self, why: str, close_socket: bool = True) -> None:
        was_connected = self.connected
        self._teardown(why, close_socket)
        if was_connected and self._on_lost_cb is not None:
            self._on_lost_cb(why)

    def _forget_socket(self) -> None:
        if self._fd is not None:
            self._stop_reader()
            self._loop.remove_writer(self._fd)
        self._fd = None

    def _teardown(self, why: str = "connection closed", close_socket: bool = True) -> None:
        self.connected = False
        self._forget_socket()
        if close_socket:
            with contextlib.suppress(Exception):
                self.client._sock_close()  # paho has no public "drop the socket"
        if self._misc is not None:
            self._misc.cancel()
        if not self._connack.done():
            self._connack.set_exception(NotConnected(why))
            self._connack.exception()  # mark retrieved: nobody may be waiting
        self._fail_unconfirmed(why)
        subacks, self._subacks = self._subacks, {}
        for suback in subacks.values():
            if not suback.done():
                suback.set_exception(NotConnected(why))

    def _fail_unconfirmed(self, why: str) -> None:
        # The link is gone: every message not confirmed may or may not have arrived, so
        # each is reported as a retryable failure (the engine sends it again).
        failed = Outcome.failed(why)
        pending, self._pending = self._pending, {}
        backlog, self._backlog = self._backlog, deque()
        self._in_flight = 0
        for batch, index, _qos in pending.values():
            batch.resolve(index, failed)
        for _args, batch, index in backlog:
            batch.resolve(index, failed)
        self._room.set()



#: What a message reports when its PUBACK/PUBCOMP did not come within publish_timeout.
UNCONFIRMED = Outcome.failed("no PUBACK/PUBCOMP in time")


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
