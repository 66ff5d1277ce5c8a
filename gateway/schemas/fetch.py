"""Schema documents at URLs: fetched once per configuration load, and cached.

Only routes that enforce a schema fetch (a catalog load alone never touches the network).
Each load -- the start, every reload, which a changed registry poll triggers -- asks every
URL once (`SchemaFetcher.generation`); the daemon's registry poll also asks whether a
schema URL answers with another document (`changed`), which reloads. When a URL does not
answer, the copy of an earlier load serves, so an unreachable registry never replaces a
working schema set. Without an earlier copy the reference is unresolved, which `validate`
and `run` refuse under enforce.
"""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from collections.abc import Iterable
from dataclasses import replace

from gateway.jsontypes import JSON
from gateway.schemas.model import SchemaResolution
from gateway.schemas.resolve import content_of

DEFAULT_TIMEOUT = 10.0
_MAX_BYTES = 16 * 1024 * 1024


class SchemaFetcher:
    def __init__(self, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.timeout = timeout
        self.generation = 0
        self._cache: dict[str, tuple[int, JSON | bytes]] = {}  # url -> (generation, content)
        self._lock = threading.Lock()
        self.failures: dict[str, str] = {}  # url -> why the latest attempt failed

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
            try:
                content = self._download(url)
            except (OSError, ValueError):
                continue
            if cached is None or cached[1] != content:
                return True
        return False

    def _download(self, url: str) -> JSON | bytes:
        request = urllib.request.Request(url, headers={"Accept": "*/*"})
        with urllib.request.urlopen(request, timeout=self.timeout) as response:
            raw = response.read(_MAX_BYTES + 1)
        if len(raw) > _MAX_BYTES:
            raise ValueError(f"larger than {_MAX_BYTES} bytes")
        return content_of(raw, url.split("?", 1)[0])


#: The process's fetcher: reloads share its cache.
FETCHER = SchemaFetcher()
