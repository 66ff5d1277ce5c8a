"""Loading raw catalog documents from files, directories and registry URLs.

Nothing here raises on bad input: unreadable files, malformed JSON/YAML and HTTP failures
become error `Problem`s (file, path `$`, what happened, how to fix it) and the source is
skipped, so one broken file does not hide the problems of the others.

Directories are read non-recursively: catalogs sit side by side, while sub-folders tend
to hold schemas, generated code or vendored copies we must not pick up by accident.
Hidden files are skipped and names are read in sorted order so loading is reproducible.

A registry URL is read with `GET <url>/export` (the whole registry in document view, which
also works on static "no-code" registries), falling back to `GET <url>?inline=*` (API view
with nested collections) when the server has no export. Only the standard library is used.

Registry requests may carry headers (e.g. `Authorization: Bearer ...`; they are never part
of a problem message) and verify an `https://` registry against a CA file (default: the
system trust store; hostname checked). Redirects are followed only to the same scheme,
host and port when headers are set, so a token is never forwarded elsewhere, and never
from https to http.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from http.client import HTTPMessage
from pathlib import Path
from typing import IO

import yaml

from gateway.json.values import JSON
from gateway.spec.problems import Problem

JSON_SUFFIXES = (".xreg.json", ".cereg", ".json")
YAML_SUFFIXES = (".cereg.yaml", ".cereg.yml", ".yaml", ".yml")
DEFAULT_TIMEOUT = 10.0
# A definitions document (a file, a registry export) is parsed whole, and the parsed
# catalog takes some 35 times its JSON size (measured: 5 MB of JSON holding 10,000
# definitions -> 195 MiB resident; as YAML, 6 MB -> 350 MiB), twice during a reload.
# 8 MiB keeps a gateway inside the chart's default 512 MiB limit; a larger registry is
# loaded group by group, or with the limit raised (XRGW_DEFINITIONS_MAX_BYTES, bytes) and
# the memory limit with it.
DEFAULT_MAX_DOCUMENT_BYTES = 8 * 1024 * 1024
# A YAML document's values after alias expansion ("billion laughs": a few lines that
# expand into billions of values), and its nesting: 10,000 definitions are ~410,000.
MAX_YAML_NODES = 500_000
MAX_YAML_DEPTH = 64


def max_document_bytes() -> int:
    """The size limit of one definitions document (XRGW_DEFINITIONS_MAX_BYTES or 8 MiB)."""
    raw = os.environ.get("XRGW_DEFINITIONS_MAX_BYTES", "")
    return int(raw) if raw.isdigit() and int(raw) > 0 else DEFAULT_MAX_DOCUMENT_BYTES


_TOO_LARGE_FIX = ("split the definitions into smaller documents (load the registry group by "
                  "group), or raise XRGW_DEFINITIONS_MAX_BYTES together with the memory "
                  "limit (about 35 bytes of memory per byte of document)")


@dataclass(frozen=True)
class RawDocument:
    """One parsed document. `name` is what problems cite (the path or the URL read);
    `bases` are the addresses absolute references use to point into it."""

    name: str
    data: JSON
    bases: tuple[str, ...] = ()


@dataclass(frozen=True)
class RegistryAccess:
    """How to reach one registry URL: request headers (values are secrets) and the CA
    bundle that verifies an https registry (None: the system trust store)."""

    headers: Mapping[str, str] | None = None
    ca_file: str | None = None

    def __repr__(self) -> str:
        names = sorted(self.headers or {})
        return f"RegistryAccess(headers={names!r} (values hidden), ca_file={self.ca_file!r})"


def load_sources(
    sources: Sequence[str | Path], timeout: float = DEFAULT_TIMEOUT,
    access: Mapping[str, RegistryAccess] | None = None,
) -> tuple[list[RawDocument], list[Problem]]:
    """`access` maps a registry URL (as given in `sources`) to its headers and CA file."""
    documents: list[RawDocument] = []
    problems: list[Problem] = []
    for source in sources:
        text = str(source)
        if isinstance(source, str) and text.lower().startswith(("http://", "https://")):
            how = (access or {}).get(text) or RegistryAccess()
            _collect(load_url(text, timeout, headers=how.headers, ca_file=how.ca_file),
                     documents, problems)
            continue
        path = Path(source)
        if path.is_dir():
            files = list_directory(path)
            if not files:
                problems.append(_warn(text, "directory holds no catalog files",
                                      "add *.xreg.json, *.cereg, *.json or *.yaml files"))
            for file in files:
                _collect(load_file(file), documents, problems)
        else:
            _collect(load_file(path), documents, problems)
    return documents, problems


def _collect(
    result: RawDocument | Problem, documents: list[RawDocument], problems: list[Problem]
) -> None:
    if isinstance(result, Problem):
        problems.append(result)
    else:
        documents.append(result)


def list_directory(directory: Path) -> list[Path]:
    suffixes = JSON_SUFFIXES + YAML_SUFFIXES
    return sorted(
        p for p in directory.iterdir()
        if p.is_file() and not p.name.startswith(".") and p.name.lower().endswith(suffixes)
    )


def load_file(path: Path) -> RawDocument | Problem:
    name = str(path)
    limit = max_document_bytes()
    try:
        with path.open("rb") as stream:
            raw = stream.read(limit + 1)
    except FileNotFoundError:
        return _error(name, "file not found", "check the path of the definitions source")
    except OSError as exc:
        return _error(name, f"cannot read file: {exc.strerror or exc}",
                      "check that the file exists and is readable")
    except ValueError as exc:  # e.g. a NUL byte in the path
        return _error(name, f"invalid file name: {exc}", "check the path")
    if len(raw) > limit:
        return _error(name, f"document larger than {limit} bytes", _TOO_LARGE_FIX)
    lower = path.name.lower()
    if lower.endswith(YAML_SUFFIXES):
        parsed = parse_yaml(raw, name)
    elif lower.endswith(JSON_SUFFIXES):
        parsed = parse_json(raw, name)
    else:  # unknown extension: JSON is the common case, YAML the fallback
        parsed = parse_json(raw, name)
        if isinstance(parsed, Problem):
            as_yaml = parse_yaml(raw, name)
            parsed = parsed if isinstance(as_yaml, Problem) else as_yaml
    if isinstance(parsed, Problem):
        return parsed
    resolved = path.resolve()
    return RawDocument(name, parsed, (name, str(resolved), resolved.as_uri(), path.name))


def parse_json(raw: bytes, name: str) -> JSON | Problem:
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        return _error(name, f"not UTF-8 text ({exc.reason} at byte {exc.start})",
                      "save the document as UTF-8")
    try:
        return as_json(json.loads(text))
    except json.JSONDecodeError as exc:
        return Problem("error", name, "$", f"malformed JSON: {exc.msg}",
                       "fix the JSON syntax there (commas, quotes, brackets)",
                       line=exc.lineno, column=exc.colno)
    except RecursionError:
        return _error(name, "JSON nesting is too deep", "flatten the document")


def parse_yaml(raw: bytes, name: str) -> JSON | Problem:
    """A YAML document, bounded as the config is: composed first (aliases still shared),
    then refused when it expands past MAX_YAML_NODES values or MAX_YAML_DEPTH levels,
    before anything is built."""
    loader = yaml.SafeLoader(raw)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        refused = _yaml_bounds(node)
        if refused is not None:
            return _error(name, refused, "write the document out plainly: fewer YAML "
                          "aliases, less nesting, or split it into smaller documents")
        return as_json(loader.construct_document(node))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        return Problem("error", name, "$", f"malformed YAML: {problem}",
                       "fix the YAML syntax there (indentation, quotes, colons)",
                       line=mark.line + 1 if mark else None,
                       column=mark.column + 1 if mark else None)
    except RecursionError:
        return _error(name, "YAML nesting is too deep", "flatten the document")
    except (ValueError, OverflowError) as exc:  # e.g. an impossible date
        return _error(name, f"YAML value error: {exc}",
                      "quote the value if it is not meant as a date")
    finally:
        loader.dispose()


def _yaml_bounds(node: yaml.Node) -> str | None:
    """Why a composed YAML tree is too large to build (None: it is not). Walks the tree
    as it would expand (an alias is visited at each use), stopping at the limits."""
    pending: list[tuple[yaml.Node, int]] = [(node, 1)]
    visited = 0
    while pending:
        current, depth = pending.pop()
        visited += 1
        if visited > MAX_YAML_NODES:
            return f"the YAML expands to more than {MAX_YAML_NODES} values"
        if depth > MAX_YAML_DEPTH:
            return f"the YAML nests deeper than {MAX_YAML_DEPTH} levels"
        if isinstance(current, yaml.MappingNode):
            for key, value in current.value:
                pending.append((key, depth + 1))
                pending.append((value, depth + 1))
        elif isinstance(current, yaml.SequenceNode):
            pending.extend((item, depth + 1) for item in current.value)
    return None


def as_json(value: object) -> JSON:
    """Coerce parsed YAML (or any Python value) into the JSON data model.

    YAML yields dates, non-string keys, sets and bytes; catalogs are JSON documents, so
    those become their JSON spellings instead of surprising the reader later.
    """
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, dict):
        return {_key(k): as_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [as_json(v) for v in value]
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode("ascii")
    return str(value)


def _key(key: object) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    return "null" if key is None else str(key)


# -- registry URLs ---------------------------------------------------------------------------


def load_url(
    url: str, timeout: float = DEFAULT_TIMEOUT, *,
    headers: Mapping[str, str] | None = None, ca_file: str | None = None,
) -> RawDocument | Problem:
    root = url.rstrip("/")
    export = _with_path(root, "/export")
    try:
        opener = _opener(ca_file, bool(headers))
    except (OSError, ssl.SSLError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return _error(url, f"cannot use the CA file '{ca_file}': {reason}",
                      "give a readable PEM CA bundle as ca_file")
    first = _fetch_json(export, timeout, headers or {}, opener)
    if not isinstance(first, Problem):
        return RawDocument(export, first, (root,))
    if first.message.startswith(("cannot connect", "TLS")) or " 401 " in f" {first.message} ":
        return first  # the fallback would fail the same way, after another timeout
    inline = _with_query(root, "inline", "*")
    second = _fetch_json(inline, timeout, headers or {}, opener)
    if not isinstance(second, Problem):
        return RawDocument(inline, second, (root,))
    return _error(
        url,
        f"cannot load the registry: GET {export} -> {first.message}; "
        f"GET {inline} -> {second.message}",
        "check the registry URL (the registry root, e.g. https://host/registry) and that "
        "it serves /export or ?inline=*",
    )


def _with_path(url: str, suffix: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(parts._replace(path=parts.path.rstrip("/") + suffix))


def _with_query(url: str, key: str, value: str) -> str:
    parts = urllib.parse.urlsplit(url)
    query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    query = [(k, v) for k, v in query if k != key] + [(key, value)]
    encoded = urllib.parse.urlencode(query, safe="*")
    return urllib.parse.urlunsplit(parts._replace(query=encoded))


class _SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    """Follows a redirect only to the same scheme, host and port: the request headers
    (a token) must not travel to another server, nor from https to http."""

    def redirect_request(
        self, req: urllib.request.Request, fp: IO[bytes], code: int, msg: str,
        headers: HTTPMessage, newurl: str,
    ) -> urllib.request.Request | None:
        old, new = urllib.parse.urlsplit(req.full_url), urllib.parse.urlsplit(newurl)
        if (old.scheme, old.netloc) != (new.scheme, new.netloc):
            raise urllib.error.HTTPError(
                req.full_url, code, f"redirect to another origin ({new.scheme}://"
                f"{new.hostname}) refused while sending registry headers", headers, None)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _opener(ca_file: str | None, with_headers: bool) -> urllib.request.OpenerDirector:
    context = ssl.create_default_context(cafile=ca_file)
    handlers: list[urllib.request.BaseHandler] = [urllib.request.HTTPSHandler(context=context)]
    if with_headers:
        handlers.append(_SameOriginRedirects())
    return urllib.request.build_opener(*handlers)


def _fetch_json(
    url: str, timeout: float, headers: Mapping[str, str] | None = None,
    opener: urllib.request.OpenerDirector | None = None,
) -> JSON | Problem:
    request = urllib.request.Request(
        url, headers={"Accept": "application/json, application/yaml;q=0.5", **(headers or {})}
    )
    opener = opener or _opener(None, bool(headers))
    limit = max_document_bytes()
    try:
        with opener.open(request, timeout=timeout) as response:
            declared = response.headers.get("Content-Length", "")
            if declared.isdigit() and int(declared) > limit:
                return _error(url, f"response larger than {limit} bytes "
                              f"({declared} declared)", _TOO_LARGE_FIX)
            body: bytes = response.read(limit + 1)
    except urllib.error.HTTPError as exc:
        fix = ("check the registry headers (e.g. the Authorization token)"
               if exc.code in (401, 403) else "check the registry URL")
        return _error(url, f"HTTP {exc.code} {exc.reason}", fix)
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, ssl.SSLCertVerificationError):
            return _error(url, f"TLS: the registry certificate was rejected: "
                          f"{exc.reason.verify_message}",
                          "give the CA that signed the registry certificate as ca_file")
        if isinstance(exc.reason, ssl.SSLError):
            return _error(url, f"TLS handshake failed: {exc.reason.reason}",
                          "check that the registry speaks https and the ca_file")
        return _error(url, f"cannot connect: {exc.reason}",
                      "check the host name, port and network access to the registry")
    except (TimeoutError, OSError) as exc:
        return _error(url, f"cannot connect: {exc}",
                      "check the host name, port and network access to the registry")
    except ValueError as exc:  # e.g. an invalid URL
        return _error(url, f"invalid URL: {exc}", "give an http:// or https:// registry URL")
    if len(body) > limit:
        return _error(url, f"response larger than {limit} bytes", _TOO_LARGE_FIX)
    return parse_json(body, url)


def _error(file: str, message: str, fix: str) -> Problem:
    return Problem("error", file, "$", message, fix)


def _warn(file: str, message: str, fix: str) -> Problem:
    return Problem("warning", file, "$", message, fix)
