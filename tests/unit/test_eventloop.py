"""The daemon's event loop (gateway/eventloop.py): which one `eventloop` and
`XRGW_EVENT_LOOP` choose, and that `xrgw run` really runs on it."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.config import load_config
from gateway.daemon import EXIT_CONFIG
from gateway.eventloop import ENV, EventLoopError, asyncio_loop, chosen_name, loop_factory, run
from tests.unit.observability.test_logs_and_startup import HOOKS

ROOT = Path(__file__).resolve().parents[2]


def test_the_environment_wins_over_the_config_and_empty_means_unset() -> None:
    assert chosen_name("auto", {}) == "auto"
    assert chosen_name("auto", {ENV: "asyncio"}) == "asyncio"
    assert chosen_name("asyncio", {ENV: " UVLOOP "}) == "uvloop"
    assert chosen_name("uvloop", {ENV: ""}) == "uvloop"


def test_an_unknown_name_is_refused_with_the_variable_named() -> None:
    with pytest.raises(EventLoopError, match=f"{ENV}='tokio'"):
        chosen_name("auto", {ENV: "tokio"})


def test_auto_and_uvloop_run_on_uvloop_and_asyncio_on_asyncios_own() -> None:
    async def loop_module() -> str:
        return type(asyncio.get_running_loop()).__module__

    for name, runs, module in (("auto", "uvloop", "uvloop"), ("uvloop", "uvloop", "uvloop"),
                               ("asyncio", "asyncio", "asyncio")):
        chosen, factory = loop_factory(name)
        assert chosen == runs
        assert run(loop_module(), factory).split(".")[0] == module, name


def test_without_uvloop_auto_falls_back_and_uvloop_fails(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # `import uvloop` raises ImportError
    assert loop_factory("auto") == ("asyncio", asyncio_loop)
    with pytest.raises(EventLoopError, match="uvloop cannot be imported"):
        loop_factory("uvloop")


def test_the_config_key_defaults_to_auto_and_takes_the_three_names(tmp_path: Path) -> None:
    (tmp_path / "d.xreg.json").write_text(json.dumps(HOOKS))
    base = ("definitions: [d.xreg.json]\nroutes: [{from: in-http, to: [out-http]}]\n"
            "deadletter: log\nendpoints: {in-http: {uri: 'http://127.0.0.1:8080'},"
            " out-http: {uri: 'http://127.0.0.1:9/hooks'}}\n")
    (tmp_path / "a.yaml").write_text(base)
    config, problems = load_config(str(tmp_path / "a.yaml"))
    assert config is not None and config.eventloop == "auto", problems
    (tmp_path / "b.yaml").write_text(base + "eventloop: asyncio\n")
    config, _ = load_config(str(tmp_path / "b.yaml"))
    assert config is not None and config.eventloop == "asyncio"
    (tmp_path / "c.yaml").write_text(base + "eventloop: tokio\n")
    config, problems = load_config(str(tmp_path / "c.yaml"))
    assert config is None and any(p.path == "$.eventloop" for p in problems)


def _started_line(tmp_path: Path, extra_env: dict[str, str]) -> tuple[int, list[dict[str, object]]]:
    """Run `xrgw run` until its "xrgw started" line (or its exit); SIGTERM it; its lines."""
    (tmp_path / "hooks.xreg.json").write_text(json.dumps(HOOKS))
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        ingress = free.getsockname()[1]
    config = tmp_path / "gw.yaml"
    config.write_text(
        "definitions: [hooks.xreg.json]\nroutes: [{from: in-http, to: [out-http]}]\n"
        "deadletter: log\nadmin: {listen: '127.0.0.1:0'}\nshutdown: {grace: 1s}\n"
        f"endpoints: {{in-http: {{uri: 'http://127.0.0.1:{ingress}'}},"
        " out-http: {uri: 'http://127.0.0.1:9/hooks'}}\n")
    env = {k: v for k, v in os.environ.items() if k not in ("XRGW_LOG_LEVEL", ENV)}
    env.update(extra_env)
    proc = subprocess.Popen([sys.executable, "-m", "gateway.cli", "run", "-c", str(config)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env, cwd=ROOT)
    lines: list[dict[str, object]] = []
    assert proc.stdout is not None
    try:
        for text in proc.stdout:  # ends when the process does
            lines.append(json.loads(text))
            if str(lines[-1]["message"]).startswith("xrgw started"):
                proc.send_signal(signal.SIGTERM)
        return proc.wait(timeout=60), lines
    finally:
        proc.kill()


@pytest.mark.parametrize(("env", "loop"), [({}, "uvloop"), ({ENV: "asyncio"}, "asyncio")])
def test_xrgw_run_says_which_loop_it_runs_on(tmp_path: Path, env: dict[str, str],
                                             loop: str) -> None:
    code, lines = _started_line(tmp_path, env)
    started = [line["message"] for line in lines
               if str(line["message"]).startswith("xrgw started")]
    assert code == 0 and len(started) == 1, lines
    assert str(started[0]).endswith(f"event loop {loop}")


def test_xrgw_run_refuses_an_unknown_loop_in_one_line(tmp_path: Path) -> None:
    code, lines = _started_line(tmp_path, {ENV: "tokio"})
    assert code == EXIT_CONFIG
    assert [line["level"] for line in lines] == ["error"]
    assert f"{ENV}='tokio'" in str(lines[0]["message"])
