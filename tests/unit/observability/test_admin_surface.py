"""The admin surface is safe by default (issue 29): the scrape port serves /metrics,
/healthz and /readyz; the pages that show message samples (/conformance, /) are on the
scrape port only when it is on loopback or the operator opts in, else on their own
loopback listener; with a token they answer only to `Authorization: Bearer <token>`."""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from gateway.config import load_config
from gateway.config._model import AdminConfig
from gateway.observability.admin import AdminServer
from gateway.observability.metrics import Metrics
from gateway.ports.netaddr import is_loopback

TOKEN = "admin-token-0123456789"


def _get(url: str, token: str | None = None) -> int:
    request = urllib.request.Request(url, headers={} if token is None else {
        "Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_pages_on_their_own_listener_behind_a_token() -> None:
    async def scenario() -> dict[str, int]:
        server = AdminServer(Metrics(), lambda: {"r": True}, "127.0.0.1", 0,
                             pages=("127.0.0.1", 0), token=TOKEN)
        await server.start()
        try:
            assert isinstance(server.pages, tuple)
            scrape, pages = server.port, server.pages[1]
            checks = {
                "scrape /metrics": (scrape, "/metrics", None),
                "scrape /healthz": (scrape, "/healthz", None),
                "scrape /readyz": (scrape, "/readyz", None),
                "scrape /conformance": (scrape, "/conformance", TOKEN),
                "scrape /": (scrape, "/", TOKEN),
                "pages /conformance no token": (pages, "/conformance", None),
                "pages /conformance wrong token": (pages, "/conformance", TOKEN + "x"),
                "pages / wrong token": (pages, "/", "nope"),
                "pages /conformance": (pages, "/conformance", TOKEN),
                "pages /": (pages, "/", TOKEN),
                "pages /metrics": (pages, "/metrics", TOKEN),
            }
            return {name: await asyncio.to_thread(
                _get, f"http://127.0.0.1:{port}{path}", token)
                for name, (port, path, token) in checks.items()}
        finally:
            await server.stop()

    assert asyncio.run(scenario()) == {
        "scrape /metrics": 200, "scrape /healthz": 200, "scrape /readyz": 200,
        "scrape /conformance": 404, "scrape /": 404,
        "pages /conformance no token": 401, "pages /conformance wrong token": 401,
        "pages / wrong token": 401, "pages /conformance": 200, "pages /": 200,
        "pages /metrics": 404}


def test_pages_off_are_served_nowhere() -> None:
    async def scenario() -> tuple[int, int]:
        server = AdminServer(Metrics(), lambda: {}, "127.0.0.1", 0, pages=None)
        await server.start()
        try:
            base = f"http://127.0.0.1:{server.port}"
            return (await asyncio.to_thread(_get, base + "/conformance"),
                    await asyncio.to_thread(_get, base + "/metrics"))
        finally:
            await server.stop()

    assert asyncio.run(scenario()) == (404, 200)


@pytest.mark.parametrize(("host", "pages", "where"), [
    ("127.0.0.1", "auto", "listen"),
    ("::1", "auto", "listen"),
    ("localhost", "auto", "listen"),
    ("0.0.0.0", "auto", ("127.0.0.1", 9466)),
    ("10.1.2.3", "auto", ("127.0.0.1", 9466)),
    ("0.0.0.0", "listen", "listen"),
    ("127.0.0.1", "off", None),
])
def test_where_the_pages_go(host: str, pages: str, where: object) -> None:
    assert AdminConfig(host, 9464, pages=pages).pages_address() == where


def test_loopback_addresses() -> None:
    assert is_loopback("127.0.0.5") and is_loopback("[::1]")
    assert not is_loopback("0.0.0.0") and not is_loopback("::")


ROOT = Path(__file__).resolve().parents[3]
STORE = ROOT / "config/examples/store.xreg.json"


def _config(tmp: Path, admin: str) -> Path:
    path = tmp / "gateway.yaml"
    path.write_text(f'definitions: ["{STORE}"]\nroutes:\n  - from: store-mqtt\n'
                    f"    to: [events-kafka]\ndeadletter: log\n{admin}\n")
    return path


def test_the_token_is_read_from_its_file_and_never_printed(tmp_path: Path) -> None:
    (tmp_path / "token").write_text(TOKEN + "\n")
    config, problems = load_config(_config(
        tmp_path, "admin: {listen: '0.0.0.0:9464', token_file: token}"))
    errors = [str(p) for p in problems if p.is_error]
    assert config is not None, errors
    assert config.admin.token is not None and config.admin.token.reveal() == TOKEN
    assert TOKEN not in repr(config.admin)
    assert config.admin.pages_address() == ("127.0.0.1", 9466)


def test_a_missing_token_file_is_a_problem(tmp_path: Path) -> None:
    config, problems = load_config(_config(tmp_path, "admin: {token_file: nothere}"))
    assert config is None
    assert any("admin token file" in str(p) for p in problems)


def test_pages_off_loopback_without_a_token_are_a_warning(tmp_path: Path) -> None:
    config, problems = load_config(_config(tmp_path, "admin: {listen: '0.0.0.0:9464', "
                                                     "pages: listen}"))
    assert config is not None
    assert any(p.path == "$.admin.pages" and "without a token" in p.message
               for p in problems)
    _, quiet = load_config(_config(tmp_path, "admin: {listen: '0.0.0.0:9464'}"))
    assert not any(p.path == "$.admin.pages" for p in quiet)
