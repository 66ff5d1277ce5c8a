"""`GET /tap`: the stream, served by the admin server next to the sample pages (same
listener, same token; see `gateway.observability.admin`).

Query: the filter (`route`, `definition`, `outcome`, `sample`, `limit`; `filter.py`),
`queue` (entries this tap may have waiting, default `CAPACITY`) and `format`: `ndjson`
(default; `application/x-ndjson`, one JSON object a line) or `sse` (`text/event-stream`,
also chosen by `Accept: text/event-stream`; the line's kind is the event name). The
first line is `attached`, naming the routes the filter takes; the stream ends after
`limit` messages with an `end` line, or when the client goes away. A filter no route
matches is answered 404 with the routes there are.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from datetime import UTC, datetime

from aiohttp import web

from gateway.cloudevents.timestamps import format_rfc3339
from gateway.json.text import utf8_json
from gateway.json.values import JSON, JSONObject
from gateway.tap.filter import FilterError, TapFilter
from gateway.tap.hub import CAPACITY, MAX_CAPACITY, Subscription, TapHub
from gateway.tap.line import dropped_line, message_line

#: How often an idle stream checks that its client is still there.
POLL_SECONDS = 1.0
#: An idle SSE stream sends a comment this often (proxies close silent connections).
KEEPALIVE_SECONDS = 15.0
NDJSON = "application/x-ndjson"
SSE = "text/event-stream"
#: Lines written between two turns given to the event loop.
YIELD_EVERY = 50


async def serve_tap(request: web.Request, hub: TapHub,
                    routes: Callable[[], Iterable[str]]) -> web.StreamResponse:
    try:
        tap_filter = TapFilter.from_query(request.query.items())
        capacity = _capacity(request.query.get("queue"))
    except FilterError as exc:
        return web.json_response({"error": str(exc)}, status=400)
    known = list(routes())
    tapped = [name for name in known if tap_filter.wants_route(name)]
    if not tapped:
        return web.json_response(
            {"error": "no route matches the route filter", "routes": known}, status=404)
    sse = (request.query.get("format") == "sse"
           or (request.query.get("format") is None
               and SSE in request.headers.get("Accept", "")))
    response = web.StreamResponse(headers={
        "Content-Type": f"{SSE if sse else NDJSON}; charset=utf-8",
        "Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
    subscription = hub.subscribe(tap_filter, capacity)
    try:
        await response.prepare(request)
        await _write(response, sse, {"tap": "attached", "routes": list[JSON](tapped),
                                     "filter": tap_filter.to_json(),
                                     "queue": subscription.capacity})
        await _stream(request, response, subscription, sse)
    except ConnectionError:
        pass  # the client went away: nothing to answer
    finally:
        hub.unsubscribe(subscription)
    return response


async def _stream(request: web.Request, response: web.StreamResponse,
                  subscription: Subscription, sse: bool) -> None:
    """Write what the route queues until the limit, the gateway's stop or the client's
    leaving. Lines are made here, off the route's path; every `YIELD_EVERY` lines the
    loop gets a turn, so a burst does not hold up the routes sharing it."""
    written = reported = 0
    idle = 0.0
    while True:
        if not await subscription.wait(POLL_SECONDS):
            if _gone(request):
                return
            idle += POLL_SECONDS
            if sse and idle >= KEEPALIVE_SECONDS:
                await response.write(b": keep-alive\n\n")
                idle = 0.0
        else:
            idle = 0.0
        for entry in subscription.take():
            if subscription.dropped > reported:  # lost before this one: say so first
                reported = await _dropped(response, sse, subscription, reported)
            await _write(response, sse, message_line(entry))
            written += 1
            if written % YIELD_EVERY == 0:
                await asyncio.sleep(0)
        if subscription.dropped > reported:
            reported = await _dropped(response, sse, subscription, reported)
        why = ("the gateway stops" if subscription.closed else "limit reached"
               if subscription.full and not subscription.queue else None)
        if why is not None:
            await _write(response, sse, {"tap": "end", "messages": written,
                                         "dropped": subscription.dropped, "why": why})
            return


async def _dropped(response: web.StreamResponse, sse: bool, subscription: Subscription,
                   reported: int) -> int:
    total = subscription.dropped
    await _write(response, sse, dropped_line(format_rfc3339(datetime.now(UTC)),
                                             total - reported, total))
    return total


def _capacity(text: str | None) -> int:
    if text is None:
        return CAPACITY
    try:
        value = int(text)
    except ValueError as exc:
        raise FilterError(f"queue {text!r} is not a whole number") from exc
    if not 1 <= value <= MAX_CAPACITY:
        raise FilterError(f"queue {text!r} is not between 1 and {MAX_CAPACITY}")
    return value


def _gone(request: web.Request) -> bool:
    transport = request.transport
    return transport is None or transport.is_closing()


async def _write(response: web.StreamResponse, sse: bool, line: JSONObject) -> None:
    text = encode(line)
    if sse:
        await response.write(b"event: " + str(line.get("tap")).encode() + b"\ndata: " + text
                             + b"\n\n")
    else:
        await response.write(text + b"\n")


def _encoder() -> Callable[[JSONObject], bytes]:
    """Compact JSON as UTF-8: orjson (a dependency) where it can, else `utf8_json` (an
    integer beyond 64 bits, a lone surrogate in a sender's text)."""
    def slow(line: JSONObject) -> bytes:
        return utf8_json(line, separators=(",", ":")).encode("utf-8")

    try:
        import orjson
    except ImportError:  # pragma: no cover - orjson is a dependency
        return slow
    dumps, refused = orjson.dumps, (TypeError, orjson.JSONEncodeError)

    def fast(line: JSONObject) -> bytes:
        try:
            return dumps(line)
        except refused:
            return slow(line)

    return fast


encode = _encoder()


__all__ = ["NDJSON", "SSE", "serve_tap"]
