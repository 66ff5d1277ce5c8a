"""Each class of config problem: exact file, JSON path, message and fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway.config import load_config, load_config_text
from gateway.spec.problems import Problem

ROOT = Path(__file__).resolve().parents[3]
STORE = ROOT / "config/examples/store.xreg.json"
EXTRA = ROOT / "config/examples/demo-endpoints.xreg.json"
DEFS = f'definitions: ["{STORE}", "{EXTRA}"]\n'
MORE = """{"endpoints": {
 "legacy-mqtt": {"usage": ["producer"], "protocol": "MQTT/3.1.1",
   "protocoloptions": {"endpoints": [{"uri": "mqtt://127.0.0.1:1883"}], "topic": "out"}},
 "template-amqp": {"usage": ["producer"], "protocol": "AMQP",
   "protocoloptions": {"deployed": false, "node": "q"}}}}"""


def _problems(tmp_path: Path, text: str, env: dict[str, str] | None = None) -> list[Problem]:
    (tmp_path / "more.xreg.json").write_text(MORE)
    config, problems = load_config_text(text, "gw.yaml", tmp_path, environ=env or {})
    mine = [p for p in problems if p.file == "gw.yaml"]
    if any(p.is_error for p in mine):
        assert config is None
    return mine


def _only(problems: list[Problem]) -> Problem:
    assert len(problems) == 1, [str(p) for p in problems]
    return problems[0]


def test_unknown_key_is_an_error_with_suggestion(tmp_path: Path) -> None:
    text = DEFS + ("routes:\n  - from: store-mqtt\n    to: [events-kafka]\n    mdoe: structured\n"
                   "deadletter: store-deadletter\n")
    assert _only(_problems(tmp_path, text)) == Problem(
        "error", "gw.yaml", "$.routes[0].mdoe", "unknown key 'mdoe'",
        "did you mean 'mode'?", line=5, column=5)


def test_a_misspelt_password_is_an_error_not_a_silent_anonymous_login(tmp_path: Path) -> None:
    text = DEFS + ("routes:\n  - from: store-mqtt\n    to: [events-kafka]\n"
                   "deadletter: store-deadletter\n"
                   "endpoints:\n  store-mqtt: {username: u, pasword: p}\n")
    config, problems = load_config_text(text, "gw.yaml", tmp_path, environ={})
    assert config is None
    assert any(p.severity == "error" and p.path == '$.endpoints["store-mqtt"].pasword'
               and "did you mean 'password'?" in p.fix for p in problems), problems


def test_an_endpoint_protocol_no_adapter_serves_is_an_error(tmp_path: Path) -> None:
    doc = {"endpoints": {
        "src": {"usage": ["consumer"], "protocol": "KAFAK", "messagegroups": ["/messagegroups/g"],
                "protocoloptions": {"endpoints": [{"uri": "kafka://h:9092"}]}},
        "out": {"usage": ["producer"], "protocol": "KAFKA",
                "protocoloptions": {"endpoints": [{"uri": "kafka://h:9092"}], "topic": "t"}}},
        "messagegroups": {"g": {"messages": {"m": {
            "envelope": "CloudEvents/1.0",
            "envelopemetadata": {"type": {"value": "t"}, "source": {"value": "/s"}}}}}}}
    (tmp_path / "d.json").write_text(json.dumps(doc))
    text = "definitions: [d.json]\nroutes:\n  - from: src\n    to: [out]\ndeadletter: log\n"
    config, problems = load_config_text(text, "gw.yaml", tmp_path, environ={})
    assert config is None
    found = [p for p in problems if p.severity == "error" and "KAFAK" in p.message]
    assert found and "no adapter serves" in found[0].message, problems
    assert "did you mean 'KAFKA'?" in found[0].fix


def test_wrong_types(tmp_path: Path) -> None:
    text = DEFS + ("routes:\n  - from: store-mqtt\n    to: events-kafka\n    inflight: many\n"
                   "deadletter: store-deadletter\n")
    assert _problems(tmp_path, text) == [
        Problem("error", "gw.yaml", "$.routes[0].to",
                'expected list of string, got a string ("events-kafka")',
                'write list of string, e.g. to: ["events-kafka"]', line=4, column=5),
        Problem("error", "gw.yaml", "$.routes[0].inflight",
                'expected integer, got a string ("many")',
                "write integer, e.g. inflight: 4096", line=5, column=5),
    ]


def test_value_checks(tmp_path: Path) -> None:
    text = DEFS + ("routes:\n  - from: store-mqtt\n    to: []\n    inflight: 0\n    mode: binery\n"
                   "deadletter: store-deadletter\nadmin: {listen: localhost}\n")
    found = {p.path: (p.message, p.fix, p.line, p.column) for p in _problems(tmp_path, text)}
    assert found["$.routes[0].to"][::2] == ("'to' is empty", 4)
    assert found["$.routes[0].inflight"] == ("must be greater than 0, not 0",
                                            "use a positive integer such as 256", 5, 5)
    assert found["$.routes[0].mode"] == ("'binery' is not one of binary, structured",
                                        "did you mean 'binary'? write one of: binary, structured",
                                        6, 5)
    assert found["$.admin.listen"][::2] == ("'localhost' is not host:port", 8)
    assert found["$.admin.listen"][3] == 9  # `listen` inside `admin: {listen: localhost}`


def test_bad_durations(tmp_path: Path) -> None:
    text = DEFS + ("routes:\n  - from: store-mqtt\n    to: [events-kafka]\n"
                   "    retry: {initial_backoff: 30}\n"
                   "deadletter: store-deadletter\nshutdown: {grace: 30 secs}\n")
    fix = "write a number with a unit: 500ms, 30s, 2m, 1h (or combined: 1m30s)"
    assert _problems(tmp_path, text) == [
        Problem("error", "gw.yaml", "$.routes[0].retry.initial_backoff",
                "expected duration, got an integer (30)",
                "add the unit: 30s for seconds, 30ms for milliseconds (units: ms, s, m, h)",
                line=5, column=13),
        Problem("error", "gw.yaml", "$.shutdown.grace", "'30 secs' is not a duration", fix,
                line=7, column=12),
    ]


def test_missing_deadletter_is_an_error(tmp_path: Path) -> None:
    text = DEFS + "routes:\n  - from: store-mqtt\n    to: [events-kafka]\n"
    assert _only(_problems(tmp_path, text)) == Problem(
        "error", "gw.yaml", "$.deadletter", "'deadletter' is required",
        "add deadletter: <id of a producer endpoint>, or deadletter: log to only log and count "
        "messages that cannot be delivered")


def test_unknown_endpoints(tmp_path: Path) -> None:
    text = DEFS + ("routes:\n  - from: store-mqtt\n    to: [events-kafka, events-natz]\n"
                   "deadletter: store-deadletter\nendpoints:\n  stor-mqtt: {uri: 'mqtt://h:1883'}\n")
    assert _problems(tmp_path, text) == [
        Problem("error", "gw.yaml", "$.routes[0].to[1]",
                "no endpoint 'events-natz' in the definitions",
                "did you mean 'events-nats'?", line=4, column=24),
        Problem("error", "gw.yaml", '$.endpoints["stor-mqtt"]',
                "no endpoint 'stor-mqtt' in the definitions",
                "did you mean 'store-mqtt'?", line=7, column=3),
    ]


def test_unknown_message_group(tmp_path: Path) -> None:
    text = DEFS + ("routes:\n  - from: store-mqtt\n    to: [events-kafka]\n"
                   "    messagegroups: [stor]\ndeadletter: store-deadletter\n")
    assert _only(_problems(tmp_path, text)) == Problem(
        "error", "gw.yaml", "$.routes[0].messagegroups[0]",
        "no message group 'stor' in the definitions", "did you mean 'store'?",
        line=5, column=21)


def test_wrong_usage(tmp_path: Path) -> None:
    text = DEFS + "routes:\n  - from: events-kafka\n    to: [store-mqtt]\ndeadletter: store-mqtt\n"
    fix = ("name an endpoint with usage {0}, or add {1} to the usage of '{2}' in " + str(STORE))
    assert _problems(tmp_path, text) == [
        Problem("error", "gw.yaml", "$.routes[0].from",
                "endpoint 'events-kafka' has usage producer, but consumer or subscriber is "
                "needed here",
                fix.format("consumer or subscriber", "consumer", "events-kafka"),
                line=3, column=5),
        Problem("error", "gw.yaml", "$.routes[0].to[0]",
                "endpoint 'store-mqtt' has usage consumer, but producer is needed here",
                fix.format("producer", "producer", "store-mqtt"), line=4, column=10),
        Problem("error", "gw.yaml", "$.deadletter",
                "endpoint 'store-mqtt' has usage consumer, but producer is needed here",
                fix.format("producer", "producer", "store-mqtt"), line=5, column=1),
    ]


def test_scheme_mismatch_and_bad_host(tmp_path: Path) -> None:
    text = DEFS + ("routes:\n  - from: store-mqtt\n    to: [events-kafka]\n"
                   "deadletter: store-deadletter\nendpoints:\n"
                   "  events-kafka: {uri: 'nats://h:4222'}\n"
                   "  store-mqtt: {uri: 'mqtt://u:pw-secret@:1883'}\n")
    assert sorted(_problems(tmp_path, text), key=lambda p: p.path) == [
        Problem("error", "gw.yaml", '$.endpoints["events-kafka"].uri',
                "'nats://h:4222' does not fit protocol KAFKA: the scheme must be kafka://",
                "write e.g. uri: kafka://host1:9092,host2:9092", line=7, column=18),
        Problem("error", "gw.yaml", '$.endpoints["store-mqtt"].uri',
                "'mqtt://u:***@:1883' has no valid host and port",
                "write e.g. uri: mqtt://host:1883", line=8, column=16),
    ]


@pytest.mark.parametrize("uri", ["kafka://a:1,b:2", "kafka://h:9092"])
def test_kafka_bootstrap_uri(tmp_path: Path, uri: str) -> None:
    text = DEFS + ("routes:\n  - from: store-mqtt\n    to: [events-kafka]\n"
                   f"deadletter: store-deadletter\nendpoints:\n  events-kafka: {{uri: '{uri}'}}\n")
    config, _ = load_config_text(text, "gw.yaml", tmp_path, environ={})
    assert config is not None
    assert ",".join(config.endpoints["events-kafka"].bootstrap_servers) == uri[len("kafka://"):]


def test_mqtt311_binary_is_impossible(tmp_path: Path) -> None:
    text = DEFS.replace("]", ", more.xreg.json]") + (
        "routes:\n  - from: store-mqtt\n    to: [events-kafka, legacy-mqtt]\n"
        "deadletter: store-deadletter\n")
    assert _only(_problems(tmp_path, text)) == Problem(
        "error", "gw.yaml", "$.routes[0].mode",
        "mode binary is impossible towards 'legacy-mqtt': MQTT/3.1.1 has no message properties "
        "to carry CloudEvents attributes",
        "use mode: structured, or make 'legacy-mqtt' an MQTT/5.0 endpoint",
        line=3, column=5)  # no `mode:` written: the route itself
    structured = text.replace("legacy-mqtt]\n", "legacy-mqtt]\n    mode: structured\n")
    assert _problems(tmp_path, structured) == []


def test_template_endpoint_needs_an_override(tmp_path: Path) -> None:
    text = DEFS.replace("]", ", more.xreg.json]") + (
        "routes:\n  - from: store-mqtt\n    to: [template-amqp]\n"
        "deadletter: store-deadletter\n")
    assert _only(_problems(tmp_path, text)) == Problem(
        "error", "gw.yaml", "$.routes[0].to[0]",
        "endpoint 'template-amqp' is a template (deployed: false) and needs an address",
        "add the address to the config: endpoints: {template-amqp: {uri: ...}}",
        line=4, column=10)
    fixed = text + "endpoints:\n  template-amqp: {uri: 'amqps://broker:5671'}\n"
    assert _problems(tmp_path, fixed) == []


def test_missing_env_var(tmp_path: Path) -> None:
    text = DEFS + ("routes:\n  - from: store-mqtt\n    to: [events-kafka]\n"
                   "deadletter: store-deadletter\nendpoints:\n"
                   "  store-mqtt: {password: '${MQTT_PASSWORD}'}\n")
    assert _only(_problems(tmp_path, text)) == Problem(
        "error", "gw.yaml", '$.endpoints["store-mqtt"].password',
        "environment variable MQTT_PASSWORD is not set",
        "set MQTT_PASSWORD, or give a default: ${MQTT_PASSWORD:-value}", line=7, column=16)


def test_missing_secret_file(tmp_path: Path) -> None:
    text = DEFS + ("routes:\n  - from: store-mqtt\n    to: [events-kafka]\n"
                   "deadletter: store-deadletter\nendpoints:\n"
                   "  store-mqtt: {password_file: nope/pw}\n")
    assert _only(_problems(tmp_path, text)) == Problem(
        "error", "gw.yaml", '$.endpoints["store-mqtt"].password_file',
        f"cannot read secret file '{tmp_path / 'nope/pw'}': No such file or directory",
        "create the file or correct the path (relative paths start at the config file's "
        "directory)", line=7, column=16)


def test_password_and_password_file_conflict(tmp_path: Path) -> None:
    text = DEFS + ("routes:\n  - from: store-mqtt\n    to: [events-kafka]\n"
                   "deadletter: store-deadletter\nendpoints:\n"
                   "  store-mqtt: {password: x, password_file: pw}\n")
    found = _only(_problems(tmp_path, text))
    assert (found.message, found.line, found.column) == (
        "both password and password_file are given", 7, 3)


def test_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    text = DEFS + "routes:\n  - from: store-mqtt\n    to: [events-kafka\ndeadletter: x\n"
    assert _only(_problems(tmp_path, text)) == Problem(
        "error", "gw.yaml", "$",
        "YAML syntax error: expected ',' or ']', but got ':' "
        "(while parsing a flow sequence at line 4, column 9)",
        "fix the YAML syntax there (indentation, quotes, colons)", line=5, column=11)


def test_duplicate_key(tmp_path: Path) -> None:
    text = DEFS + "routes: []\nroutes: []\ndeadletter: log\n"
    assert _problems(tmp_path, text)[0] == Problem(
        "error", "gw.yaml", "$.routes", "key 'routes' appears twice",
        "keep one of them: YAML would silently use the last", line=3, column=1)


def test_unreadable_and_empty_config(tmp_path: Path) -> None:
    config, problems = load_config(tmp_path / "absent.yaml")
    assert config is None
    assert problems[0].path == "$" and "cannot read the config file" in problems[0].message
    (tmp_path / "empty.yaml").write_text("")
    _, problems = load_config(tmp_path / "empty.yaml")
    assert [p.message for p in problems] == ["the config is empty"]


def test_secrets_never_in_problem_messages(tmp_path: Path) -> None:
    text = DEFS + ("routes:\n  - from: store-mqtt\n    to: [events-kafka]\n"
                   "deadletter: store-deadletter\nendpoints:\n"
                   "  store-mqtt: {password: [hunter2-secret], uri: 'tcp://u:uri-secret@h:1'}\n"
                   "  events-kafka: {password: 42424242}\n")
    shown = " ".join(str(p) for p in _problems(tmp_path, text))
    assert "$.endpoints[\"store-mqtt\"].password" in shown
    for secret in ("hunter2-secret", "uri-secret", "42424242"):
        assert secret not in shown


def test_registry_headers_are_sent_and_never_shown(tmp_path: Path) -> None:
    # Port 9 (discard) on loopback refuses at once: the definitions load fails fast.
    text = ("definitions:\n  - url: http://127.0.0.1:9\n    poll: 5s\n"
            "    headers: {Authorization: 'Bearer tok-secret'}\n"
            "routes:\n  - from: store-mqtt\n    to: [events-kafka]\ndeadletter: log\n")
    (tmp_path / "more.xreg.json").write_text(MORE)
    _, problems = load_config_text(text, "gw.yaml", tmp_path, environ={})
    assert not any(p.path.endswith(".headers") for p in problems)
    assert any("cannot connect" in p.message for p in problems)
    assert "tok-secret" not in " ".join(str(p) for p in problems)


def test_a_missing_definitions_file_is_reported_once_without_knock_on_errors(
    tmp_path: Path,
) -> None:
    text = ("definitions: [nope.xreg.json]\nroutes:\n  - from: store-mqtt\n"
            "    to: [events-kafka]\ndeadletter: store-deadletter\n"
            "endpoints:\n  store-mqtt: {uri: 'mqtt://h:1883'}\n")
    config, problems = load_config_text(text, "gw.yaml", tmp_path, environ={})
    assert config is None
    assert [(p.severity, p.message) for p in problems] == [("error", "file not found")]


def test_an_impossible_date_in_the_yaml_is_a_problem_not_a_crash(tmp_path: Path) -> None:
    # Found by Hypothesis: PyYAML raised ValueError("year 0 is out of range").
    config, problems = load_config_text("x: 0000-0-0T0:00:00\n", "gw.yaml", tmp_path,
                                        environ={})
    assert config is None
    assert [(p.severity, p.path) for p in problems] == [("error", "$")]
    assert "year 0 is out of range" in problems[0].message
