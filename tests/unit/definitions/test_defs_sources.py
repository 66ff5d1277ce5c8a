"""Loading from files, directories and registry URLs; bad input becomes problems."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from gateway.definitions import load_catalog, load_catalog_strict
from gateway.spec.problems import DefinitionsError

CE_MESSAGE = {"envelope": "CloudEvents/1.0", "envelopemetadata": {"type": {"value": "t"}}}


def _doc(group: str = "g", message: str = "m") -> dict[str, Any]:
    return {"messagegroups": {group: {"messages": {message: CE_MESSAGE}}}}


def _write(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


# -- files ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["a.json", "a.xreg.json", "a.cereg"])
def test_json_files(tmp_path: Path, name: str) -> None:
    catalog = load_catalog([_write(tmp_path / name, _doc())])
    assert catalog.problems == []
    assert catalog.message("/messagegroups/g/messages/m") is not None
    assert catalog.sources == [str(tmp_path / name)]


@pytest.mark.parametrize("name", ["a.yaml", "a.yml", "a.cereg.yaml"])
def test_yaml_files(tmp_path: Path, name: str) -> None:
    (tmp_path / name).write_text(
        "messagegroups:\n"
        "  g:\n"
        "    messages:\n"
        "      m:\n"
        "        envelope: CloudEvents/1.0\n"
        "        envelopemetadata:\n"
        "          type: {value: t}\n"
        "          time: {value: 2024-05-01T10:00:00Z}\n"  # YAML reads this as a datetime
        "          1: {value: x}\n",  # and this key as an int
        encoding="utf-8",
    )
    catalog = load_catalog([tmp_path / name])
    m = catalog.message("/messagegroups/g/messages/m")
    assert m is not None
    assert m.envelope_metadata["type"].value == "t"
    assert m.envelope_metadata["time"].value == "2024-05-01T10:00:00+00:00"
    assert "1" in m.envelope_metadata


def test_unknown_extension_tries_json_then_yaml(tmp_path: Path) -> None:
    _write(tmp_path / "a.txt", _doc())
    (tmp_path / "b.txt").write_text("messagegroups: {h: {messages: {m: {protocol: MQTT/5.0, "
                                          "protocoloptions: {topic_name: t}}}}}")
    catalog = load_catalog([tmp_path / "a.txt", tmp_path / "b.txt"])
    assert catalog.errors == []
    assert set(catalog.groups) == {"g", "h"}


def test_malformed_json_is_an_error_problem(tmp_path: Path) -> None:
    path = tmp_path / "bad.xreg.json"
    path.write_text('{\n  "messagegroups": {\n    "g": {}\n    "h": {}\n  }\n}\n')
    catalog = load_catalog([path])
    (error,) = catalog.errors
    assert (error.file, error.path) == (str(path), "$")
    assert error.message == "malformed JSON: Expecting ',' delimiter"
    assert (error.line, error.column) == (4, 5)
    assert error.fix == "fix the JSON syntax there (commas, quotes, brackets)"
    assert str(error).startswith(f"{path}:4:5: error: malformed JSON")


def test_malformed_yaml_is_an_error_problem(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("messagegroups:\n  g: [1, 2\n  h: 3\n")
    (error,) = load_catalog([path]).errors
    assert error.message.startswith("malformed YAML:")
    # PyYAML notices the unclosed `[` where `h:` follows it.
    assert (error.line, error.column) == (3, 4) and error.fix.startswith("fix the YAML syntax")


def test_missing_and_unreadable_files(tmp_path: Path) -> None:
    (tmp_path / "latin1.json").write_bytes(b'{"a": "\xe9"}')
    catalog = load_catalog([tmp_path / "nope.json", tmp_path / "latin1.json"])
    assert [(p.file, p.message) for p in catalog.errors] == [
        (str(tmp_path / "nope.json"), "file not found"),
        (str(tmp_path / "latin1.json"), "not UTF-8 text (invalid continuation byte at byte 7)"),
    ]


def test_one_bad_file_does_not_hide_the_others(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("{")
    catalog = load_catalog([tmp_path / "bad.json", _write(tmp_path / "ok.json", _doc())])
    assert len(catalog.errors) == 1
    assert "g" in catalog.groups


def test_strict_loading_raises_with_every_error(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(DefinitionsError) as info:
        load_catalog_strict([tmp_path / "bad.json", tmp_path / "missing.json"])
    assert len(info.value.problems) == 2
    assert "2 problem(s)" in str(info.value)
    ok = load_catalog_strict(_write(tmp_path / "ok.json", _doc()))  # a single path works too
    assert "g" in ok.groups


# -- directories --------------------------------------------------------------------------------


def test_directory_reads_catalog_files_sorted_and_not_recursively(tmp_path: Path) -> None:
    _write(tmp_path / "b.xreg.json", _doc("b"))
    _write(tmp_path / "a.cereg", _doc("a"))
    (tmp_path / "c.yaml").write_text("messagegroups: {c: {messages: {m: {protocol: NATS, "
                                         "protocoloptions: {subject: s}}}}}")
    _write(tmp_path / ".hidden.json", _doc("hidden"))
    (tmp_path / "README.md").write_text("# not a catalog")
    (tmp_path / "sub").mkdir()
    _write(tmp_path / "sub" / "d.json", _doc("d"))
    catalog = load_catalog([tmp_path])
    assert catalog.problems == []
    assert list(catalog.groups) == ["a", "b", "c"]
    assert [Path(s).name for s in catalog.sources] == ["a.cereg", "b.xreg.json", "c.yaml"]
    orders = [m.order for m in catalog.messages()]
    assert orders == sorted(orders)


def test_empty_directory_is_a_warning(tmp_path: Path) -> None:
    (warning,) = load_catalog([tmp_path]).problems
    assert warning.severity == "warning"
    assert warning.message == "directory holds no catalog files"


def test_duplicate_group_later_document_wins_with_warning(tmp_path: Path) -> None:
    first = _write(tmp_path / "1.json", _doc("g", "old"))
    second = _write(tmp_path / "2.json", _doc("g", "new"))
    catalog = load_catalog([first, second])
    assert [m.message_id for m in catalog.groups["g"].messages] == ["new"]
    (warning,) = catalog.warnings
    assert warning.file == str(second)
    assert warning.message == (f"message group 'g' is also defined in {first} "
                               "($.messagegroups.g); this later definition replaces it")


def test_duplicate_endpoint_later_document_wins_with_warning(tmp_path: Path) -> None:
    first = _write(tmp_path / "1.json", {"endpoints": {"e": {"protocol": "MQTT/5.0"}}})
    second = _write(tmp_path / "2.json", {"endpoints": {"e": {"protocol": "KAFKA"}}})
    catalog = load_catalog([first, second])
    assert catalog.endpoints["e"].protocol == "KAFKA"
    assert str(first) in catalog.warnings[0].message


# -- registry URLs ---------------------------------------------------------------------------------

Responder = Callable[[str], tuple[int, bytes]]


@contextmanager
def _server(respond: Responder) -> Iterator[tuple[str, list[str]]]:
    """A registry on 127.0.0.1 (ephemeral port); yields its base URL and the paths asked."""
    asked: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # http.server's method naming
            asked.append(self.path)
            status, body = respond(self.path)
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep test output clean

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/registry", asked
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


EXPORT = {  # document view: the message's attributes live under versions/<default>
    "specversion": "1.0-rc4",
    "messagegroups": {"g": {"messagegroupid": "g", "messages": {
        "base": {"messageid": "base", "meta": {"defaultversionid": "1"},
                 "versions": {"1": {"versionid": "1", **CE_MESSAGE}}},
        "mqtt": {"messageid": "mqtt", "meta": {"defaultversionid": "1"},
                 "versions": {"1": {"versionid": "1",
                                    "basemessage": "/messagegroups/g/messages/base",
                                    "protocol": "MQTT/5.0",
                                    "protocoloptions": {"topic_name": "a/{b}"}}}},
        "alias": {"messageid": "alias", "meta": {"xref": "/messagegroups/g/messages/base"}},
    }}},
}


def _json(data: Any) -> tuple[int, bytes]:
    return 200, json.dumps(data).encode()


def test_registry_export_document_view() -> None:
    def respond(path: str) -> tuple[int, bytes]:
        return _json(EXPORT) if urlsplit(path).path == "/registry/export" else (404, b"{}")

    with _server(respond) as (url, asked):
        catalog = load_catalog([url])
    assert asked == ["/registry/export"]
    assert catalog.problems == []
    assert catalog.sources == [url + "/export"]
    mqtt = catalog.message("/messagegroups/g/messages/mqtt")
    assert mqtt is not None
    assert mqtt.protocol == "MQTT/5.0"
    assert mqtt.envelope_metadata["type"].value == "t"  # merged from the base's version
    assert mqtt.provenance.file == url + "/export"
    assert mqtt.field_provenance["$.protocol"].path == (
        '$.messagegroups.g.messages.mqtt.versions["1"].protocol')
    alias = catalog.message("/messagegroups/g/messages/alias")
    assert alias is not None and alias.envelope == "CloudEvents/1.0"


def test_registry_without_export_falls_back_to_inline() -> None:
    api_view = {"messagegroups": {"g": {"messages": {
        "m": {**CE_MESSAGE, "basemessage": "PLACEHOLDER"},
        "base": CE_MESSAGE,
    }}}}

    def respond(path: str) -> tuple[int, bytes]:
        parts = urlsplit(path)
        if parts.path == "/registry" and parts.query == "inline=*":
            doc = json.loads(json.dumps(api_view).replace("PLACEHOLDER", base_ref))
            return _json(doc)
        return 404, b'{"error": "not found"}'

    with _server(respond) as (url, asked):
        base_ref = url + "/messagegroups/g/messages/base"  # absolute, into this registry
        catalog = load_catalog([url])
    assert asked == ["/registry/export", "/registry?inline=*"]
    assert catalog.problems == []
    m = catalog.message("/messagegroups/g/messages/m")
    assert m is not None and m.base_chain == ("/messagegroups/g/messages/base",)
    assert not m.incomplete


def test_registry_returning_garbage_is_an_error_problem() -> None:
    with _server(lambda path: (200, b"<html>surprise</html>")) as (url, asked):
        catalog = load_catalog([url])
    assert len(asked) == 2
    (error,) = catalog.problems
    assert error.severity == "error"
    assert (error.file, error.path) == (url, "$")
    assert error.message.startswith(f"cannot load the registry: GET {url}/export -> "
                                    "malformed JSON")
    assert "?inline=*" in error.message
    assert "/export or ?inline=*" in error.fix


def test_registry_http_errors_are_problems() -> None:
    with _server(lambda path: (500, b"oops")) as (url, _):
        (error,) = load_catalog([url]).errors
    assert "HTTP 500" in error.message


def test_unreachable_registry_is_an_error_without_retrying() -> None:
    with socket.socket() as sock:  # bound, not listening: refused, and no one else's
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        (error,) = load_catalog([f"http://127.0.0.1:{port}"], timeout=2).errors
    assert error.message.startswith("cannot connect")
    assert error.file == f"http://127.0.0.1:{port}/export"
