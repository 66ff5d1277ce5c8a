"""A definitions document reaches only where the operator allows (issue 29): a
registry-served document's schema URLs are fetched from that registry's origin and the
`schema_fetch.allow` prefixes only, never from a local file; no redirect leaves the
origin; the proxy environment is ignored; a fetch that drips is cut off. The targets are
real HTTP servers on loopback that count what reaches them."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from gateway.config import load_config
from gateway.definitions import read_document
from gateway.definitions.schema_model import SchemaResolution
from gateway.schemas.fetch import FetchPolicy, SchemaFetcher

SCHEMA = b'{"type": "object"}'


class Server:
    """A loopback HTTP server answering every GET with `routes[path]` (bytes, or
    ("redirect", url), or ("drip", seconds)), counting requests per path."""

    def __init__(self) -> None:
        self.routes: dict[str, Any] = {}
        self.hits: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.hits.append(self.path)
                answer = outer.routes.get(self.path.split("?")[0], SCHEMA)
                if isinstance(answer, tuple) and answer[0] == "redirect":
                    self.send_response(302)
                    self.send_header("Location", answer[1])
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                if isinstance(answer, tuple) and answer[0] == "drip":
                    end = time.monotonic() + answer[1]
                    try:
                        while time.monotonic() < end:
                            self.wfile.write(b" ")
                            self.wfile.flush()
                            time.sleep(0.05)
                    except OSError:
                        pass
                    return
                self.wfile.write(answer)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_port}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def registry() -> Iterator[Server]:
    server = Server()
    yield server
    server.close()


@pytest.fixture
def internal() -> Iterator[Server]:
    server = Server()
    yield server
    server.close()


def _resolution(uri: str, document: str) -> SchemaResolution:
    catalog = read_document({"messagegroups": {"g": {"messages": {"a": {
        "dataschemaformat": "JsonSchema/draft-07", "dataschemauri": uri}}}}}, document)
    (message,) = catalog.messages()
    assert message.schema is not None
    return message.schema


def test_a_registry_document_cannot_reach_another_origin(registry: Server,
                                                         internal: Server) -> None:
    found = SchemaFetcher(timeout=2).materialize(
        _resolution(f"{internal.url}/internal", f"{registry.url}/export"))
    assert found.document is None and "not fetched" in (found.error or "")
    assert internal.hits == []


def test_a_registry_document_reaches_its_own_origin(registry: Server) -> None:
    found = SchemaFetcher(timeout=2).materialize(
        _resolution(f"{registry.url}/schemas/s.json", f"{registry.url}/export"))
    assert found.document is not None and found.document.content == {"type": "object"}


def test_the_allow_list_opens_a_prefix_and_only_it(registry: Server,
                                                   internal: Server) -> None:
    fetcher = SchemaFetcher(policy=FetchPolicy(allow=(f"{internal.url}/public/",),
                                               timeout=2))
    document = f"{registry.url}/export"
    allowed = fetcher.materialize(_resolution(f"{internal.url}/public/s.json", document))
    refused = fetcher.materialize(_resolution(f"{internal.url}/private/s.json", document))
    assert allowed.document is not None and refused.document is None
    assert internal.hits == ["/public/s.json"]


def test_a_registry_document_cannot_read_a_local_file(registry: Server,
                                                      tmp_path: Path) -> None:
    secret = tmp_path / "secret.json"
    secret.write_text('{"token": "LOCAL-SECRET"}')
    found = SchemaFetcher(timeout=2).materialize(
        _resolution(secret.as_uri(), f"{registry.url}/export"))
    assert found.document is None and "local file" in (found.error or "")


def test_a_local_document_still_reads_local_files_and_urls(registry: Server,
                                                           tmp_path: Path) -> None:
    schema = tmp_path / "s.json"
    schema.write_text('{"type": "string"}')
    local = str(tmp_path / "defs.json")
    fetcher = SchemaFetcher(timeout=2)
    from_file = fetcher.materialize(_resolution(schema.as_uri(), local))
    from_url = fetcher.materialize(_resolution(f"{registry.url}/s.json", local))
    assert from_file.document is not None and from_file.document.content == {"type": "string"}
    assert from_url.document is not None


def test_no_redirect_leaves_the_origin(registry: Server, internal: Server) -> None:
    registry.routes["/s.json"] = ("redirect", f"{internal.url}/internal")
    found = SchemaFetcher(timeout=2).materialize(
        _resolution(f"{registry.url}/s.json", str(Path("defs.json").resolve())))
    assert found.document is None and "redirect" in (found.error or "")
    assert internal.hits == []


def test_the_proxy_environment_is_ignored(registry: Server, internal: Server,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("http_proxy", internal.url)
    monkeypatch.setenv("HTTP_PROXY", internal.url)
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    found = SchemaFetcher(timeout=2).materialize(
        _resolution(f"{registry.url}/s.json", f"{registry.url}/export"))
    assert found.document is not None
    assert internal.hits == [] and registry.hits == ["/s.json"]
    # ... and a configured proxy is used
    proxied = SchemaFetcher(policy=FetchPolicy(proxy=internal.url, timeout=2)).materialize(
        _resolution(f"{registry.url}/t.json", f"{registry.url}/export"))
    assert proxied.document is not None and internal.hits == [f"{registry.url}/t.json"]


def test_a_dripping_answer_is_cut_off_at_the_time_limit(registry: Server) -> None:
    registry.routes["/slow.json"] = ("drip", 30)
    started = time.monotonic()
    found = SchemaFetcher(policy=FetchPolicy(timeout=0.5)).materialize(
        _resolution(f"{registry.url}/slow.json", f"{registry.url}/export"))
    assert found.document is None and "within" in (found.error or "")
    assert time.monotonic() - started < 20  # the server would drip for 30 s


def _registry_config(tmp: Path, registry: Server, internal: Server) -> Path:
    store = json.loads((Path(__file__).resolve().parents[3] /
                        "config/examples/store.xreg.json").read_text())
    message = store["messagegroups"]["store"]["messages"]["cashierdesk"]
    message["dataschemaformat"] = "JsonSchema/draft-07"
    message["dataschemauri"] = f"{internal.url}/internal/admin"
    registry.routes["/export"] = json.dumps(store).encode()
    path = tmp / "gateway.yaml"
    path.write_text(f"definitions: [{{url: '{registry.url}'}}]\nroutes:\n"
                    "  - from: store-mqtt\n    to: [events-kafka]\n    schema: enforce\n"
                    "deadletter: log\n")
    return path


def test_validate_refuses_a_registry_document_aimed_at_an_internal_address(
        tmp_path: Path, registry: Server, internal: Server) -> None:
    config, problems = load_config(_registry_config(tmp_path, registry, internal))
    assert config is None
    assert any("not fetched" in str(p) for p in problems if p.is_error)
    assert internal.hits == []
