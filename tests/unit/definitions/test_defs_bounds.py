"""Hostile definitions documents are refused fast and within a memory budget (issue 29):
a YAML "billion laughs", YAML nested without end, a file or registry export larger than
the document limit (one that fits the chart's default 512 MiB memory limit)."""

from __future__ import annotations

import resource
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from gateway.definitions import load_catalog
from gateway.definitions.sources import (
    DEFAULT_MAX_DOCUMENT_BYTES,
    MAX_YAML_DEPTH,
    MAX_YAML_NODES,
    load_file,
    load_url,
)
from gateway.spec.problems import Problem

LAUGHS = "\n".join(
    ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    + [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 10)]
    + ["messagegroups: {g: {messages: {m: {description: *a9}}}}"]) + "\n"


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def test_a_billion_laughs_is_refused_fast_and_small(tmp_path: Path) -> None:
    path = tmp_path / "laughs.yaml"
    path.write_text(LAUGHS)
    assert len(LAUGHS) < 2000
    before, started = _rss_mib(), time.monotonic()
    found = load_file(path)
    assert isinstance(found, Problem)
    assert f"more than {MAX_YAML_NODES} values" in found.message
    # Refused while walking the composed tree: nothing is built (the unbounded load took
    # 51 s and ended in MemoryError).
    assert time.monotonic() - started < 30
    assert _rss_mib() - before < 100
    catalog = load_catalog(path)
    assert any("more than" in p.message for p in catalog.errors)


def test_yaml_nesting_is_bounded(tmp_path: Path) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text("messagegroups: " + "[" * (MAX_YAML_DEPTH + 5) + "]" * (
        MAX_YAML_DEPTH + 5) + "\n")
    found = load_file(path)
    assert isinstance(found, Problem) and "nests deeper" in found.message


def test_a_plain_yaml_document_still_loads(tmp_path: Path) -> None:
    path = tmp_path / "ok.yaml"
    path.write_text("base: &base {protocol: MQTT/5.0}\nmessagegroups: {g: {messages: "
                    "{m: {protocol: MQTT/5.0, protocoloptions: {topic_name: /a}}}}}\n")
    found = load_file(path)
    assert not isinstance(found, Problem), found


def test_a_file_over_the_document_limit_is_refused_with_the_way_out(tmp_path: Path) -> None:
    path = tmp_path / "huge.json"
    with path.open("wb") as out:
        out.write(b'{"messagegroups": {}, "description": "')
        out.write(b"x" * (DEFAULT_MAX_DOCUMENT_BYTES + 1))
        out.write(b'"}')
    found = load_file(path)
    assert isinstance(found, Problem)
    assert f"larger than {DEFAULT_MAX_DOCUMENT_BYTES} bytes" in found.message
    assert "XRGW_DEFINITIONS_MAX_BYTES" in found.fix


def test_the_limit_can_be_raised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "defs.json"
    path.write_text('{"messagegroups": {}, "description": "' + "x" * 2000 + '"}')
    monkeypatch.setenv("XRGW_DEFINITIONS_MAX_BYTES", "1000")
    assert isinstance(load_file(path), Problem)
    monkeypatch.setenv("XRGW_DEFINITIONS_MAX_BYTES", "100000")
    assert not isinstance(load_file(path), Problem)


class _Huge(BaseHTTPRequestHandler):
    """A registry whose export is 60 MB (the issue's case), streamed."""

    served = 0

    def do_GET(self) -> None:
        size = 60 * 1024 * 1024
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(size))
        self.end_headers()
        chunk = b" " * (1024 * 1024)
        try:
            for _ in range(60):
                self.wfile.write(chunk)
                type(self).served += len(chunk)
        except OSError:
            pass

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def huge_registry() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Huge)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def test_a_60_mb_registry_export_is_refused_before_it_is_read(huge_registry: str) -> None:
    before = _rss_mib()
    found = load_url(huge_registry, timeout=10)
    assert isinstance(found, Problem)
    assert f"larger than {DEFAULT_MAX_DOCUMENT_BYTES} bytes" in found.message
    assert _rss_mib() - before < 100
