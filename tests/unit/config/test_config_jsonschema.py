"""The JSON Schema of the config file (`xrgw schema`), generated from the config spec:
a valid draft-07 schema, every spec key in it, the shipped example configs valid, and the
mistakes the gateway refuses refused here too (with `${VAR}` references accepted where the
gateway substitutes them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from gateway.config import CONFIG_SPEC, config_json_schema, load_config_text
from gateway.config._docs import iter_fields

ROOT = Path(__file__).resolve().parents[3]
SCHEMA = config_json_schema()
VALIDATOR = jsonschema.Draft7Validator(SCHEMA)
EXAMPLES = sorted(p for p in (ROOT / "config/examples").glob("*.yaml")
                  if not p.name.endswith(".tests.yaml"))
BASE: dict[str, Any] = {"definitions": ["store.xreg.json"],
                        "routes": [{"from": "store-mqtt", "to": ["events-kafka"]}],
                        "deadletter": "log"}


def _errors(document: object) -> list[str]:
    return ["/".join(map(str, e.absolute_path)) for e in VALIDATOR.iter_errors(document)]


def _node(path: str) -> dict[str, Any]:
    """The schema node of a dotted spec key (`routes[].retry.attempts`)."""
    node: dict[str, Any] = SCHEMA
    for part in path.replace("[]", ".[]").split("."):
        want = {"[]": "items", "<id>": "additionalProperties"}.get(part, "properties")
        if want not in node:  # a union: the variant that has members
            node = next(v for v in node["anyOf"] if want in v)
        node = node[want] if want != "properties" else node[want][part]
    return node


def test_is_a_valid_draft_07_schema() -> None:
    jsonschema.Draft7Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "http://json-schema.org/draft-07/schema#"


def test_every_spec_key_is_in_the_schema_with_its_description() -> None:
    keys = list(iter_fields(CONFIG_SPEC))
    assert len(keys) > 30
    for name, field in keys:
        assert field.description in _node(name)["description"], name


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_shipped_example_configs_are_valid(path: Path) -> None:
    assert _errors(yaml.safe_load(path.read_text())) == []


def test_minimal_config_is_valid_and_required_keys_are_required() -> None:
    assert _errors(BASE) == []
    for key in ("definitions", "routes", "deadletter"):
        assert _errors({k: v for k, v in BASE.items() if k != key}) == [""], key


@pytest.mark.parametrize("change, where", [
    ({"routes": [{"from": "a", "to": ["b"], "mode": "batch"}]}, "routes/0/mode"),
    ({"routes": [{"from": "a", "to": ["b"], "inflight": 0}]}, "routes/0/inflight"),
    ({"routes": [{"from": "a", "to": []}]}, "routes/0/to"),
    ({"routes": [{"from": "a", "to": ["b"], "bogus": 1}]}, "routes/0"),
    ({"routes": [{"from": "a", "to": ["b"], "retry": {"max_backoff": "10"}}]},
     "routes/0/retry/max_backoff"),
    ({"shutdown": {"grace": "thirty seconds"}}, "shutdown/grace"),
    ({"admin": {"listen": "localhost"}}, "admin/listen"),
    ({"log": {"level": "verbose"}}, "log/level"),
    ({"endpoints": {"e": {"password": "x", "password_file": "p"}}}, "endpoints/e"),
    ({"endpoints": {"e": {"tls": {"insecure": "yes"}}}}, "endpoints/e/tls/insecure"),
    ({"definitions": [{"url": "ftp://registry"}]}, "definitions/0"),
    ({"definitions": [""]}, "definitions/0"),
])
def test_mistakes_are_refused_where_they_are(change: dict[str, Any], where: str,
                                             tmp_path: Path) -> None:
    document = {**BASE, **change}
    assert where in _errors(document)
    # the gateway refuses the same document
    (tmp_path / "store.xreg.json").write_text(
        (ROOT / "config/examples/store.xreg.json").read_text())
    config, problems = load_config_text(yaml.safe_dump(document), "gw.yaml", tmp_path)
    assert config is None and problems, change


def test_environment_references_are_accepted_where_the_gateway_substitutes_them() -> None:
    document = {**BASE, "routes": [{"from": "a", "to": ["b"], "mode": "${MODE}",
                                    "inflight": "${INFLIGHT:-256}",
                                    "retry": {"max_backoff": "${BACKOFF:-10s}"}}],
                "admin": {"listen": "${XRGW_ADMIN_LISTEN:-127.0.0.1:9464}"},
                "endpoints": {"e": {"tls": {"insecure": "${INSECURE}"}}}}
    assert _errors(document) == []


def test_defaults_are_the_specs() -> None:
    assert _node("routes[].inflight")["default"] == 4096
    assert _node("shutdown.grace")["default"] == "30s"
    assert _node("admin.listen")["default"] == "127.0.0.1:9464"
    assert _node("routes[].mode")["default"] == "binary"
