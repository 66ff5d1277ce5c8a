"""Loading a config without its environment (`xrgw validate --no-env`): no `${VAR}` read,
no secret or TLS file required; everything else checked as always."""

from __future__ import annotations

from pathlib import Path

from gateway.config import GatewayConfig, load_config_text
from gateway.spec.problems import Problem

ROOT = Path(__file__).resolve().parents[3]
STORE = ROOT / "config/examples/store.xreg.json"
EXTRA = ROOT / "config/examples/demo-endpoints.xreg.json"
DEFS = f'definitions: ["{STORE}", "{EXTRA}"]\n'
ROUTE = "routes:\n  - from: store-mqtt\n    to: [events-kafka]\n"
LEGACY = """{"endpoints": {"legacy-mqtt": {"usage": ["producer"], "protocol": "MQTT/3.1.1",
  "protocoloptions": {"endpoints": [{"uri": "mqtt://127.0.0.1:1883"}], "topic": "out"}}}}"""


def _load(tmp_path: Path, text: str, *, env: bool,
          environ: dict[str, str] | None = None) -> tuple[GatewayConfig | None, list[Problem]]:
    """The config and the problems of gw.yaml (the store example has a warning of its own)."""
    config, problems = load_config_text(text, "gw.yaml", tmp_path, environ=environ or {},
                                        check_environment=env)
    return config, [p for p in problems if p.file == "gw.yaml"]


def _errors(problems: list[Problem]) -> list[tuple[str, str]]:
    return [(p.path, p.message) for p in problems if p.is_error]


def test_an_unset_variable_in_an_int_field_fails_with_the_environment_only(
    tmp_path: Path,
) -> None:
    text = DEFS + ROUTE + "    inflight: ${XRGW_TEST_INFLIGHT}\ndeadletter: store-deadletter\n"
    config, problems = _load(tmp_path, text, env=True)
    assert config is None
    assert _errors(problems) == [
        ("$.routes[0].inflight", "environment variable XRGW_TEST_INFLIGHT is not set"),
        ("$.routes[0].inflight", "expected integer, got a string (\"\")")]
    config, problems = _load(tmp_path, text, env=False)
    assert config is not None, problems
    assert problems == []
    # A stand-in of the field's type (its default) lets the later stages run.
    assert config.routes[0].inflight == 4096


def test_a_written_default_is_used_and_the_environment_is_not_read(tmp_path: Path) -> None:
    text = DEFS + ROUTE + ("    inflight: ${XRGW_TEST_INFLIGHT:-128}\n"
                           "deadletter: store-deadletter\n")
    environ = {"XRGW_TEST_INFLIGHT": "7"}
    config, _ = _load(tmp_path, text, env=True, environ=environ)
    assert config is not None and config.routes[0].inflight == 7
    config, _ = _load(tmp_path, text, env=False, environ=environ)
    assert config is not None and config.routes[0].inflight == 128
    # A default that is wrong is wrong on every machine.
    config, problems = _load(tmp_path, text.replace(":-128", ":-lots"), env=False)
    assert config is None
    assert _errors(problems) == [("$.routes[0].inflight",
                                  "expected integer, got a string (\"lots\")")]


def test_typos_literal_types_and_references_are_still_checked(tmp_path: Path) -> None:
    text = DEFS + ("routes:\n  - from: store-mqtt\n    to: [events-kafak]\n"
                   "    mdoe: structured\n    inflight: many\n    retry: {attempts: '${A}'}\n"
                   "deadletter: store-deadletter\nendpoints:\n"
                   "  store-mqtt: {uri: 'nats://h:4222', password_file: '${PW_FILE}'}\n")
    config, problems = _load(tmp_path, text, env=False)
    assert config is None
    assert _errors(problems) == [
        ("$.routes[0].mdoe", "unknown key 'mdoe'"),
        ("$.routes[0].inflight", 'expected integer, got a string ("many")'),
    ]
    fixed = text.replace("    mdoe: structured\n    inflight: many\n", "")
    config, problems = _load(tmp_path, fixed, env=False)
    assert _errors(problems) == [
        ("$.routes[0].to[0]", "no endpoint 'events-kafak' in the definitions"),
        ('$.endpoints["store-mqtt"].uri',
         "'nats://h:4222' does not fit protocol MQTT/5.0: the scheme must be mqtt:// or "
         "mqtts:// or tcp:// or ssl://"),
    ]


def test_a_variable_cannot_turn_text_into_a_list(tmp_path: Path) -> None:
    # No environment gives `to` a list, so the error is not the environment's.
    text = DEFS + "routes:\n  - from: store-mqtt\n    to: ${OUTPUTS}\ndeadletter: log\n"
    config, problems = _load(tmp_path, text, env=False)
    assert config is None
    assert [p.path for p in problems if p.is_error] == ["$.routes[0].to"]


def test_secret_and_tls_files_are_required_with_the_environment_only(tmp_path: Path) -> None:
    text = DEFS + ROUTE + ("deadletter: store-deadletter\nendpoints:\n"
                           "  store-mqtt:\n    username_file: nope/user\n"
                           "    password_file: nope/pw\n"
                           "    tls: {ca_file: nope/ca.pem, cert_file: nope/c.pem, "
                           "key_file: nope/c.key}\n")
    config, problems = _load(tmp_path, text, env=True)
    assert config is None
    assert sorted(p.path for p in problems if p.is_error) == [
        '$.endpoints["store-mqtt"].password_file',
        '$.endpoints["store-mqtt"].tls.ca_file',
        '$.endpoints["store-mqtt"].tls.cert_file',
        '$.endpoints["store-mqtt"].tls.key_file',
        '$.endpoints["store-mqtt"].username_file',
    ]
    config, problems = _load(tmp_path, text, env=False)
    assert config is not None and problems == []
    endpoint = config.endpoints["store-mqtt"]
    assert endpoint.password is None and endpoint.username is None
    assert endpoint.tls is not None and endpoint.tls.ca_file == str(tmp_path / "nope/ca.pem")


def test_unread_addresses_references_and_values_are_not_checked(tmp_path: Path) -> None:
    (tmp_path / "legacy.xreg.json").write_text(LEGACY)
    text = DEFS.replace("]", ', "legacy.xreg.json"]') + (
        "routes:\n  - from: store-mqtt\n    to: [events-kafka, legacy-mqtt, '${EXTRA_OUT}']\n"
        "    mode: ${MODE}\n    messagegroups: ['${GROUP}']\n"
        "    retry: {initial_backoff: '${BACKOFF}', max_backoff: 100ms}\n"
        "deadletter: ${DEADLETTER}\nadmin: {listen: '${ADMIN_LISTEN}'}\n"
        "endpoints:\n  store-mqtt: {uri: '${MQTT_URI}', options: {qos: '${QOS}'}}\n")
    config, problems = _load(tmp_path, text, env=True)
    assert config is None
    assert {p.path for p in problems if "is not set" in p.message} == {
        "$.routes[0].to[2]", "$.routes[0].mode", "$.routes[0].messagegroups[0]",
        "$.routes[0].retry.initial_backoff", "$.deadletter", "$.admin.listen",
        '$.endpoints["store-mqtt"].uri', '$.endpoints["store-mqtt"].options.qos'}
    config, problems = _load(tmp_path, text, env=False)
    # Not "mode binary is impossible towards 'legacy-mqtt'", not "no endpoint '${...}'",
    # not "max_backoff is shorter than initial_backoff" (a stand-in against a literal).
    assert problems == [], problems
    assert config is not None
    assert config.endpoints["store-mqtt"].uris == ("${MQTT_URI}",)
    assert config.endpoints["store-mqtt"].options["qos"] == "${QOS}"


def test_an_unknown_option_is_an_error_even_when_its_value_is_unread(tmp_path: Path) -> None:
    text = DEFS + ROUTE + ("deadletter: store-deadletter\n"
                           "endpoints:\n  store-mqtt: {options: {qoss: '${QOS}'}}\n")
    config, problems = _load(tmp_path, text, env=False)
    assert config is None
    [error] = [p for p in problems if p.is_error]
    assert error.path == '$.endpoints["store-mqtt"].options.qoss'
    assert "did you mean 'qos'?" in error.fix


def test_a_definitions_source_named_by_a_variable_is_not_loaded(tmp_path: Path) -> None:
    text = (f'definitions: ["{STORE}", "${{DEFS_DIR}}/more.xreg.json"]\n' + ROUTE +
            "  - from: store-mqtt\n    to: [more-out]\ndeadletter: store-deadletter\n")
    config, problems = _load(tmp_path, text, env=False)
    assert config is not None, problems
    [warning] = problems
    assert (warning.severity, warning.path) == ("warning", "$.definitions[1]")
    assert "--no-env" in warning.message
    # With the environment the variable must be set.
    _, problems = _load(tmp_path, text, env=True)
    assert ("$.definitions[1]", "environment variable DEFS_DIR is not set") in _errors(problems)


def test_a_registry_whose_ca_file_is_not_here_is_not_loaded(tmp_path: Path) -> None:
    # Port 9 (discard) on loopback refuses at once, should anything try to connect.
    text = ("definitions:\n  - url: http://127.0.0.1:9\n    ca_file: absent/ca.pem\n" + ROUTE +
            "deadletter: log\n")
    config, problems = _load(tmp_path, text, env=True)
    assert config is None
    assert ("$.definitions[0].ca_file",
            f"file '{tmp_path / 'absent/ca.pem'}' does not exist") in _errors(problems)
    config, problems = _load(tmp_path, text, env=False)
    assert config is not None, problems
    [warning] = problems
    assert (warning.severity, warning.path) == ("warning", "$.definitions[0]")
    assert "ca_file" in warning.message and "--no-env" in warning.message
