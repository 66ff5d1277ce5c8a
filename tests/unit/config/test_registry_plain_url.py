"""A registry written as a plain URL in `definitions:` (`- https://registry.example/`) is
a registry, polled like the mapping form, not a file path next to the config."""

from __future__ import annotations

import json
from pathlib import Path

from gateway.config import load_config_text
from tests.unit.definitions.test_defs_sources import _server

STORE = Path(__file__).resolve().parents[3] / "config/examples/store.xreg.json"


def test_a_plain_registry_url_is_loaded_as_a_registry(tmp_path: Path) -> None:
    document = json.loads(STORE.read_text())
    with _server(lambda path: (200, json.dumps(document).encode())) as (url, asked):
        text = (f"definitions:\n  - {url}\n"
                "routes:\n  - from: store-mqtt\n    to: [events-kafka]\n"
                "deadletter: log\n")
        config, problems = load_config_text(text, "gw.yaml", tmp_path, environ={})
    assert config is not None, [str(p) for p in problems]
    assert not [p for p in problems if "file not found" in p.message]
    (source,) = config.definitions
    assert source.location == url and source.poll == 30.0
    assert asked and asked[0].startswith("/registry")
    assert "store-mqtt" in config.endpoints


def test_a_path_stays_a_path(tmp_path: Path) -> None:
    text = ("definitions:\n  - registry.example/store.json\n"
            "routes:\n  - from: store-mqtt\n    to: [events-kafka]\ndeadletter: log\n")
    config, problems = load_config_text(text, "gw.yaml", tmp_path, environ={})
    assert config is None
    assert any("registry.example/store.json" in p.message or
               "registry.example/store.json" in p.file for p in problems), problems
