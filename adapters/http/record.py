"""HTTP request <-> native message record, both directions, no I/O.

Receive: `method`, `path` (the request target's path exactly as sent, percent-encoding
kept, so a definition's template sees what the client sent), `query` (first value per
name; names and values as sent, not percent-decoded) and `headers` (every header line in
order, names as received). The server has already undone a gzip/deflate/br/zstd
`Content-Encoding`, so that header is left out: the recorded body is not encoded anymore.

Body rule (receive), the same as the other adapters':
* empty body -> no body;
* a `Content-Type` is given: JSON-family types (`application/json`, `text/json`,
  `*/*+json`, CloudEvents batches included) become `data` when the body parses; anything
  else stays `payload` bytes, so a declared non-JSON type is never reinterpreted;
* no `Content-Type`: `data` only when the body parses as a JSON object or array.

Send: method from the record (default POST), URL = endpoint URL + record `path` + record
`query`, the record's headers minus the ones that describe one hop's framing (Host,
Content-Length, Transfer-Encoding, Connection, ...), which the client sets itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import quote

from gateway.json.values import JSON
from gateway.protocols import HTTP
from gateway.record import NativeMessage
from gateway.record import is_json_media_type as is_json_type

__all__ = [
    "RequestArgs",
    "is_json_type",
    "request_record",
    "split_target",
    "to_record",
    "to_request",
]


# Encodings aiohttp's server decodes before the handler sees the body.
_DECODED_ENCODINGS = frozenset({"gzip", "x-gzip", "deflate", "br", "zstd", "identity"})

# Headers that belong to one connection/hop, or that the client computes for the body it
# actually sends; copying them from a received request would corrupt the new one.
_HOP_HEADERS = frozenset(
    {
        "host",
        "content-length",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "upgrade",
        "expect",
    }
)

# Characters kept as they are when making a record's path/query safe to send: the
# RFC 3986 pchar set plus "%" (existing escapes stay) and "/" or "?" where they belong.
_PATH_SAFE = "/%:@!$&'()*+,;=-._~"
_QUERY_SAFE = "%:@!$'()*+,;/?-._~"
_VALUE_SAFE = _QUERY_SAFE + "="


def split_target(target: str) -> tuple[str, str]:
    """(raw path, raw query string) of a request target, absolute-form included."""
    if not target.startswith("/") and "://" in target:
        # absolute-form (proxy style): drop scheme and authority, keep the path as sent
        rest = target.split("://", 1)[1]
        slash = rest.find("/")
        target = rest[slash:] if slash >= 0 else "/"
    target = target.split("#", 1)[0]
    path, _, query = target.partition("?")
    return path or "/", query


def _query(raw: str) -> dict[str, JSON]:
    out: dict[str, JSON] = {}
    for part in raw.split("&"):
        if not part:
            continue
        name, _, value = part.partition("=")
        out.setdefault(name, value)  # the first value wins
    return out


def _text(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")  # HTTP's historical charset; never fails


# Header names already decoded, with their lower case: senders repeat the same few names
# on every request, so each is decoded and lowered once. Bounded, so that a sender
# inventing names cannot grow it: names beyond the bound are decoded every time.
_NAMES: dict[bytes, tuple[str, str]] = {}
_NAMES_MAX = 512


def _header_name(raw: bytes) -> tuple[str, str]:
    known = _NAMES.get(raw)
    if known is None:
        name = _text(raw)
        known = (name, name.lower())
        if len(_NAMES) < _NAMES_MAX:
            _NAMES[raw] = known
    return known


def to_record(
    method: str,
    target: str,
    raw_headers: Sequence[tuple[bytes, bytes]],
    body: bytes,
    received_at: str | None = None,
) -> NativeMessage:
    """The record of one received request; total (never raises on odd input)."""
    path, raw_query = split_target(target)
    return request_record(method, path, raw_query, raw_headers, body, received_at)


def request_record(
    method: str,
    path: str,
    raw_query: str,
    raw_headers: Sequence[tuple[bytes, bytes]],
    body: bytes,
    received_at: str | None = None,
    *,
    parse: bool = True,
) -> NativeMessage:
    """`to_record` for a target already split (`split_target`): the server splits it once
    to check the path and passes the parts on. `parse=False`: its body is parsed when
    first read (`NativeMessage.from_wire`)."""
    headers: list[JSON] = []
    content_type: str | None = None
    for raw_name, raw_value in raw_headers:
        name, lower = _header_name(raw_name)
        value = _text(raw_value)
        if lower == "content-encoding" and value.strip().lower() in _DECODED_ENCODINGS:
            continue
        if lower == "content-type" and content_type is None:
            content_type = value
        headers.append({"name": name, "value": value})
    fields: dict[str, JSON] = {"method": method, "path": path}
    if raw_query:
        query = _query(raw_query)
        if query:
            fields["query"] = query
    fields["headers"] = headers
    return NativeMessage.from_wire(HTTP, fields, body, content_type, received_at, parse=parse)


class RequestArgs:
    """What the producer needs to send one record."""

    __slots__ = ("body", "headers", "method", "url")

    def __init__(self, method: str, url: str, headers: list[tuple[str, str]], body: bytes) -> None:
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body


@dataclass(frozen=True)
class RequestDefaults:
    """What the endpoint adds to every request (its `method`, `headers`, `query` options);
    a record's own method, header or query parameter of the same name wins."""

    method: str = "POST"
    headers: tuple[tuple[str, str], ...] = ()
    query: tuple[tuple[str, str], ...] = ()


def to_request(record: NativeMessage, base_url: str,
               defaults: RequestDefaults = RequestDefaults()) -> RequestArgs:
    """Request arguments for a record; raises ValueError when it cannot be sent.

    The record's `path` is appended to the endpoint URL's path (one "/" between them), so
    `http://hooks.example/in` + `/store/12` is `http://hooks.example/in/store/12`.
    """
    method = record.get("method")
    if method is None:
        method = defaults.method
    if not isinstance(method, str) or not method.isalpha():
        raise ValueError(f"invalid method {method!r}")
    base, _, base_query = base_url.partition("?")
    url = base
    path = record.get("path")
    if isinstance(path, str) and path not in ("", "/"):
        url = base.rstrip("/") + "/" + quote(path.lstrip("/"), safe=_PATH_SAFE)
    elif path is not None and not isinstance(path, str):
        raise ValueError("record path must be a string")
    params = [base_query] if base_query else []
    query = record.get("query")
    own = query if isinstance(query, dict) else {}
    pairs = [*own.items(), *((n, v) for n, v in defaults.query if n not in own)]
    for name, value in pairs:
        params.append(f"{quote(name, safe=_QUERY_SAFE)}={quote(str(value), safe=_VALUE_SAFE)}")
    if params:
        url += "?" + "&".join(params)
    headers = [(n, v) for n, v in record.pairs("headers") if n.lower() not in _HOP_HEADERS]
    if defaults.headers:
        names = {n.lower() for n, _ in headers}
        headers += [(n, v) for n, v in defaults.headers if n.lower() not in names]
    if record.has_json_data and not any(n.lower() == "content-type" for n, _ in headers):
        # Say so, so that the receiver (ours included) reads the body back as JSON.
        headers.append(("Content-Type", "application/json"))
    return RequestArgs(method.upper(), url, headers, record.body_bytes())
