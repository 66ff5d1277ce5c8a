"""The HTTP ingress's connection cap without a socket: a connection over the cap is
answered 503 and closed whatever event loop made its transport. uvloop's transports (and
any other loop's) write like asyncio's without subclassing `asyncio.WriteTransport`; a
check on that class closed them without a word. The same cap is checked against real
sockets in tests/integration/test_http_ingress_hardening.py."""

from __future__ import annotations

import asyncio

from adapters.http.server import GuardedServer


class DuckTransport:
    """A transport of another loop: `write` and `close`, no asyncio base class."""

    def __init__(self) -> None:
        self.written = b""
        self.closed = False

    def write(self, data: bytes) -> None:
        self.written += data

    def close(self) -> None:
        self.closed = True


async def _handler(request: object) -> None:
    raise AssertionError("no request is read past the cap")


def test_a_connection_over_the_cap_gets_503_on_a_transport_of_any_loop() -> None:
    async def main() -> DuckTransport:
        server = GuardedServer(_handler, header_timeout=60, max_connections=0, retry_after=7)
        transport = DuckTransport()
        assert not isinstance(transport, asyncio.WriteTransport)
        server().connection_made(transport)  # type: ignore[arg-type]
        assert server.refused == 1
        return transport

    transport = asyncio.run(main())
    assert transport.closed
    assert transport.written.startswith(b"HTTP/1.1 503 Service Unavailable\r\n")
    assert b"Retry-After: 7\r\n" in transport.written
