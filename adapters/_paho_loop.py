"""Drive one paho-mqtt 2 client connection from the asyncio event loop.

Why not aiomqtt: it creates its paho client without manual acks and drops messages when
its queue is full. Why not paho's own thread (loop_start): callbacks would then run on
another thread, and back-pressure would mean blocking paho's network thread. Instead, as
aiomqtt does internally, paho's socket is watched with `loop.add_reader/add_writer` and
`loop_misc` runs once a second, so every paho callback runs on the event loop thread
and `pause_reading()` pushes back on the broker through TCP.

Only `connect()` leaves the loop: paho's connect resolves and connects a blocking socket,
so it runs in a worker thread; the socket callbacks it fires are marshalled back.

One `PahoLink` is one connection: after it is lost, make a new one (the broker keeps the
session; paho's in-memory state of the old connection is deliberately not reused).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import threading
from collections.abc import Callable
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion, MQTTErrorCode, MQTTProtocolVersion
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode

from adapters._tls import describe, describe_text
from gateway.ports import NotConnected

__all__ = ["PahoLink", "PublishResult", "new_properties"]

#: (failure reason or None) of one PUBLISH, resolved on PUBACK/PUBCOMP (QoS 0: on send).
PublishResult = str | None


def new_properties(packet_type: int, **values: object) -> Properties:
    """paho MQTT 5 properties (the class is untyped and sets attributes dynamically)."""
    props = Properties(packet_type)  # type: ignore[no-untyped-call]
    for name, value in values.items():
        setattr(props, name, value)
    return props


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
        self.client = paho.Client(
            callback_api_version=CallbackAPIVersion.VERSION2,
            client_id=client_id,
            protocol=MQTTProtocolVersion.MQTTv5 if v5 else MQTTProtocolVersion.MQTTv311,
            # 3.1.1 only; for 5.0 clean start is a connect() argument.
            clean_session=None if v5 else clean_start,
            manual_ack=manual_ack,
            reconnect_on_failure=False,
        )
        if tls is not None:
            self.client.tls_set_context(tls)
        if username:
            self.client.username_pw_set(username, password)
        # paho reports socket and TLS failures only to its log; the last error explains
        # a refused handshake or a dropped connection better than "Unspecified error".
        self._last_error: str | None = None
        self.client.on_log = self._on_log
        self._on_message_cb = on_message
        self._on_lost_cb = on_lost
        self._connack: asyncio.Future[bool] = self._loop.create_future()
        self._pending: dict[int, asyncio.Future[PublishResult]] = {}
        self._subacks: dict[int, asyncio.Future[list[int]]] = {}
        # The socket's fd, kept as an int: after paho closes the socket, sock.fileno() is
        # -1 and the loop's registration could no longer be removed by the socket object.
        self._fd: int | None = None
        self._reading = False
        self._paused = False
        self._misc: asyncio.Task[None] | None = None
        self.connected = False
        self.session_present = False
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
            if self._last_error and "CONNACK" not in str(exc):
                raise NotConnected(f"connection to {host}:{port} lost before CONNACK: "
                                   f"{describe_text(self._last_error)}") from None
            raise
        return self.session_present

    async def subscribe(self, filters: list[tuple[str, int]], timeout: float = 10.0) -> list[int]:
        """Subscribe and return the granted QoS (or reason code >= 0x80) per filter."""
        result, mid = self.client.subscribe(filters)
        if result != MQTTErrorCode.MQTT_ERR_SUCCESS or mid is None:
            raise NotConnected(f"subscribe failed: {paho.error_string(result)}")
        future: asyncio.Future[list[int]] = self._loop.create_future()
        self._subacks[mid] = future
        async with asyncio.timeout(timeout):
            granted: list[int] = await future
        return granted

    def publish(
        self, topic: str, payload: bytes, qos: int, retain: bool, properties: Properties | None
    ) -> asyncio.Future[PublishResult]:
        """Send one PUBLISH; the future resolves when the broker confirmed it."""
        future: asyncio.Future[PublishResult] = self._loop.create_future()
        if not self.connected:
            future.set_result("not connected")
            return future
        info = self.client.publish(topic, payload, qos, retain, properties)
        if info.rc != MQTTErrorCode.MQTT_ERR_SUCCESS:
            future.set_result(f"publish failed: {paho.error_string(info.rc)}")
        elif info.is_published():  # QoS 0 may complete inside publish()
            future.set_result(None)
        else:
            self._pending[info.mid] = future
        return future

    def ack(self, mid: int, qos: int) -> None:
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

    # -- back-pressure -----------------------------------------------------------------
    def pause_reading(self) -> None:
        self._paused = True
        self._stop_reader()

    def resume_reading(self) -> None:
        self._paused = False
        self._start_reader()
        self._drain_tls_soon()

    def _drain_tls_soon(self) -> None:
        # A TLS record can hold several MQTT packets: what paho did not take yet sits in
        # the SSL object, not in the kernel, so the fd does not signal readable again.
        sock = self.client.socket()
        if self._reading and isinstance(sock, ssl.SSLSocket) and sock.pending() > 0:
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
        if not self._reading:
            return  # paused (or gone) since this call was scheduled
        try:
            self.client.loop_read()
        except Exception as exc:  # paho raises on broken sockets; that ends the link
            self._lost(f"read failed: {describe(exc)}")
            return
        self._drain_tls_soon()

    def _on_log(self, client: paho.Client, userdata: Any, level: int, text: str) -> None:
        if level == paho.MQTT_LOG_ERR:
            self._last_error = text

    def _writable(self) -> None:
        try:
            self.client.loop_write()
        except Exception as exc:
            self._lost(f"write failed: {exc}")

    async def _misc_loop(self) -> None:
        # Keepalive pings and timeouts; paho returns an error once the socket is gone.
        while self.client.loop_misc() == MQTTErrorCode.MQTT_ERR_SUCCESS:
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
        else:
            self.connected = True
            self._connack.set_result(bool(flags.session_present))

    def _on_disconnect(
        self, client: paho.Client, userdata: Any, flags: Any, reason: ReasonCode, props: Any
    ) -> None:
        # paho has closed the socket already and holds its (non-reentrant) callback lock:
        # closing the socket again from here would deadlock.
        why = f"disconnected: {reason}"
        if self._last_error and reason.is_failure:
            why += f" ({self._last_error})"
        self._lost(why, close_socket=False)

    def _on_message(self, client: paho.Client, userdata: Any, message: paho.MQTTMessage) -> None:
        if self._on_message_cb is not None:
            self._on_message_cb(message)

    def _on_publish(
        self, client: paho.Client, userdata: Any, mid: int, reason: ReasonCode, props: Any
    ) -> None:
        future = self._pending.pop(mid, None)
        if future is not None and not future.done():
            # MQTT 5 PUBACK may carry a failure code (e.g. 0x87 not authorized).
            future.set_result(f"broker refused: {reason}" if reason.is_failure else None)

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
        publishes, self._pending = self._pending, {}
        for future in publishes.values():
            if not future.done():
                future.set_result(why)
        subacks, self._subacks = self._subacks, {}
        for suback in subacks.values():
            if not suback.done():
                suback.set_exception(NotConnected(why))
