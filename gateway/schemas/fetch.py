"""Schema documents at URLs: fetched once per configuration load, and cached.

Only routes that enforce a schema fetch (a catalog load alone never touches the network).
Each load -- the start, every reload, which a changed registry poll triggers -- asks every
URL once (`SchemaFetcher.generation`); the daemon's registry poll also asks whether a
schema URL answers with another document (`changed`), which reloads. When a URL does not
answer, the copy of an earlier load serves, so an unreachable registry never replaces a
working schema set. Without an earlier copy the reference is unresolved, which `validate`
and `run` refuse under enforce.

What a definitions document may make the gateway fetch is the operator's call
(`FetchPolicy`, config `schema_fetch`): a document served by a registry reaches only that
registry's origin and the `allow` prefixes, and never a local file; a document read from a
local file (the operator's own) reaches any http(s) URL and local files. Redirects are
followed only within the origin, proxies only when configured (the HTTP_PROXY
environment is ignored), and every fetch is bounded in size and in total time.
"""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass, replace
from http.client import HTTPMessage
from typing import IO

from gateway.definitions.schema_model import SchemaResolution
from gateway.definitions.schema_refs import content_of
from gateway.json.values import JSON

DEFAULT_TIMEOUT = 10.0
_MAX_BYTES = 16 * 1024 * 1024
_CHUNK = 64 * 1024
_DEFAULT_PORTS = {"http": 80, "https": 443}


def origin_of(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) of a URL, lowercased, the default port filled in."""
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port or _DEFAULT_PORTS.get(scheme)
    except ValueError:
        port = None
    return scheme, (parts.hostname or "").lower(), port


@dataclass(frozen=True)
class FetchPolicy:
    """Where schema URLs may be fetched from (config `schema_fetch`)."""

    allow: tuple[str, ...] = ()  # URL prefixes any document may fetch under
    proxy: str | None = None  # an HTTP proxy; None: no proxy, whatever the environment
    timeout: float = DEFAULT_TIMEOUT  # one fetch, start to end

    def refusal(self, url: str, referrer: str | None) -> str | None:
        """Why `url`, named by the document at `referrer` (None: a local file), is not
        fetched; None when it may be."""
        scheme = urllib.parse.urlsplit(url).scheme.lower()
        if scheme == "file":
            if referrer is None:
                return None
            return "a registry-served document may not name a local file"
        if scheme not in ("http", "https"):
            return f"unsupported scheme {scheme}:"
        if referrer is None or origin_of(url) == origin_of(referrer):
            return None
        if any(_under(url, prefix) for prefix in self.allow):
            return None
        scheme_, host, port = origin_of(referrer)
        return (f"not on the origin of the registry that served the document "
                f"({scheme_}://{host}:{port}) nor under schema_fetch.allow")


def _under(url: str, prefix: str) -> bool:
    if origin_of(url) != origin_of(prefix):
        return False
    path, want = urllib.parse.urlsplit(url).path, urllib.parse.urlsplit(prefix).path
    return path.startswith(want) if want.endswith("/") or not want else (
        path == want or path.startswith(want + "/"))


class _SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect is followed only within the origin: a document cannot bounce a fetch to
    an internal address (or from https to http)."""

    def redirect_request(
        self, req: urllib.request.Request, fp: IO[bytes], code: int, msg: str,
        headers: HTTPMessage, newurl: str,
    ) -> urllib.request.Request | None:
        if origin_of(req.full_url) != origin_of(newurl):
            raise urllib.error.HTTPError(
                req.full_url, code, "redirect to another origin refused", headers, None)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _opener(proxy: str | None) -> urllib.request.OpenerDirector:
    proxies = {} if proxy is None else {"http": proxy, "https": proxy}
    return urllib.request.build_opener(urllib.request.ProxyHandler(proxies),
                                       _SameOriginRedirects())


class SchemaFetcher:
    def __init__(self, timeout: float = DEFAULT_TIMEOUT,
                 policy: FetchPolicy | None = None) -> None:
        self.policy = policy or FetchPolicy(timeout=timeout)
        self._opener = _opener(self.policy.proxy)
        self._referrers: dict[str, str | None] = {}  # url -> the document that named it
        self.generation = 0
        self._cache: dict[str, tuple[int, JSON | bytes]] = {}  # url -> (generation, content)
        self._lock = threading.Lock()
        self.failures: dict[str, str] = {}  # url -> why the latest attempt failed

    @property
    def timeout(self) -> float:
        return self.policy.timeout

    def configure(self, policy: FetchPolicy) -> None:
        """The operator's rules of this configuration load."""
        with self._lock:
            if policy != self.policy:
                self.policy, self._opener = policy, _opener(policy.proxy)

    def next_generation(self) -> None:
        """A new configuration load: URLs are asked again (once each)."""
        with self._lock:
            self.generation += 1
            self.failures.clear()

    def materialize(self, resolution: SchemaResolution) -> SchemaResolution:
        """`resolution` with its remote document fetched, or an error saying why not."""
        url = resolution.remote
        if url is None or resolution.document is None:
            return resolution
        refused = self.policy.refusal(url, resolution.referrer)
        if refused is not None:
            return SchemaResolution(error=f"schema {url} is not fetched: {refused}",
                                    fix="embed the schema in the definitions, serve it from "
                                    "the registry, or list its URL prefix in "
                                    "schema_fetch.allow")
        with self._lock:
            self._referrers[url] = resolution.referrer
        content = self.fetch(url)
        if content is None:
            why = self.failures.get(url, "no answer")
            return SchemaResolution(error=f"schema {url} cannot be fetched: {why}",
                                    fix="make the URL reachable, or embed the schema in "
                                    "the definitions (schemagroups or dataschema)")
        return SchemaResolution(replace(resolution.document, content=content))

    def fetch(self, url: str) -> JSON | bytes | None:
        with self._lock:
            cached = self._cache.get(url)
            if cached is not None and cached[0] == self.generation:
                return cached[1]
        try:
            content = self._download(url)
        except (OSError, ValueError) as exc:  # URLError, HTTPError, timeouts are OSErrors
            with self._lock:
                self.failures[url] = str(getattr(exc, "reason", exc))
            return None if cached is None else cached[1]  # the last working copy
        with self._lock:
            self._cache[url] = (self.generation, content)
        return content

    def changed(self, urls: Iterable[str]) -> bool:
        """Whether any of `urls` now answers with another document than the cached one
        (the registry poll asks; a URL that does not answer has not changed)."""
        for url in urls:
            with self._lock:
                cached = self._cache.get(url)
                named = url in self._referrers
                referrer = self._referrers.get(url)
            if named and self.policy.refusal(url, referrer) is not None:
                continue  # the policy changed since: not asked
            try:
                content = self._download(url)
            except (OSError, ValueError):
                continue
            if cached is None or cached[1] != content:
                return True
        return False

    def _download(self, url: str) -> JSON | bytes:
        timeout = self.policy.timeout
        deadline = time.monotonic() + timeout
        request = urllib.request.Request(url, headers={"Accept": "*/*"})
        raw = bytearray()
        with self._opener.open(request, timeout=timeout) as response:
            # read1: what has arrived (read(n) waits for all n bytes of a dripping answer)
            read = getattr(response, "read1", response.read)
            while True:
                chunk = read(_CHUNK)
                if not chunk:
                    break
                raw += chunk
                if len(raw) > _MAX_BYTES:
                    raise ValueError(f"larger than {_MAX_BYTES} bytes")
                if time.monotonic() > deadline:
                    # A server dripping bytes must not hold a load (or a reload) forever.
                    raise TimeoutError(f"not complete within {timeout:g}s")
        return content_of(bytes(raw), url.split("?", 1)[0])


#: The process's fetcher: reloads share its cache.
FETCHER = SchemaFetcher()
