"""The admin server's two listeners: `admin.listen` serves /metrics, /healthz and
/readyz; `admin.health_listen` only the probes (kubelet HTTP probes of a sidecar whose
admin server stays on loopback)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import aiohttp

from gateway.config import load_config
from gateway.daemon import Gateway
from tests.unit.runtime.test_daemon import STORE, MemoryFactory


def _config(tmp: Path, admin: str) -> Path:
    (tmp / "store.xreg.json").write_text(json.dumps(STORE))
    path = tmp / "gw.yaml"
    path.write_text("definitions: [store.xreg.json]\n"
                    "routes: [{from: store-mqtt, to: [events-kafka]}]\n"
                    f"deadletter: log\nadmin: {admin}\n")
    return path


def test_health_listener_serves_only_the_probes(tmp_path: Path) -> None:
    config, problems = load_config(_config(
        tmp_path, "{listen: '127.0.0.1:0', health_listen: '127.0.0.1:0'}"))
    assert config is not None, [str(p) for p in problems]
    assert config.admin.health == ("127.0.0.1", 0)

    async def scenario() -> dict[str, int]:
        gateway = Gateway(config, MemoryFactory())
        await gateway.start()
        assert gateway.admin is not None and gateway.admin.health is not None
        main, probes = gateway.admin.port, gateway.admin.health[1]
        assert probes not in (0, main)
        status = {}
        try:
            async with aiohttp.ClientSession() as session:
                for name, port in (("main", main), ("probes", probes)):
                    for path in ("/healthz", "/readyz", "/metrics"):
                        url = f"http://127.0.0.1:{port}{path}"
                        async with session.get(url) as response:
                            status[f"{name}{path}"] = response.status
        finally:
            await gateway.stop()
        return status

    status = asyncio.run(scenario())
    assert status["main/healthz"] == status["probes/healthz"] == 200
    # the memory consumer connects at once: ready on both listeners alike
    assert status["main/readyz"] == status["probes/readyz"] in (200, 503)
    assert status["main/metrics"] == 200
    assert status["probes/metrics"] == 404  # metrics stay on the loopback listener


def test_no_health_listener_by_default_and_the_same_address_is_refused(tmp_path: Path) -> None:
    config, _ = load_config(_config(tmp_path, "{listen: '127.0.0.1:9464'}"))
    assert config is not None and config.admin.health is None
    config, problems = load_config(_config(
        tmp_path, "{listen: '0.0.0.0:9464', health_listen: '0.0.0.0:9464'}"))
    assert config is None
    assert [p.path for p in problems if p.is_error] == ["$.admin"]
