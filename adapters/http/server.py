"""The HTTP ingress's connection guard: aiohttp's server with the limits an exposed
listener needs and aiohttp does not have.

- **Request head in time** (`header_timeout`): a connection must deliver a whole request
  line and headers within `header_timeout` seconds of its start, or of the bytes that
  began the head; a client dripping its headers (slowloris) is closed. Idle kept-alive
  connections are aiohttp's `keepalive_timeout`; bodies have `read_timeout`.
- **Connection cap** (`max_connections`): one connection more is answered `503` with
  `Retry-After` and closed before anything is read, so a flood of connections costs a
  bounded number of sockets and parsers.
- **No echo**: no access log (its lines quote the request target), and aiohttp's own
  error answers (a malformed request line, a header too
  long) carry the parser's message, which quotes what the client sent (a non-UTF-8
  request line came back verbatim) and is logged with it. Here they are a fixed problem
  body per status, and the log line names the status only.
"""

from __future__ import annotations

import asyncio
import json
import logging
from http import HTTPStatus
from typing import Any, cast

from aiohttp import web
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest

log = logging.getLogger("xrgw.adapters.http")


class GuardedServer(web.Server):
    """`web.Server` whose connections are `GuardedHandler`s."""

    def __init__(self, handler: Any, *, header_timeout: float, max_connections: int,
                 retry_after: int, **kwargs: Any) -> None:
        # No access log: its lines quote request targets, which senders write (a query
        # string may carry a key); the route's metrics and dead letters say what came.
        super().__init__(handler, access_log=None, **kwargs)
        self.header_timeout = header_timeout
        self.max_connections = max_connections
        self.retry_after = retry_after
        self.refused = 0  # connections answered 503 at the cap

    def __call__(self) -> RequestHandler:
        return GuardedHandler(self, loop=self._loop, **self._kwargs)


class GuardedHandler(RequestHandler):
    """One connection: its head must arrive in time; past the cap it is refused."""

    __slots__ = ("_guard", "_head_count", "_head_timer")

    def __init__(self, manager: GuardedServer, **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self._guard = manager
        self._head_timer: asyncio.TimerHandle | None = None
        self._head_count = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        guard = self._guard
        # The cap counts the connections the server holds, this one not yet included.
        if len(guard.connections) >= guard.max_connections:
            guard.refused += 1
            # A server's stream transport always writes, but another event loop's
            # (uvloop's) is no asyncio.WriteTransport subclass: an isinstance check here
            # closed such connections without the 503.
            cast(asyncio.WriteTransport, transport).write(
                b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: %d\r\n"
                b"Connection: close\r\nContent-Length: 0\r\n\r\n" % guard.retry_after)
            transport.close()
            return
        super().connection_made(transport)
        self._await_head()

    def connection_lost(self, exc: BaseException | None) -> None:
        self._stop_head_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        # Per chunk of every request: kept to a count compare and a slot read.
        before = self._request_count
        RequestHandler.data_received(self, data)
        if self._request_count != before:
            if self._head_timer is not None:  # a whole head arrived
                self._head_timer.cancel()
                self._head_timer = None
        elif self._head_timer is None and not self._request_in_progress:
            self._await_head()  # bytes of a new head: it must complete in time

    def _await_head(self) -> None:
        self._stop_head_timer()
        self._head_count = self._request_count
        self._head_timer = self._loop.call_later(self._guard.header_timeout, self._head_late)

    def _stop_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_late(self) -> None:
        self._head_timer = None
        if self._request_count == self._head_count and not self._request_in_progress:
            log.debug("HTTP ingress: request head not complete within %gs; connection "
                      "closed", self._guard.header_timeout)  # pragma: no mutate
            self.force_close()

    def handle_error(self, request: BaseRequest, status: int = 500,
                     exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        """A fixed answer: nothing of what the client sent, in the body or the log."""
        log.debug("HTTP ingress: refused a malformed request (%d)", status)  # pragma: no mutate
        if request.writer.output_size > 0:
            raise ConnectionError("response already started")
        phrase = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else ""
        detail = "malformed request" if status < 500 else "internal error"
        body = json.dumps({"type": "about:blank", "title": phrase, "status": status,
                           "detail": detail})
        response = web.Response(status=status, text=body,
                                content_type="application/problem+json")
        response.force_close()
        return response


__all__ = ["GuardedHandler", "GuardedServer"]
