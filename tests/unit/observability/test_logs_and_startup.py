"""Logs: JSON lines on stdout with route, endpoint, definition, reason and error kind as
keys; `xrgw run` failing to start says why in one such line and exits non-zero, without
a traceback."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.daemon import EXIT_CONFIG, EXIT_STARTUP
from gateway.observability.logs import configure, fields

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(autouse=True)
def _restore_logging() -> object:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_json_lines_go_to_stdout_with_structured_keys(capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    configure("info")
    logging.getLogger("xrgw.test").warning(
        "dropped message: %s", "no route", extra=fields(
            route="in->out", endpoint="in", definition="/messagegroups/g/messages/m",
            reason="undeliverable", error=ConnectionRefusedError("refused")))
    out, err = capsys.readouterr()
    assert err == ""
    entry = json.loads(out)
    assert entry["message"] == "dropped message: no route"
    assert entry["level"] == "warning" and entry["logger"] == "xrgw.test"
    assert {k: entry[k] for k in ("route", "endpoint", "definition", "reason",
                                  "error_kind", "error")} == {
        "route": "in->out", "endpoint": "in", "definition": "/messagegroups/g/messages/m",
        "reason": "undeliverable", "error_kind": "ConnectionRefusedError", "error": "refused"}


def test_logged_exception_carries_its_kind(capsys: pytest.CaptureFixture[str]) -> None:
    configure("info")
    try:
        raise KeyError("x")
    except KeyError:
        logging.getLogger("xrgw.test").exception("failed", extra=fields(route="r"))
    entry = json.loads(capsys.readouterr().out)
    assert entry["error_kind"] == "KeyError" and entry["route"] == "r"
    assert "Traceback" in entry["exception"]  # kept, inside the JSON object


def test_absent_keys_stay_absent_and_text_format_appends_them(
        capsys: pytest.CaptureFixture[str]) -> None:
    configure("info")
    logging.getLogger("xrgw.test").info("plain")
    assert set(json.loads(capsys.readouterr().out)) == {"time", "level", "logger", "message"}
    configure("info", "text")
    logging.getLogger("xrgw.test").info("hello", extra=fields(endpoint="in", reason="x"))
    line = capsys.readouterr().out.strip()
    assert line.endswith("xrgw.test: hello endpoint=in reason=x")


def _run(config: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    # `-m` from the root: the checkout's gateway is the one that runs
    env = {k: v for k, v in os.environ.items() if k != "XRGW_LOG_LEVEL"}
    return subprocess.run([sys.executable, "-m", "gateway.cli", "run", "-c", str(config)],
                          capture_output=True, text=True, env=env, timeout=timeout, cwd=ROOT)


def _json_lines(text: str) -> list[dict[str, object]]:
    lines = [json.loads(line) for line in text.splitlines()]  # every line is JSON
    assert lines
    return lines


def test_invalid_config_is_json_lines_and_exit_1(tmp_path: Path) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text("routes: [{from: a, to: [b], mode: batch}]\n")
    result = _run(config)
    assert result.returncode == EXIT_CONFIG == 1
    assert "Traceback" not in result.stdout + result.stderr
    lines = _json_lines(result.stdout)
    errors = [e for e in lines if e["level"] == "error"]
    assert any(e.get("path") == "$.routes[0].mode" and e.get("file") == str(config)
               and (e.get("line"), e.get("column")) == (1, 29)  # at `mode:`
               and "fix" in e for e in errors), errors
    assert errors[-1]["message"] == "not started: the configuration has errors"


#: An HTTP ingress to an HTTP output: neither needs a broker, and both start and stop at
#: once, so the test waits on nothing but the gateway.
HOOKS = {
    "$schema": "https://cloudevents.io/schemas/registry", "specversion": "1.0-rc4",
    "endpoints": {
        "in-http": {"usage": ["consumer"], "protocol": "HTTP", "protocoloptions": {},
                    "messagegroups": ["#/messagegroups/h"]},
        "out-http": {"usage": ["producer"], "protocol": "HTTP", "protocoloptions": {}},
    },
    "messagegroups": {"h": {"envelope": "CloudEvents/1.0", "messages": {"hook": {
        "protocol": "HTTP", "protocoloptions": {"method": "POST", "path": "/hook"},
        "envelope": "CloudEvents/1.0",
        "envelopemetadata": {"type": {"value": "t"}, "source": {"value": "/s"}}}}}},
}


def test_admin_port_taken_is_one_json_line_and_exit_3(tmp_path: Path) -> None:
    (tmp_path / "hooks.xreg.json").write_text(json.dumps(HOOKS))
    with socket.socket() as taken, socket.socket() as free:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        free.bind(("127.0.0.1", 0))
        port, ingress = taken.getsockname()[1], free.getsockname()[1]
        free.close()
        config = tmp_path / "gw.yaml"
        config.write_text(
            "definitions: [hooks.xreg.json]\n"
            "routes: [{from: in-http, to: [out-http]}]\n"
            "deadletter: log\n"
            f"admin: {{listen: '127.0.0.1:{port}'}}\n"
            "shutdown: {grace: 1s}\n"
            f"endpoints: {{in-http: {{uri: 'http://127.0.0.1:{ingress}'}},"
            " out-http: {uri: 'http://127.0.0.1:9/hooks'}}\n")
        result = _run(config)
    assert result.returncode == EXIT_STARTUP == 3, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    failure = [e for e in _json_lines(result.stdout) if e["message"] == "start-up failed"]
    assert len(failure) == 1 and failure[0]["level"] == "error"
    assert failure[0]["error_kind"] == "OSError" and str(port) in str(failure[0]["error"])


def test_level_precedence_argument_then_environment_then_config(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XRGW_LOG_LEVEL", "error")
    configure("warning", override="debug")
    assert logging.getLogger().level == logging.DEBUG
    configure("warning")
    assert logging.getLogger().level == logging.ERROR
    monkeypatch.delenv("XRGW_LOG_LEVEL")
    configure("warning")
    assert logging.getLogger().level == logging.WARNING
