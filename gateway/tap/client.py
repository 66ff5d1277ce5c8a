"""Reading a gateway's `/tap` stream (NDJSON) as it comes, for `xrgw tap`.

`tap_url` makes the URL from the admin address and the filter; `read_tap` yields each
line's JSON object as soon as its line arrived (`http.client` reads a chunked body
line by line), until the server ends the stream (`end` line) or the connection closes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from http.client import HTTPConnection, HTTPException, HTTPSConnection
from urllib.parse import urlencode, urlsplit

from gateway.json.values import JSONObject


class TapError(RuntimeError):
    """The tap could not be opened (the message says why: refused, 401, 404, ...)."""


def tap_url(where: str, *, routes: Sequence[str] = (), definitions: Sequence[str] = (),
            outcomes: Sequence[str] = (), sample: float | None = None,
            limit: int | None = None, queue: int | None = None) -> str:
    """The `/tap` URL of an admin address (`http://127.0.0.1:9464`) with the filter."""
    base = where.rstrip("/")
    if not base.endswith("/tap"):
        base += "/tap"
    query: list[tuple[str, str]] = [("route", r) for r in routes]
    query += [("definition", d) for d in definitions]
    query += [("outcome", o) for o in outcomes]
    if sample is not None:
        query.append(("sample", repr(sample)))
    if limit is not None:
        query.append(("limit", str(limit)))
    if queue is not None:
        query.append(("queue", str(queue)))
    return f"{base}?{urlencode(query)}" if query else base


def read_tap(url: str, *, token: str | None = None, connect_timeout: float = 10.0,
             idle_timeout: float | None = None) -> Iterator[JSONObject]:
    """The stream's lines; raises `TapError` when it cannot be opened or breaks off.
    `idle_timeout` bounds each wait for a line (None: wait for ever: a quiet route sends
    nothing, and a tap is often opened before the traffic it waits for)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise TapError(f"{url}: not an http(s) URL of a gateway's admin server")
    connection_type = HTTPSConnection if parts.scheme == "https" else HTTPConnection
    connection = connection_type(parts.hostname, parts.port, timeout=connect_timeout)
    headers = {"Accept": "application/x-ndjson"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    try:
        connection.request("GET", target, headers=headers)
        if connection.sock is not None:
            connection.sock.settimeout(idle_timeout)
        answer = connection.getresponse()
    except OSError as exc:
        connection.close()
        raise TapError(f"{url}: {exc}") from exc
    try:
        if answer.status != 200:
            raise TapError(f"{url}: HTTP {answer.status}: {_error_text(answer.read())}")
        try:
            for raw in answer:
                text = raw.strip()
                if not text:
                    continue
                line = json.loads(text)
                if isinstance(line, dict):
                    yield line
                    if line.get("tap") == "end":
                        return
        except (OSError, HTTPException) as exc:
            raise TapError(f"{url}: the stream broke off ({exc})") from exc
    finally:
        connection.close()


def _error_text(body: bytes) -> str:
    try:
        doc = json.loads(body)
    except ValueError:
        return body.decode("utf-8", "replace").strip()[:200]
    if isinstance(doc, dict) and "error" in doc:
        routes = doc.get("routes")
        extra = f" (routes: {', '.join(map(str, routes))})" if isinstance(routes, list) else ""
        return f"{doc['error']}{extra}"
    return str(doc)[:200]


__all__ = ["TapError", "read_tap", "tap_url"]
