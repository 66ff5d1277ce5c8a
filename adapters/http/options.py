"""The HTTP adapter's option spec: names, types, defaults, and the xRegistry endpoint
options it does not implement. `adapters/http/` reads its options through it; the
config loader validates endpoints with it; docs/configuration.md shows it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from adapters.http.paths import PathPrefixes
from adapters.http.record import RequestDefaults
from gateway.ports import EndpointSettings
from gateway.ports.options import (
    REQUIRED,
    Field,
    Option,
    OptionSpec,
    Unsupported,
    count,
    extend,
    one_or_many,
    seconds,
)
from gateway.ports.schemes import check_scheme
from gateway.ports.tls import wants_tls
from gateway.protocols import HTTP, profile

# RFC 9110 token: what a method and a header name may consist of.
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")


def _method(value: object) -> tuple[str, str] | None:
    if isinstance(value, str) and not _TOKEN.match(value):
        return f"{value!r} is not an HTTP method", "write a method such as POST or PUT"
    return None


def _header_names(value: object) -> tuple[str, str] | None:
    if isinstance(value, dict):
        names = [str(name) for name in value]
    elif isinstance(value, list):
        names = [str(pair.get("name")) for pair in value if isinstance(pair, dict)]
    else:
        names = []
    for name in names:
        if not _TOKEN.match(name):
            return (f"{name!r} is not a valid header name",
                    "use letters, digits and - (e.g. X-Source)")
    return None


_TEXT = Field("value", "str", "text")
_PAIR = Field("header", "object", "a header", fields=(
    Field("name", "str", "header name", default=REQUIRED),
    Field("value", "str", "header value", default=REQUIRED)))
_AUTH_HINT = ("an authorization hint; xrgw authenticates with the endpoint's username and "
              "password (HTTP Basic) or password alone (Bearer) from the gateway config")
_ROUTE_RETRIES = ("the route retries a failed request (routes[].retry), honouring the "
                  "server's Retry-After; the producer sends each request once")
OPTIONS = OptionSpec(
    protocol="HTTP",
    options=(
        Option(Field("method", "str", "producer: method of records without a method",
                     default="POST", check=_method), side="producer", xregistry=True),
        Option(Field("headers", "union",
                     "producer: headers added to every request (a record's own header of the "
                     "same name wins): a map of name to value, or the xRegistry list of "
                     "{name, value}",
                     variants=(Field("headers", "map", "name -> value", item=_TEXT,
                                     check=_header_names),
                               Field("headers", "list", "{name, value} pairs", item=_PAIR,
                                     check=_header_names))),
               side="producer", xregistry=True),
        Option(Field("query", "map",
                     "producer: query parameters added to every request (a record's own "
                     "parameter of the same name wins)", item=_TEXT),
               side="producer", xregistry=True),
        Option(one_or_many("paths",
                           "consumer: accepted path prefixes; a template such as "
                           "/store/{id}/sales accepts its literal prefix /store/. Default: the "
                           "URI's path if any, else all", "path"),
               side="consumer"),
        Option(Field("methods", "list", "consumer: accepted methods (others get 405)",
                     default=["POST", "PUT"], item=_TEXT), side="consumer"),
        count("max_body_bytes", 1024 * 1024, "consumer: larger bodies get 413"),
        count("max_in_flight", 1024, "consumer: requests held at once; more get 503"),
        seconds("settle_timeout", 30, "consumer: seconds to wait for settlement, then 504",
                 "consumer"),
        count("retry_after", 1, "consumer: Retry-After seconds on 503"),
        seconds("timeout", 10, "producer: seconds per request (connect to response)",
                 "producer"),
        count("concurrency", 8, "producer: requests in flight at once, each on a kept-alive "
              "connection of its own; a batch beyond it waits for answers", side="producer"),
        count("max_headers", 64, "consumer: more request headers get 400"),
        count("max_header_bytes", 8190, "consumer: a longer request line or header "
                      "field gets 400"),
        seconds("read_timeout", 30, "consumer: seconds to receive the whole body, then 408",
                 "consumer"),
        seconds("keepalive_timeout", 75, "consumer: idle seconds before a kept-alive "
                 "connection is closed", "consumer"),
        seconds("header_timeout", 10, "consumer: seconds for a request line and headers to "
                 "arrive whole (from the connection, or the head's first bytes); a slower "
                 "client is disconnected", "consumer"),
        count("max_connections", 1024, "consumer: connections held at once; one more is "
              "answered 503 and closed before it is read", side="consumer"),
    ),
    unsupported=(
        Unsupported("apikeyname", _AUTH_HINT),
        Unsupported("apikeyin", _AUTH_HINT),
        Unsupported("plainscheme", _AUTH_HINT),
        Unsupported("plainusernamefield", _AUTH_HINT),
        Unsupported("plainpasswordfield", _AUTH_HINT),
        *(Unsupported(name, _ROUTE_RETRIES, side="producer", xregistry=False)
          for name in ("retries", "backoff", "backoff_max")),
    ),
)


@OPTIONS.typed
@dataclass(frozen=True)
class HttpValues:
    """The options as read (`OPTIONS.read_into`), one field per option of the spec."""

    method: str
    headers: dict[str, Any] | list[Any] | None
    query: dict[str, Any] | None
    paths: str | list[str] | None
    methods: list[str]
    max_body_bytes: int
    max_in_flight: int
    settle_timeout: float
    retry_after: int
    timeout: float
    concurrency: int
    max_headers: int
    max_header_bytes: int
    read_timeout: float
    keepalive_timeout: float
    header_timeout: float
    max_connections: int



_URIS = profile(HTTP).endpoint.uris


@dataclass(frozen=True)
class HttpOptions(HttpValues):
    """The adapter's settings: the options as read, and what it derives from them and
    from the endpoint's address."""

    scheme: str
    host: str
    port: int
    served: PathPrefixes  # the paths it serves (`paths`, else the address's path)
    allowed_methods: frozenset[str]  # `methods`, upper case
    # producer: the endpoint's method, headers and query for every request
    request: RequestDefaults

    @classmethod
    def parse(cls, settings: EndpointSettings) -> HttpOptions:
        """Read the options (`adapters/http/options.py`); raises ValueError naming the
        bad one."""
        url = urlsplit(settings.uri)
        check_scheme(url.scheme, _URIS)
        scheme = "https" if wants_tls(url.scheme, _URIS, settings.tls) else "http"
        opts = OPTIONS.read_into(HttpValues, settings.options)
        paths = opts.paths or ([url.path] if url.path not in ("", "/") else [])
        return extend(
            cls, opts,
            scheme=scheme,
            host=url.hostname or "127.0.0.1",
            port=url.port if url.port is not None else (443 if url.scheme == "https" else 80),
            served=PathPrefixes(_prefix(p) for p in ([paths] if isinstance(paths, str)
                                                     else paths)),
            allowed_methods=frozenset(m.upper() for m in opts.methods),
            max_headers=max(1, opts.max_headers),
            max_header_bytes=max(256, opts.max_header_bytes),
            request=RequestDefaults(
                method=opts.method.upper(),
                headers=_pairs(opts.headers),
                query=_pairs(opts.query),
            ),
        )

    def accepts_path(self, path: str) -> bool:
        return self.served.accepts(path)


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
