"""The HTTP sink: each record a request (one connection pool per producer); the status
code is the outcome.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from urllib.parse import unquote, urlsplit, urlunsplit

import aiohttp
from yarl import URL

from adapters.http.options import HttpOptions
from adapters.http.record import RequestArgs, to_request
from gateway.json.values import JSON
from gateway.ports import Confirmation, EndpointSettings, Outcome, ReplyTable, no_reply
from gateway.ports.tls import client_context, describe
from gateway.protocols import HTTP
from gateway.record import NativeMessage

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
        """A 2xx response as an HTTP record: status, headers (as sent) and body, up to
        max_body_bytes (a longer body is cut there: the reply route is no bulk path)."""
        body = await response.content.read(self._opts.max_body_bytes)
        headers: list[JSON] = [{"name": k.decode("latin-1"), "value": v.decode("latin-1")}
                               for k, v in response.raw_headers]
        return NativeMessage.from_wire(HTTP, {"status": str(response.status),
                                              "headers": headers}, body,
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
