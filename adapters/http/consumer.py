"""The HTTP ingress: an aiohttp server whose requests become deliveries; the response
(2xx, 4xx, 503 + Retry-After, a reply) waits for the route's settlement.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hmac
import json
import time
from collections.abc import Mapping
from http import HTTPStatus

import aiohttp
from aiohttp import web

from adapters.http.options import HttpOptions
from adapters.http.record import request_record, split_target
from adapters.http.server import GuardedServer
from gateway.ports import NO_REPLY_PREFIX, Delivery, EndOfInput, EndpointSettings, NotConnected
from gateway.ports.inbox import Inbox
from gateway.ports.tls import server_context
from gateway.record import NativeMessage


def _problem(status: int, detail: str, headers: Mapping[str, str] | None = None) -> web.Response:
    """An RFC 9457 problem response (`about:blank`: the title is the status phrase)."""
    body = {
        "type": "about:blank",
        "title": HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
    }
    return web.Response(
        status=status,
        text=json.dumps(body),
        content_type="application/problem+json",
        headers=headers,
    )

#: What a waiting request is answered with: the settlement (ack, reason, retry), the
#: response a reply route gave it (request-reply), or None when none came within
#: `settle_timeout` (504).
_Verdict = tuple[bool, str, bool] | web.Response | None

#: Timer handles may run up to the loop's clock resolution early; a deadline that close
#: counts as passed, so an early wake-up does not re-arm the timer for the same instant.
_EARLY = 0.001


class _Pending:
    """One admitted request waiting for its delivery's settlement."""

    __slots__ = ("abandoned", "deadline", "delivery", "verdict")

    def __init__(self, verdict: asyncio.Future[_Verdict]) -> None:
        self.verdict = verdict
        self.delivery: Delivery | None = None
        self.deadline = 0.0  # loop time after which the request is answered 504
        self.abandoned = False  # answered (504, shutdown, gone): ignore the settlement

    async def settle(self, ack: bool, reason: str, retry: bool) -> None:
        """The Delivery's settlement hook: the handler answers, this only tells it how.
        A settlement after a 504 or shutdown changes nothing."""
        if not self.abandoned and not self.verdict.done():
            self.verdict.set_result((ack, reason, retry))

    def waiting(self) -> bool:
        """The Delivery's waiting hook: False once the request was answered without its
        settlement (504, shutdown, client gone)."""
        return not self.abandoned and not self.verdict.done()

    async def answer(self, reply: NativeMessage | None, why: str) -> None:
        """The Delivery's answer hook (request-reply): the reply becomes the response;
        none -> 504 when the service did not answer in time, else 502. The settlement
        that follows changes nothing."""
        if self.abandoned or self.verdict.done():
            return
        if reply is not None:
            self.verdict.set_result(_reply_response(reply))
        elif why.startswith(NO_REPLY_PREFIX):
            self.verdict.set_result(_problem(504, why))
        else:
            self.verdict.set_result(_problem(502, f"the request was not answered: {why}"))

#: Headers of a reply record that describe its own hop, not the answer: aiohttp sets them.
_HOP_HEADERS = frozenset({"content-length", "transfer-encoding", "connection", "keep-alive",
                          "host", "date", "server"})


def _reply_response(reply: NativeMessage) -> web.Response:
    """A reply record (HTTP protocol: status, headers, body) as the response: its
    `status` (a reply definition's) when it holds a final status code, else 200."""
    headers = [(name, value) for name, value in reply.pairs("headers")
               if name.lower() not in _HOP_HEADERS]
    return web.Response(status=_status(reply.get("status")), body=reply.body_bytes(),
                        headers=headers)


def _status(value: object) -> int:
    """A reply's status as a final HTTP status code (200-599); 200 when it holds none."""
    text = str(value) if isinstance(value, (str, int)) and not isinstance(value, bool) else ""
    return int(text) if text.isascii() and text.isdigit() and 200 <= int(text) <= 599 else 200


class _ReceiveTime:
    """`received_at` text, formatted once per second rather than once per request (the
    record's resolution is a second anyway)."""

    __slots__ = ("_second", "_text")

    def __init__(self) -> None:
        self._second = -1
        self._text = ""

    def __call__(self) -> str:
        second = int(time.time())
        if second != self._second:
            self._second = second
            self._text = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(second))
        return self._text


class HttpConsumer:
    """An HTTP server whose requests are deliveries, answered when they are settled."""

    def __init__(self, settings: EndpointSettings) -> None:
        self._opts = HttpOptions.parse(settings)
        self._ssl = server_context(settings.tls) if self._opts.scheme == "https" else None
        self._expected = _expected_authorization(settings)
        self._runner: web.ServerRunner | None = None
        # Received, not yet handed out. No window: admission (max_in_flight, else 503)
        # already bounds what can be waiting.
        self._inbox: Inbox[_Pending] = Inbox()
        self._waiting: set[_Pending] = set()  # every request waiting for a settlement
        self._expiry: asyncio.TimerHandle | None = None  # the next settle_timeout check
        self._admitted = 0
        self._received_at = _ReceiveTime()
        self._held: str | None = None  # why new requests get 503 (Admission)
        self._parse_bodies = True  # False once the route may never read them
        self.port: int | None = None

    @property
    def connected(self) -> bool:
        return self._runner is not None

    @property
    def url(self) -> str:
        """The bound base URL (after connect())."""
        if self.port is None:
            raise NotConnected("not bound yet")
        return f"{self._opts.scheme}://{self._opts.host}:{self.port}"

    @property
    def in_flight(self) -> int:
        """Requests admitted and not answered yet (body being read, queued, delivered)."""
        return self._admitted

    @property
    def queued(self) -> int:
        """Requests received and not yet handed out by read_batch (some may have been
        answered meanwhile, by a 504 or a client gone, and will be skipped)."""
        return len(self._inbox.buffer)

    async def connect(self) -> None:
        if self._inbox.closed:
            raise EndOfInput("consumer closed")
        if self._runner is not None:
            return  # a listening server has nothing to reconnect
        opts = self._opts
        server = GuardedServer(
            self._handle,
            header_timeout=opts.header_timeout,
            max_connections=opts.max_connections,
            retry_after=opts.retry_after,
            max_headers=opts.max_headers,
            max_field_size=opts.max_header_bytes,
            max_line_size=opts.max_header_bytes,
            keepalive_timeout=opts.keepalive_timeout,
        )
        runner = web.ServerRunner(server, shutdown_timeout=2.0)
        await runner.setup()
        # Once bound, keep the port: senders were told this address.
        port = self.port if self.port is not None else self._opts.port
        site = web.TCPSite(runner, self._opts.host, port, ssl_context=self._ssl)
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            raise NotConnected(f"cannot listen on {self._opts.host}:{port}: {exc}") from exc
        self._runner = runner
        address = runner.addresses[0]
        self.port = int(address[1])

    def defer_bodies(self) -> None:
        """`ports.DefersBodies`: from now on a request's body is parsed only if something
        reads its value (a route whose outputs take it as its bytes never does)."""
        self._parse_bodies = False

    def hold(self, reason: str | None) -> None:
        """Admission: while `reason` is set, answer new requests 503 + Retry-After (after
        the credentials are checked, before the body is read)."""
        self._held = reason

    async def read_batch(self, limit: int) -> list[Delivery]:
        """Every request received and not yet handed out, at most `limit`, in arrival
        order. No back-pressure wait here: admission (max_in_flight, else 503) already
        bounds what can be waiting."""
        return await self._inbox.read_batch(limit, self._take, lambda: self._runner is not None,
                                            "not listening")

    def _take(self, limit: int) -> list[Delivery]:
        batch: list[Delivery] = []
        queue = self._inbox.buffer
        while queue and len(batch) < limit:
            pending = queue.popleft()
            # A request answered before it was read (504, client gone) is no delivery.
            if not pending.abandoned and pending.delivery is not None:
                batch.append(pending.delivery)
        return batch

    async def aclose(self) -> None:
        self._inbox.close()
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None
        # Answer every waiting request 503 (the senders retry later), so the server's
        # shutdown does not wait for settlements that will not come.
        for pending in self._waiting:
            if not pending.verdict.done():
                pending.verdict.set_result((False, "shutting down", True))
            pending.abandoned = True
        self._inbox.buffer.clear()
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    # -- request handling -----------------------------------------------------------------
    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        opts = self._opts
        if self._inbox.closed:
            return self._busy()
        if self._expected is not None and not _authorized(request, self._expected):
            return _problem(401, "missing or invalid credentials",
                            {"WWW-Authenticate": self._expected[0]})
        path, query = split_target(request.raw_path)
        if not opts.accepts_path(path):
            return _problem(404, f"no webhook at {path}")
        if request.method not in opts.allowed_methods:
            allow = ", ".join(sorted(opts.allowed_methods))
            return _problem(405, f"method {request.method} not allowed", {"Allow": allow})
        if self._held is not None or self._admitted >= opts.max_in_flight:
            return self._busy()
        declared = request.content_length
        if declared is not None and declared > opts.max_body_bytes:
            return self._too_large()
        self._admitted += 1
        pending = _Pending(asyncio.get_running_loop().create_future())
        try:
            return await self._admitted_request(request, path, query, pending)
        finally:
            pending.abandoned = True  # any later settlement has no request to answer
            # The delivery's hooks are this object's methods: without this, each request
            # left a reference cycle for the cyclic collector (measured: 10 objects each).
            pending.delivery = None
            self._waiting.discard(pending)
            self._admitted -= 1

    async def _admitted_request(
        self, request: web.BaseRequest, path: str, query: str, pending: _Pending
    ) -> web.StreamResponse:
        try:
            body = await self._body(request)
        except web.RequestPayloadError:  # e.g. a corrupt gzip body
            response = _problem(400, "unreadable body")
            response.force_close()
            return response
        except TimeoutError:
            response = _problem(408, "the body did not arrive in time")
            response.force_close()
            return response
        if body is None:
            return self._too_large()
        if self._inbox.closed:  # closed while the body arrived: nothing will read or settle it
            return self._busy()
        headers = request.raw_headers
        if self._expected is not None:
            # The ingress's own credential was for the ingress: it is not part of the
            # message, so no dead letter, report or output ever carries it.
            headers = tuple(pair for pair in headers if pair[0].lower() != b"authorization")
        record = request_record(request.method, path, query, headers, body,
                                self._received_at(), parse=self._parse_bodies)
        pending.delivery = Delivery(record, pending.settle, pending.answer, pending.waiting)
        self._inbox.put(pending)
        self._watch(pending)
        verdict = await pending.verdict
        if verdict is None:
            # The truth: the outcome is unknown. The route may still deliver it (an
            # output that is down is retried until it is back), so a sender that retries
            # should make its retry recognisable (Idempotency-Key -> the CloudEvent id).
            return _problem(504, "the message was not settled in time; it may still be "
                            "delivered (send an Idempotency-Key to make a retry a duplicate "
                            "with the same CloudEvent id)")
        if isinstance(verdict, web.Response):
            return verdict
        ack, reason, retry = verdict
        if ack:
            return web.Response(status=202)
        if retry:
            return self._busy()  # the reason may name brokers or downstream answers
        return _problem(400, (reason.splitlines() or ["refused"])[0][:200])

    async def _body(self, request: web.BaseRequest) -> bytes | None:
        """The whole body, or None when it passes max_body_bytes. A small body usually
        arrives with the head: it is taken as it is, without a wait or a timer."""
        content = request.content
        if content.is_eof():
            body = content.read_nowait()
            return body if len(body) <= self._opts.max_body_bytes else None
        if request.headers.get("Expect", "").lower() == "100-continue":
            # Only now, after the admission checks, invite the client to send the body.
            version = request.version
            await request.writer.write(
                b"HTTP/%d.%d 100 Continue\r\n\r\n" % (version.major, version.minor)
            )
        async with asyncio.timeout(self._opts.read_timeout):
            return await self._read_body(content)

    async def _read_body(self, content: aiohttp.StreamReader) -> bytes | None:
        limit = self._opts.max_body_bytes
        body = bytearray()
        async for chunk in content.iter_chunked(64 * 1024):
            body += chunk
            if len(body) > limit:
                return None
        return bytes(body)

    # -- settle_timeout ---------------------------------------------------------------------
    def _watch(self, pending: _Pending) -> None:
        """Start the request's settle_timeout. One timer serves every waiting request
        (it runs at the earliest deadline), instead of a timer per request: at most
        max_in_flight requests wait, so a check walks a short set."""
        loop = asyncio.get_running_loop()
        pending.deadline = loop.time() + self._opts.settle_timeout
        self._waiting.add(pending)
        if self._expiry is None:
            self._expiry = loop.call_at(pending.deadline, self._expire)

    def _expire(self) -> None:
        """Answer 504 to every request past its deadline; re-arm for the next one."""
        self._expiry = None
        loop = asyncio.get_running_loop()
        now = loop.time() + _EARLY
        following: float | None = None
        for pending in self._waiting:
            if pending.verdict.done():
                continue  # answered; its handler leaves the set when it runs
            if pending.deadline <= now:
                pending.verdict.set_result(None)
            elif following is None or pending.deadline < following:
                following = pending.deadline
        if following is not None and not self._inbox.closed:
            self._expiry = loop.call_at(following, self._expire)

    def _busy(self) -> web.Response:
        return _problem(503, "cannot take the message now; retry later",
                        {"Retry-After": str(self._opts.retry_after)})

    def _too_large(self) -> web.Response:
        response = _problem(413, f"body larger than {self._opts.max_body_bytes} bytes")
        # Do not keep the connection: the rest of the body is only drained, not read.
        response.force_close()
        return response


def _expected_authorization(settings: EndpointSettings) -> tuple[str, bytes] | None:
    """(WWW-Authenticate challenge, the exact Authorization value expected), or None."""
    if settings.password is None:
        return None
    if settings.username:
        pair = f"{settings.username}:{settings.password}".encode()
        return 'Basic realm="xrgw"', b"Basic " + base64.b64encode(pair)
    return 'Bearer realm="xrgw"', b"Bearer " + settings.password.encode()


def _authorized(request: web.BaseRequest, expected: tuple[str, bytes]) -> bool:
    got = request.headers.get("Authorization", "").strip().encode("utf-8", "replace")
    scheme, _, credentials = got.partition(b" ")
    want_scheme, _, want = expected[1].partition(b" ")
    if scheme.lower() != want_scheme.lower():
        return False
    credentials = credentials.strip()
    if want_scheme == b"Basic":
        # Compare decoded pairs: base64 has several spellings of the same bytes.
        try:
            credentials = base64.b64decode(credentials, validate=True)
            want = base64.b64decode(want)
        except (binascii.Error, ValueError):
            return False
    return hmac.compare_digest(credentials, want)
