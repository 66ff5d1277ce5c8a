"""The HTTP ingress as an exposed listener (issue 29), attacked over real loopback
sockets: clients dripping their headers are disconnected (slowloris), a connection over
the cap is answered 503 and closed, aiohttp's 400 page does not echo a non-UTF-8 request
line (nor does the log), and the ingress's own credential never reaches the record.
curl (what an operator would try) checks the answers a real client sees."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import subprocess
from typing import Any

import pytest

from adapters.http import HttpConsumer
from gateway.ports import EndpointSettings, read_one

TIMEOUT = 30.0
TOKEN = "INGRESS-TOKEN-0123456789"


async def _consumer(password: str | None = None, **options: Any) -> HttpConsumer:
    consumer = HttpConsumer(EndpointSettings("http://127.0.0.1:0", password=password,
                                             options=options))
    await consumer.connect()
    return consumer


async def _closed(reader: asyncio.StreamReader) -> bytes:
    """What the server sent until it closed the connection.

    A close with bytes of ours still unread on the server's side is a reset (RST), not a
    FIN: whether a dripped header line is in its buffer when the server gives up depends
    on scheduling, so a reset counts as the close it is."""
    received = []
    async with asyncio.timeout(TIMEOUT):
        with contextlib.suppress(ConnectionResetError):
            while chunk := await reader.read(65536):
                received.append(chunk)
    return b"".join(received)


def test_clients_dripping_their_headers_are_disconnected() -> None:
    async def scenario() -> list[bytes]:
        consumer = await _consumer(header_timeout=1)
        try:
            streams = [await asyncio.open_connection("127.0.0.1", consumer.port)
                       for _ in range(20)]
            for _, writer in streams:
                writer.write(b"POST / HTTP/1.1\r\nHost: x\r\n")
                await writer.drain()
            # Keep dripping one more header line now and then: never a whole head.
            async def drip(writer: asyncio.StreamWriter) -> None:
                try:
                    for i in range(100):
                        writer.write(b"X-%d: y\r\n" % i)
                        await writer.drain()
                        await asyncio.sleep(0.2)
                except (ConnectionError, OSError):
                    pass
            drips = [asyncio.ensure_future(drip(w)) for _, w in streams]
            try:
                return [await _closed(r) for r, _ in streams]
            finally:
                for task in drips:
                    task.cancel()
                for _, writer in streams:
                    writer.close()
        finally:
            await consumer.aclose()

    closed = asyncio.run(scenario())
    assert closed == [b""] * 20  # closed by the server, without an answer


def test_a_connection_that_sends_nothing_is_closed() -> None:
    async def scenario() -> bytes:
        consumer = await _consumer(header_timeout=1)
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", consumer.port)
            try:
                return await _closed(reader)
            finally:
                writer.close()
        finally:
            await consumer.aclose()

    assert asyncio.run(scenario()) == b""


def test_a_slow_but_whole_head_within_the_limit_is_served() -> None:
    async def scenario() -> bytes:
        consumer = await _consumer(header_timeout=20)
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", consumer.port)
            for part in (b"POST / HTTP/1.1\r\n", b"Host: x\r\n", b"Content-Length: 2\r\n",
                         b"Connection: close\r\n\r\n{}"):
                writer.write(part)
                await writer.drain()
                await asyncio.sleep(0.1)
            delivery = await asyncio.wait_for(read_one(consumer), TIMEOUT)
            await delivery.ack()
            answer = await _closed(reader)
            writer.close()
            return answer
        finally:
            await consumer.aclose()

    assert asyncio.run(scenario()).startswith(b"HTTP/1.1 202")


def test_connections_over_the_cap_are_answered_503_and_closed() -> None:
    async def scenario() -> tuple[list[bytes], int]:
        consumer = await _consumer(max_connections=5, header_timeout=60)
        try:
            held = [await asyncio.open_connection("127.0.0.1", consumer.port)
                    for _ in range(5)]
            extra = [await asyncio.open_connection("127.0.0.1", consumer.port)
                     for _ in range(3)]
            answers = [await _closed(r) for r, _ in extra]
            for _, writer in held + extra:
                writer.close()
            return answers, consumer.port or 0
        finally:
            await consumer.aclose()

    answers, _ = asyncio.run(scenario())
    assert all(a.startswith(b"HTTP/1.1 503 ") and b"Retry-After: 1" in a for a in answers)


def test_the_400_page_and_the_logs_do_not_echo_the_request_line(
        caplog: pytest.LogCaptureFixture) -> None:
    marker = b"\xff\xfeSECRET-LINE-\xc3"

    async def scenario() -> bytes:
        consumer = await _consumer()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", consumer.port)
            writer.write(b"POST /" + marker + b" HTTP/1.1\r\nHost: x\r\n\r\n")
            await writer.drain()
            answer = await _closed(reader)
            writer.close()
            reader, writer = await asyncio.open_connection("127.0.0.1", consumer.port)
            writer.write(b"POST /?key=SECRET-LINE-query HTTP/1.1\r\nHost: x\r\n"
                         b"Content-Length: 0\r\nConnection: close\r\n\r\n")
            await writer.drain()
            delivery = await asyncio.wait_for(read_one(consumer), TIMEOUT)
            await delivery.ack()
            answer += await _closed(reader)
            writer.close()
            reader, writer = await asyncio.open_connection("127.0.0.1", consumer.port)
            writer.write(b"G\xffT /" + marker + b" HTTP/1.1\r\n\r\n")
            await writer.drain()
            answer += await _closed(reader)
            writer.close()
            return answer
        finally:
            await consumer.aclose()

    with caplog.at_level(logging.DEBUG):
        answer = asyncio.run(scenario())
    assert answer.count(b" 400 Bad Request\r\n") == 2
    assert b"SECRET-LINE" not in answer
    assert "SECRET-LINE" not in caplog.text


def test_the_ingress_credential_never_reaches_the_record() -> None:
    async def scenario() -> list[dict[str, Any]]:
        consumer = await _consumer(password=TOKEN)
        try:
            curl = await asyncio.create_subprocess_exec(
                shutil.which("curl") or "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
                "-H", f"Authorization: Bearer {TOKEN}", "-H", "X-Other: kept",
                "--data", "{}", f"http://127.0.0.1:{consumer.port}/",
                stdout=subprocess.PIPE)
            delivery = await asyncio.wait_for(read_one(consumer), TIMEOUT)
            await delivery.ack()
            out, _ = await curl.communicate()
            assert out == b"202"
            headers = delivery.message.fields["headers"]
            assert isinstance(headers, list)
            return [h for h in headers if isinstance(h, dict)]
        finally:
            await consumer.aclose()

    if shutil.which("curl") is None:
        pytest.fail("curl is part of the test environment")
    headers = asyncio.run(scenario())
    names = {str(h["name"]).lower() for h in headers}
    assert "authorization" not in names and "x-other" in names
    assert TOKEN not in str(headers)
