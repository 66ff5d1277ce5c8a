"""A TCP fault proxy on loopback: put it between the gateway and a broker, then make the
link pass, hang, break, refuse or lag while the gateway runs.

    with FaultProxy(broker.port) as proxy:       # listens on proxy.port
        config uses 127.0.0.1:<proxy.port>
        proxy.blackhole()        # nothing moves either way; connections stay open
        proxy.reset()            # every open connection is reset (RST), held bytes gone
        proxy.refuse()           # new connections are refused (ECONNREFUSED)
        proxy.delay(0.2)         # every chunk waits 200 ms before it is passed on
        proxy.heal()             # pass again (bytes held by a blackhole now flow)

What the modes mean, and why they look like the network faults they stand for:

- *blackhole*: a partition. The proxy stops reading from both sides, so bytes pile up in
  the kernel's socket buffers and then in the sender's, exactly as when packets are
  dropped and TCP keeps retransmitting: writes succeed for a while, nothing is answered.
  New connections are accepted (the kernel completes the handshake) and then hear
  nothing. `heal()` lets the held bytes through, as TCP delivers them once the path is
  back; `reset()` discards them with the connections.
- *reset*: a broker crash or a middlebox timing the connections out. Both sockets of
  every open connection are closed with SO_LINGER 0, which sends RST and throws away
  unsent data; neither side gets a clean FIN.
- *refuse*: the broker's port closed. The listener is closed (a connect gets
  ECONNREFUSED) and opened again on the same port by `heal()`; open connections stay.
- *delay*: latency. Each chunk read is held `seconds` before it is written on, in both
  directions, in order.

The proxy runs its own event loop in a daemon thread, so it keeps passing bytes while the
test's loop is busy or blocked, and its control methods are plain calls usable from sync
and async code alike. `connections`, `accepted`, `resets` and `forwarded` let a test check
that the fault really hit something.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from collections.abc import Coroutine
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self

HOST = "127.0.0.1"
#: Bytes read per chunk.
_CHUNK = 65536
#: Seconds a control call waits for the proxy's loop.
_CONTROL_TIMEOUT = 10.0


@dataclass(eq=False)
class _Link:
    """One client connection and its upstream connection."""

    client: asyncio.StreamWriter
    upstream: asyncio.StreamWriter | None = None
    tasks: tuple[asyncio.Task[None], ...] = ()


class FaultProxy:
    """A TCP proxy from `HOST:port` to `upstream_host:upstream_port` that can blackhole,
    reset, refuse and delay (see the module docstring)."""

    def __init__(self, upstream_port: int, *, upstream_host: str = HOST,
                 port: int = 0) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.host = HOST
        self.port = port
        #: Connections accepted so far, and resets applied to open connections.
        self.accepted = 0
        self.resets = 0
        #: Bytes passed on (both directions).
        self.forwarded = 0
        self._links: set[_Link] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._flowing: asyncio.Event | None = None
        self._delay = 0.0

    # -- lifecycle --------------------------------------------------------------------
    def start(self) -> Self:
        loop = asyncio.new_event_loop()
        started = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(started.set)
            loop.run_forever()

        self._loop = loop
        self._thread = threading.Thread(target=run, name=f"fault-proxy-{self.upstream[1]}",
                                        daemon=True)
        self._thread.start()
        started.wait(_CONTROL_TIMEOUT)
        self._call(self._start())
        return self

    def stop(self) -> None:
        loop = self._loop
        if loop is None:
            return
        with contextlib.suppress(Exception):
            self._call(self._stop())
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(_CONTROL_TIMEOUT)
        loop.close()
        self._loop = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    @property
    def address(self) -> str:
        """`127.0.0.1:<port>`."""
        return f"{self.host}:{self.port}"

    @property
    def connections(self) -> int:
        """Client connections open now."""
        return len(self._links)

    # -- faults -----------------------------------------------------------------------
    def blackhole(self) -> None:
        """Stop passing bytes either way; connections stay open, new ones are accepted."""
        self._call(self._set_flowing(False))

    def heal(self) -> None:
        """Pass again: listen if refusing, release what a blackhole held, no delay."""
        self._call(self._heal())

    def reset(self) -> int:
        """Reset (RST) every open connection; the number reset."""
        count: int = self._call(self._reset_all())
        return count

    def refuse(self) -> None:
        """Close the listener: new connections are refused until `heal()`."""
        self._call(self._close_listener())

    def delay(self, seconds: float) -> None:
        """Hold every chunk `seconds` before passing it on (0: no delay)."""
        self._delay = max(0.0, seconds)

    @property
    def blackholed(self) -> bool:
        return self._flowing is not None and not self._flowing.is_set()

    # -- the loop's side --------------------------------------------------------------
    def _call(self, coro: Coroutine[Any, Any, Any]) -> Any:
        assert self._loop is not None, "start() first"
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(_CONTROL_TIMEOUT)

    async def _start(self) -> None:
        self._flowing = asyncio.Event()
        self._flowing.set()
        await self._open_listener()

    async def _open_listener(self) -> None:
        if self._server is not None:
            return
        self._server = await asyncio.start_server(
            self._accept, self.host, self.port, reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _close_listener(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
            # Not wait_closed(): since 3.12 it waits for the open connections too.

    async def _set_flowing(self, flowing: bool) -> None:
        assert self._flowing is not None
        if flowing:
            self._flowing.set()
        else:
            self._flowing.clear()

    async def _heal(self) -> None:
        self._delay = 0.0
        await self._open_listener()
        await self._set_flowing(True)

    async def _stop(self) -> None:
        await self._close_listener()
        await self._reset_all(count=False)
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in others:
            task.cancel()
        await asyncio.gather(*others, return_exceptions=True)

    async def _reset_all(self, count: bool = True) -> int:
        links = list(self._links)
        for link in links:
            self._abort(link)
        for link in links:
            for task in link.tasks:
                task.cancel()
            await asyncio.gather(*link.tasks, return_exceptions=True)
        if count:
            self.resets += len(links)
        return len(links)

    def _abort(self, link: _Link) -> None:
        self._links.discard(link)
        for writer in (link.client, link.upstream):
            if writer is None:
                continue
            sock = writer.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                    struct.pack("ii", 1, 0))
            writer.transport.abort()

    async def _accept(self, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        link = _Link(writer)
        self._links.add(link)
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            self._abort(link)  # the broker is down: so is the connection
            return
        if link not in self._links:  # reset while connecting
            up_writer.transport.abort()
            return
        link.upstream = up_writer
        link.tasks = (
            asyncio.create_task(self._direction(reader, up_writer)),
            asyncio.create_task(self._direction(up_reader, writer)),
        )
        await asyncio.gather(*link.tasks, return_exceptions=True)
        if link in self._links:  # both sides done by themselves: close quietly
            self._links.discard(link)
            for side in (writer, up_writer):
                with contextlib.suppress(Exception):
                    side.close()

    async def _direction(self, reader: asyncio.StreamReader,
                         writer: asyncio.StreamWriter) -> None:
        """Copy one direction: a reader and a writer joined by a short queue of
        (due time, chunk), so that a delay adds latency without cutting throughput."""
        chunks: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue(maxsize=64)
        writing = asyncio.create_task(self._write(chunks, writer))
        try:
            await self._read(reader, chunks)
            await chunks.put((0.0, b""))  # end of stream: half-close after the rest
            await writing
        finally:
            writing.cancel()  # reset: nothing more is written

    async def _read(self, reader: asyncio.StreamReader,
                    chunks: asyncio.Queue[tuple[float, bytes]]) -> None:
        flowing = self._flowing
        assert flowing is not None
        loop = asyncio.get_running_loop()
        with contextlib.suppress(OSError):
            while True:
                await flowing.wait()  # a blackhole: stop reading, let the buffers fill
                data = await reader.read(_CHUNK)
                if not data:
                    return
                await chunks.put((loop.time() + self._delay, data))

    async def _write(self, chunks: asyncio.Queue[tuple[float, bytes]],
                     writer: asyncio.StreamWriter) -> None:
        flowing = self._flowing
        assert flowing is not None
        loop = asyncio.get_running_loop()
        broken = False
        while True:
            due, data = await chunks.get()
            if broken:
                if not data:
                    return
                continue  # the peer is gone: swallow the rest so the reader never blocks
            try:
                if not data:
                    if writer.can_write_eof():
                        writer.write_eof()
                    return
                if (wait := due - loop.time()) > 0:
                    await asyncio.sleep(wait)
                await flowing.wait()  # read just before the blackhole: held too
                writer.write(data)
                await writer.drain()
                self.forwarded += len(data)
            except (OSError, RuntimeError):
                broken = True
