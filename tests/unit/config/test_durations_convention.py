"""One convention for time values: a unit always accepted; bare numbers only where the
spec writes numbers (adapter options: seconds; Kafka `*_ms`: milliseconds); fixes in
plain words."""

from __future__ import annotations

from pathlib import Path

from adapters.kafka.options import OPTIONS as KAFKA
from gateway.config import load_config_text

ROOT = Path(__file__).resolve().parents[3]
STORE = ROOT / "config/examples/store.xreg.json"
EXTRA = ROOT / "config/examples/demo-endpoints.xreg.json"
DEFS = f'definitions: ["{STORE}", "{EXTRA}"]\n'
ROUTE = "routes:\n  - from: store-mqtt\n    to: [events-kafka]\n"


def _load(tmp: Path, text: str):  # type: ignore[no-untyped-def]
    return load_config_text(DEFS + text, "gw.yaml", tmp, environ={})


def test_kafka_ms_options_take_milliseconds_or_a_duration(tmp_path: Path) -> None:
    config, problems = _load(tmp_path, ROUTE + "deadletter: log\nendpoints:\n"
                             "  events-kafka: {options: {linger_ms: 20ms}}\n"
                             "  store-mqtt: {options: {qos: 1}}\n")
    assert config is not None, [str(p) for p in problems]
    read = KAFKA.read({"session_timeout_ms": "10s", "heartbeat_interval_ms": 2500,
                       "linger_ms": "1m"})
    assert (read["session_timeout_ms"], read["heartbeat_interval_ms"], read["linger_ms"]) \
        == (10000, 2500, 60000)


def test_a_bare_number_on_a_gateway_key_says_how_to_write_it(tmp_path: Path) -> None:
    config, problems = _load(tmp_path, "routes:\n  - from: store-mqtt\n    to: [events-kafka]\n"
                             "    retry: {initial_backoff: 2}\ndeadletter: log\n")
    assert config is None
    (problem,) = [p for p in problems if p.is_error]
    assert problem.path == "$.routes[0].retry.initial_backoff"
    assert problem.fix.startswith("add the unit: 2s for seconds, 2ms for milliseconds")


def test_fix_hints_are_plain_words_not_python_reprs(tmp_path: Path) -> None:
    config, problems = _load(tmp_path, ROUTE + "deadletter: log\nendpoints:\n"
                             "  events-kafka: {options: {security_protocol: tls, "
                             "publish_timeout: soon}}\n")
    assert config is None
    fixes = {p.path.rsplit(".", 1)[-1]: p.fix for p in problems if p.is_error}
    assert fixes["security_protocol"] == \
        "write one of: PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"
    assert fixes["publish_timeout"] == ("write a number of seconds such as 10 or 0.5, or a "
                                        "duration with a unit such as 10s, 500ms or 2m")
    for fix in fixes.values():
        assert "(" not in fix and "'" not in fix, fix
