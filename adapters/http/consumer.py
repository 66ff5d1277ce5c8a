"""HTTP webhook ingress (consumer) and egress (producer), with aiohttp.

Options: `adapters/_http_options.py` (one spec: names, xRegistry spellings, types,
defaults; rendered in docs/configuration.md).

Security (consumer). `https://` (or a `tls` block) serves TLS with `tls.cert_file` and
`tls.key_file`; with `tls.ca_file` every client must present a certificate signed by
that CA (mutual TLS: the handshake fails otherwise). A `password` requires
`Authorization: Bearer <password>` on every request (with a `username` too: HTTP Basic
with both); a missing or wrong one gets 401 with `WWW-Authenticate` and nothing else,
before the path, method or body is looked at. The comparison takes constant time. Error
bodies never carry exception text, broker answers or configuration: 503 says only to
retry, 400 for a nack(retry=False) gives the caller's reason (first line). The token is
never logged, and once a request is authenticated its `Authorization` header is dropped
from the record: the credential reaches no output, dead letter or report.

Security (producer). `https://` (or a `tls` block, which turns `http://` into `https://`)
verifies the server against `tls.ca_file` (default: the
system CAs) and its host name, with `tls.cert_file`/`key_file` as client certificate.
`username` + `password` -> HTTP Basic; a `password` alone -> `Authorization: Bearer`.

Consumer. `connect()` binds a server to the URI's host and port (`http://127.0.0.1:0`
takes an ephemeral port; `port` and `url` tell which). Each accepted request becomes one
Delivery (`read_batch` hands out every request received so far, in arrival order), and
the request waits for its settlement, so the HTTP status *is* the settlement: ack -> 202
Accepted; nack(retry=True) -> 503 with Retry-After (the sender retries); nack(retry=False)
-> 400 with an RFC 9457 problem body whose `detail` is the reason; no settlement within
`settle_timeout` -> 504 (a later settlement is ignored, and the Delivery reports itself
`abandoned`: the route stops retrying it, since the sender sends it again). A
CloudEvents batch is one request and so one record; the core splits it. Settling costs
no I/O of its own: it wakes the request's handler, which writes the answer on the
request's connection.

Held (`Admission`): the route listens from the start but holds the ingress while its
outputs are not connected yet; every request then gets 503 + Retry-After, before its
body is read, instead of a refused connection.

Back-pressure: at most `max_in_flight` requests are admitted (body being read, queued or
delivered and unsettled); one more is answered 503 at once, before its body is read, so
memory stays within `max_in_flight * max_body_bytes`. A declared Content-Length over the
limit is refused with 413 before reading; a chunked body is read until it passes the
limit. Either way the connection is closed after the answer.

Connections (`adapters/_http_server.py`): a request head must arrive whole within
`header_timeout` (slowloris connections are closed), an idle kept-alive connection is
closed after `keepalive_timeout`, at most `max_connections` are held (one more is
answered 503 and closed unread), and aiohttp's own 400 answers never quote the request.

Producer. Each record is sent with its method (default POST) to the endpoint URI with the
record's `path` appended. `submit()` starts a request per record at once, up to
`concurrency` in flight (then it waits for answers: back-pressure), each on a kept-alive
connection of the session's pool (`connect()` only opens the session; connections are
made as needed and reused), and returns; the Confirmation gathers the answers. HTTP has
no order to keep: requests of a batch may arrive in any order. One request per record
and submit: the route owns retries (`routes[].retry`). 2xx -> delivered; 408, 429, 5xx,
timeouts and connection errors -> failed, retryable, with the answer's `Retry-After`
(seconds) as `Outcome.retry_after` for the route to honour; 413 -> too large (dead-lettered
as `too-large`); other statuses -> failed, not retryable (redirects are not followed).
Once a request has failed because the endpoint could not be reached, the requests of
that batch not yet sent fail at once with the same reason instead of each waiting for
its own connection error.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hmac
import json
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import cast
from urllib.parse import unquote, urlsplit, urlunsplit

import aiohttp
from aiohttp import web
from yarl import URL

from adapters._http_options import OPTIONS
from adapters._http_record import (
    RequestArgs,
    RequestDefaults,
    request_record,
    split_target,
    to_request,
)
from adapters._http_server import GuardedServer
from adapters._schemes import check_scheme
from adapters._tls import client_context, describe, server_context, wants_tls
from gateway.json.values import JSON
from gateway.ports import (
    NO_REPLY_PREFIX,
    Confirmation,
    Delivery,
    EndOfInput,
    EndpointSettings,
    NotConnected,
    Outcome,
    ReplyTable,
    no_reply,
)
from gateway.protocols import HTTP, profile
from gateway.record import NativeMessage

__all__ = ["HttpConsumer", "HttpOptions", "HttpProducer"]

_URIS = profile(HTTP).endpoint.uris


@dataclass(frozen=True)
class HttpOptions:
    scheme: str
    host: str
    port: int
    prefixes: tuple[tuple[str, bool], ...]  # (prefix, from a template)
    methods: frozenset[str]
    max_body_bytes: int
    max_in_flight: int
    settle_timeout: float
    retry_after: int
    timeout: float
    max_headers: int = 64
    max_header_bytes: int = 8190
    read_timeout: float = 30.0
    keepalive_timeout: float = 75.0
    header_timeout: float = 10.0  # consumer: a request head arrives whole within it
    max_connections: int = 1024  # consumer: connections held at once; more get 503
    concurrency: int = 8  # producer: requests in flight at once
    # producer: the endpoint's method, headers and query for every request
    request: RequestDefaults = field(default_factory=RequestDefaults)

    @classmethod
    def parse(cls, settings: EndpointSettings) -> HttpOptions:
        """Read the options (`adapters/_http_options.py`); raises ValueError naming the
        bad one."""
        url = urlsplit(settings.uri)
        check_scheme(url.scheme, _URIS)
        scheme = "https" if wants_tls(url.scheme, _URIS, settings.tls) else "http"
        opts = OPTIONS.read(settings.options)
        paths = opts["paths"] or ([url.path] if url.path not in ("", "/") else [])
        return cls(
            scheme=scheme,
            host=url.hostname or "127.0.0.1",
            port=url.port if url.port is not None else (443 if url.scheme == "https" else 80),
            prefixes=tuple(_prefix(p) for p in ([paths] if isinstance(paths, str) else
                                                cast(list[str], paths))),
            methods=frozenset(m.upper() for m in cast(list[str], opts["methods"])),
            max_body_bytes=cast(int, opts["max_body_bytes"]),
            max_in_flight=cast(int, opts["max_in_flight"]),
            settle_timeout=cast(float, opts["settle_timeout"]),
            retry_after=cast(int, opts["retry_after"]),
            timeout=cast(float, opts["timeout"]),
            max_headers=max(1, cast(int, opts["max_headers"])),
            max_header_bytes=max(256, cast(int, opts["max_header_bytes"])),
            read_timeout=cast(float, opts["read_timeout"]),
            keepalive_timeout=cast(float, opts["keepalive_timeout"]),
            header_timeout=cast(float, opts["header_timeout"]),
            max_connections=cast(int, opts["max_connections"]),
            concurrency=cast(int, opts["concurrency"]),
            request=RequestDefaults(
                method=cast(str, opts["method"]).upper(),
                headers=_pairs(opts["headers"]),
                query=_pairs(opts["query"]),
            ),
        )

    def accepts_path(self, path: str) -> bool:
        if not self.prefixes:
            return True
        for prefix, templated in self.prefixes:
            if templated and path.startswith(prefix):
                return True
            # A literal prefix matches whole segments: /hooks takes /hooks/a, not /hooksx.
            if path == prefix or path.startswith(prefix.rstrip("/") + "/"):
                return True
        return False


def _pairs(value: object) -> tuple[tuple[str, str], ...]:
    """A map of name -> value, or the xRegistry list of {name, value}, as pairs."""
    if isinstance(value, dict):
        return tuple((str(k), str(v)) for k, v in value.items())
    if isinstance(value, list):
        return tuple((str(p["name"]), str(p["value"])) for p in value if isinstance(p, dict))
    return ()


def _prefix(path: str) -> tuple[str, bool]:
    if not path.startswith("/"):
        raise ValueError(f"paths: {path!r} must start with '/'")
    literal, brace, _ = path.partition("{")
    return literal, bool(brace)


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


# ====================================================================== consumer

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
    """A reply record (HTTP protocol: headers + body) as the 200 response."""
    headers = [(name, value) for name, value in reply.pairs("headers")
               if name.lower() not in _HOP_HEADERS]
    return web.Response(status=200, body=reply.body_bytes(), headers=headers)


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
        self._queue: deque[_Pending] = deque()  # received, not yet handed out
        self._waiting: set[_Pending] = set()  # every request waiting for a settlement
        self._expiry: asyncio.TimerHandle | None = None  # the next settle_timeout check
        self._admitted = 0
        self._arrived = asyncio.Event()
        self._received_at = _ReceiveTime()
        self._closed = False
        self._held: str | None = None  # why new requests get 503 (Admission)
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
        return len(self._queue)

    async def connect(self) -> None:
        if self._closed:
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

    def hold(self, reason: str | None) -> None:
        """Admission: while `reason` is set, answer new requests 503 + Retry-After (after
        the credentials are checked, before the body is read)."""
        self._held = reason

    async def read_batch(self, limit: int) -> list[Delivery]:
        """Every request received and not yet handed out, at most `limit`, in arrival
        order. No back-pressure wait here: admission (max_in_flight, else 503) already
        bounds what can be waiting."""
        while True:
            if self._closed:
                raise EndOfInput("consumer closed")
            batch = self._take(limit)
            if batch:
                return batch
            if self._runner is None:
                raise NotConnected("not listening")
            self._arrived.clear()
            await self._arrived.wait()

    def _take(self, limit: int) -> list[Delivery]:
        batch: list[Delivery] = []
        queue = self._queue
        while queue and len(batch) < limit:
            pending = queue.popleft()
            # A request answered before it was read (504, client gone) is no delivery.
            if not pending.abandoned and pending.delivery is not None:
                batch.append(pending.delivery)
        return batch

    async def aclose(self) -> None:
        self._closed = True
        self._arrived.set()
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None
        # Answer every waiting request 503 (the senders retry later), so the server's
        # shutdown does not wait for settlements that will not come.
        for pending in self._waiting:
            if not pending.verdict.done():
                pending.verdict.set_result((False, "shutting down", True))
            pending.abandoned = True
        self._queue.clear()
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    # -- request handling -----------------------------------------------------------------
    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        opts = self._opts
        if self._closed:
            return self._busy()
        if self._expected is not None and not _authorized(request, self._expected):
            return _problem(401, "missing or invalid credentials",
                            {"WWW-Authenticate": self._expected[0]})
        path, query = split_target(request.raw_path)
        if not opts.accepts_path(path):
            return _problem(404, f"no webhook at {path}")
        if request.method not in opts.methods:
            allow = ", ".join(sorted(opts.methods))
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
        if self._closed:  # closed while the body arrived: nothing will read or settle it
            return self._busy()
        headers = request.raw_headers
        if self._expected is not None:
            # The ingress's own credential was for the ingress: it is not part of the
            # message, so no dead letter, report or output ever carries it.
            headers = tuple(pair for pair in headers if pair[0].lower() != b"authorization")
        record = request_record(request.method, path, query, headers, body,
                                self._received_at())
        pending.delivery = Delivery(record, pending.settle, pending.answer, pending.waiting)
        self._queue.append(pending)
        self._watch(pending)
        self._arrived.set()
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
        if following is not None and not self._closed:
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


# ====================================================================== producer

#: How much of an answer's body is read at most to keep its connection for the next
#: request; an answer longer than that closes the connection instead.
_DRAIN_MAX = 64 * 1024


#: 413 Content Too Large: the receiver refuses the body for its size (dead-lettered as
#: too-large). HTTP has no way to learn the limit before sending, so the producer is not
#: `SizeLimited`.
_CONTENT_TOO_LARGE = 413


class _Down:
    """One submit's knowledge that the endpoint cannot be reached: the first such failure,
    which the batch's requests not yet sent report at once instead of each trying."""

    __slots__ = ("outcome",)

    def __init__(self) -> None:
        self.outcome: Outcome | None = None


class HttpProducer:
    """Sends each record as one request and reports it delivered on a 2xx answer; up to
    `concurrency` requests at once over kept-alive connections."""

    def __init__(self, settings: EndpointSettings) -> None:
        self._opts = HttpOptions.parse(settings)
        url = urlsplit(settings.uri)
        # Credentials go into an Authorization header, not into every request URL.
        netloc = url.netloc.rpartition("@")[2]
        self._base = urlunsplit((self._opts.scheme, netloc, url.path, url.query, ""))
        username = settings.username or (unquote(url.username) if url.username else None)
        password = settings.password or (unquote(url.password) if url.password else None)
        self._auth = aiohttp.BasicAuth(username, password or "") if username else None
        # A password without a user name is a bearer token.
        self._headers = (
            {"Authorization": f"Bearer {password}"} if password and not username else None
        )
        self._ssl = client_context(settings.tls) if self._opts.scheme == "https" else True
        self._session: aiohttp.ClientSession | None = None
        # A slot per request in flight: submit waits for one (back-pressure), the request
        # gives it back when answered. As many pooled connections as slots, so a request
        # never waits for a connection (that wait would count against its timeout).
        self._slots = asyncio.Semaphore(self._opts.concurrency)
        self._requests: set[asyncio.Task[Outcome]] = set()
        self._timeout = aiohttp.ClientTimeout(total=self._opts.timeout)
        # Request-reply: the answer is the response itself, so nothing strays here.
        self.replies = ReplyTable()

    @property
    def connected(self) -> bool:
        return self._session is not None and not self._session.closed

    async def connect(self) -> None:
        if self.connected:
            return
        self._session = aiohttp.ClientSession(
            timeout=self._timeout,
            auth=self._auth,
            headers=self._headers,
            connector=aiohttp.TCPConnector(ssl=self._ssl, limit=self._opts.concurrency),
        )

    async def submit(self, messages: Sequence[NativeMessage]) -> Confirmation:
        """Start a request per record (waiting for a free slot when `concurrency` are in
        flight) and return once all are started; the Confirmation gathers the answers."""
        return await self._submit(messages, None)

    async def request(self, messages: Sequence[NativeMessage], timeout: float) -> Confirmation:
        """Like submit, and a 2xx response (status aside: headers and body) is the reply;
        none within `timeout` seconds -> `no_reply` (not retryable)."""
        return await self._submit(messages, timeout)

    async def _submit(self, messages: Sequence[NativeMessage],
                      reply_timeout: float | None) -> Confirmation:
        await self.connect()
        loop = asyncio.get_running_loop()
        down = _Down()
        results: list[asyncio.Future[Outcome]] = []
        for record in messages:
            try:
                args = to_request(record, self._base, self._opts.request)
            except ValueError as exc:
                refused = loop.create_future()
                refused.set_result(Outcome.failed(str(exc), retryable=False))
                results.append(refused)
                continue
            await self._slots.acquire()
            results.append(self._start(args, down, reply_timeout))
        return asyncio.gather(*results)

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            # Closing the pool aborts the requests in flight; each then settles as a
            # failed Outcome, so every Confirmation handed out still resolves.
            await session.close()
        if self._requests:
            await asyncio.wait(self._requests)

    # -- internals ---------------------------------------------------------------------
    def _start(self, args: RequestArgs, down: _Down,
               reply_timeout: float | None) -> asyncio.Task[Outcome]:
        task = asyncio.create_task(self._request(args, down, reply_timeout))
        self._requests.add(task)
        task.add_done_callback(self._requests.discard)
        return task

    async def _request(self, args: RequestArgs, down: _Down,
                       reply_timeout: float | None) -> Outcome:
        """One record's request in its slot. Never raises: a Confirmation gives an Outcome
        for every message, so an unforeseen error is that message's failure."""
        try:
            if down.outcome is not None:
                return down.outcome
            # One-argument call when not a reply route: the plain request's shape (tests
            # count requests by wrapping `_send(args)`).
            outcome, unreachable = await (self._send(args) if reply_timeout is None
                                          else self._send(args, reply_timeout))
            if unreachable and down.outcome is None:
                down.outcome = outcome
            return outcome
        except Exception as exc:  # e.g. RuntimeError: the session was closed meanwhile
            return Outcome.failed(f"{type(exc).__name__}: {exc}")
        finally:
            self._slots.release()

    async def _send(self, args: RequestArgs,
                    reply_timeout: float | None = None) -> tuple[Outcome, bool]:
        """The outcome of one request, and whether the endpoint could not be reached.
        With `reply_timeout` (request-reply) a 2xx response is read whole, as the reply."""
        session = self._session
        if session is None:
            return Outcome.failed("producer closed"), False
        reply: NativeMessage | None = None
        try:
            async with session.request(
                args.method,
                URL(args.url, encoded=True),  # the path is already percent-encoded
                headers=args.headers,
                data=args.body,
                allow_redirects=False,
                timeout=(self._timeout if reply_timeout is None
                         else aiohttp.ClientTimeout(total=reply_timeout)),
            ) as response:
                status = response.status
                retry_after = _seconds(response.headers.get("Retry-After"))
                if reply_timeout is not None and 200 <= status < 300:
                    reply = await self._reply(response)
                    excerpt = b""
                else:
                    excerpt = await _excerpt(response.content)
        except TimeoutError:
            if reply_timeout is not None:
                return no_reply(reply_timeout), False
            return Outcome.failed(f"no answer within {self._opts.timeout} s"), False
        except aiohttp.ClientConnectorCertificateError as exc:
            # Like an unreachable endpoint: retryable, and the rest of the batch fails fast.
            return Outcome.failed(describe(exc.certificate_error)), True
        except aiohttp.ClientConnectorSSLError as exc:
            return Outcome.failed(describe(exc.os_error)), True
        except aiohttp.ClientConnectionError as exc:
            reason = f"{type(exc).__name__}: {exc}"
            unreachable = isinstance(exc, aiohttp.ClientConnectorError)
            return Outcome.failed(reason), unreachable
        except aiohttp.ClientError as exc:
            return Outcome.failed(f"{type(exc).__name__}: {exc}"), False
        if 200 <= status < 300:
            return (Outcome.ok() if reply is None else Outcome.answered(reply)), False
        text = excerpt.decode("utf-8", "replace").strip()
        reason = f"HTTP {status}" + (f": {text}" if text else "")
        if status == _CONTENT_TOO_LARGE:  # the receiver's size limit: never sent again
            return Outcome.refused_as_too_large(reason), False
        retryable = status in (408, 429) or status >= 500
        return Outcome.failed(reason, retryable=retryable, retry_after=retry_after), False


    async def _reply(self, response: aiohttp.ClientResponse) -> NativeMessage:
        """A 2xx response as an HTTP record: headers (as sent) and body, up to
        max_body_bytes (a longer body is cut there: the reply route is no bulk path)."""
        body = await response.content.read(self._opts.max_body_bytes)
        headers: list[JSON] = [{"name": k.decode("latin-1"), "value": v.decode("latin-1")}
                               for k, v in response.raw_headers]
        return NativeMessage.from_wire(HTTP, {"headers": headers}, body,
                                       response.headers.get("Content-Type"))


async def _excerpt(content: aiohttp.StreamReader) -> bytes:
    """The first 200 bytes of an answer's body (a failure's reason). The rest, up to
    _DRAIN_MAX, is read and dropped: a connection whose answer was not read to its end
    is closed instead of going back to the pool."""
    excerpt = await content.read(200)
    drained = len(excerpt)
    while drained <= _DRAIN_MAX and not content.at_eof():
        chunk = await content.read(16 * 1024)
        if not chunk:
            break
        drained += len(chunk)
    return excerpt


def _seconds(value: str | None) -> float | None:
    """Retry-After in seconds when given as a number (the HTTP-date form is ignored)."""
    if value is None or not value.strip().isdigit():
        return None
    return float(value.strip())


