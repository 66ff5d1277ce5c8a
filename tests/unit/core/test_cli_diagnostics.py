"""`xrgw validate` / `xrgw lint` diagnostics: `FILE:LINE:COL: severity: message` lines,
`--format json`, and `validate --no-env` against the shipped example configs."""

import json
import re
from pathlib import Path

import pytest

from gateway.cli import main
from gateway.commands.validate import NO_ENV_NOTE
from gateway.spec.problems import Problem

ROOT = Path(__file__).resolve().parents[3]
STORE = ROOT / "config/examples/store.xreg.json"
#: Every gateway config shipped (the *.tests.yaml files are definition test cases).
EXAMPLE_CONFIGS = sorted(p for p in [*ROOT.glob("config/*.yaml"),
                                     *ROOT.glob("config/examples/*.yaml")]
                         if not p.name.endswith(".tests.yaml"))
JSON_KEYS = {"file", "line", "column", "severity", "path", "message", "fix"}


def _variables(path: Path) -> set[str]:
    return set(re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)", path.read_text()))


def test_the_examples_are_all_found():
    names = {p.name for p in EXAMPLE_CONFIGS}
    assert {"demo.yaml", "amqp-orders.yaml", "http-webhooks.yaml", "kafka-payments.yaml",
            "mqtt-telemetry.yaml", "nats-sensors.yaml"} <= names


@pytest.mark.parametrize("config", EXAMPLE_CONFIGS, ids=lambda p: p.name)
def test_every_example_config_passes_validate_no_env_in_a_clean_environment(
    config, monkeypatch, capsys
):
    for name in _variables(config):
        monkeypatch.delenv(name, raising=False)
    assert main(["validate", "--no-env", "-c", str(config)]) == 0, capsys.readouterr()
    out, err = capsys.readouterr()
    assert f"valid: {config}" in out
    assert err == NO_ENV_NOTE + "\n"  # one line says what was not checked


def test_no_env_does_not_read_the_environment(monkeypatch, capsys):
    # Values that would fail every check: with --no-env the written defaults are used.
    config = ROOT / "config/examples/amqp-orders.yaml"
    monkeypatch.setenv("XRGW_ADMIN_LISTEN", "not-an-address")
    assert main(["validate", "-c", str(config)]) == 1
    assert "error: 'not-an-address' is not host:port ($.admin.listen)" in capsys.readouterr().out
    assert main(["validate", "--no-env", "-c", str(config)]) == 0, capsys.readouterr()
    monkeypatch.delenv("XRGW_ADMIN_LISTEN")
    monkeypatch.setenv("XRGW_AMQP_URI", "kafka://wrong-scheme:9092")
    assert main(["validate", "-c", str(config)]) == 1
    assert '($.endpoints["orders-amqp"].uri)' in capsys.readouterr().out
    assert main(["validate", "--no-env", "-c", str(config)]) == 0, capsys.readouterr()


def _config(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "gw.yaml"
    path.write_text(f'definitions: ["{STORE}"]\n' + body)
    return path


def test_an_unset_variable_in_an_int_field_fails_without_no_env_only(tmp_path, capsys,
                                                                      monkeypatch):
    monkeypatch.delenv("XRGW_TEST_INFLIGHT", raising=False)
    path = _config(tmp_path, "routes:\n  - from: store-mqtt\n    to: [events-kafka]\n"
                             "    inflight: ${XRGW_TEST_INFLIGHT}\ndeadletter: log\n")
    assert main(["validate", "-c", str(path)]) == 1
    out, err = capsys.readouterr()
    assert f"{path}:5:5: error: environment variable XRGW_TEST_INFLIGHT is not set " \
           "($.routes[0].inflight) (fix: set XRGW_TEST_INFLIGHT, or give a default: " \
           "${XRGW_TEST_INFLIGHT:-value})\n" in out
    assert err == ""
    assert main(["validate", "--no-env", "-c", str(path)]) == 0
    out, err = capsys.readouterr()
    assert f"\nvalid: {path}: 1 route(s)" in out
    assert err == NO_ENV_NOTE + "\n"


def test_a_typo_still_fails_with_no_env(tmp_path, capsys):
    path = _config(tmp_path, "routes:\n  - from: store-mqtt\n    to: [events-kafka]\n"
                             "    mdoe: structured\ndeadletter: log\n"
                             "endpoints:\n  store-mqtt: {password_file: absent/pw}\n")
    assert main(["validate", "--no-env", "-c", str(path)]) == 1
    out = capsys.readouterr().out
    assert out.splitlines() == [
        f"{path}:5:5: error: unknown key 'mdoe' ($.routes[0].mdoe) (fix: did you mean "
        "'mode'?)",
        f"invalid: {path}: 1 error(s)",
    ]
    # The missing secret file is an error with the environment.
    fixed = path.read_text().replace("    mdoe: structured\n", "")
    path.write_text(fixed)
    assert main(["validate", "-c", str(path)]) == 1
    assert f"{path}:7:16: error: cannot read secret file" in capsys.readouterr().out
    assert main(["validate", "--no-env", "-c", str(path)]) == 0


def test_problems_in_definitions_print_with_their_line_and_column(tmp_path, capsys):
    doc = tmp_path / "bad.xreg.json"
    doc.write_text('{\n  "messagegroups": {\n    "g": {\n      "messages": {\n'
                   '        "m": {\n          "protocol": "MQTT/5.0",\n'
                   '          "protocoloptions": {"topic_name": "/a", "qos": 7}\n'
                   '        }\n      }\n    }\n  }\n}\n')
    assert main(["validate", str(doc)]) == 1
    [line, verdict] = capsys.readouterr().out.splitlines()
    # `"qos"` is at line 7, column 51 of the document.
    assert line.startswith(f"{doc}:7:51: error: ")
    assert "($.messagegroups.g.messages.m.protocoloptions.qos)" in line
    assert verdict.startswith("invalid:")


def test_format_json_is_one_array_on_stdout_and_the_verdict_on_stderr(tmp_path, capsys):
    path = _config(tmp_path, "routes:\n  - from: store-mqtt\n    to: [events-kafka]\n"
                             "    inflight: many\n")
    assert main(["validate", "--format", "json", "-c", str(path)]) == 1
    out, err = capsys.readouterr()
    entries = json.loads(out)
    assert all(set(e) == JSON_KEYS for e in entries)
    mine = [e for e in entries if e["file"] == str(path)]
    assert mine == [
        {"file": str(path), "line": 5, "column": 5, "severity": "error",
         "path": "$.routes[0].inflight", "message": 'expected integer, got a string ("many")',
         "fix": "write integer, e.g. inflight: 4096"},
        {"file": str(path), "line": None, "column": None, "severity": "error",
         "path": "$.deadletter", "message": "'deadletter' is required",
         "fix": "add deadletter: <id of a producer endpoint>, or deadletter: log to only log "
                "and count messages that cannot be delivered"},
    ]
    assert err == f"invalid: {path}: 2 error(s)\n"


def test_format_json_of_valid_documents(capsys):
    assert main(["validate", "--format", "json", str(STORE)]) == 0
    out, err = capsys.readouterr()
    [warning] = json.loads(out)  # the store example's one warning, placed in the document
    assert warning["severity"] == "warning" and warning["file"] == str(STORE)
    assert (warning["line"], warning["column"]) == (49, 11)
    assert STORE.read_text().splitlines()[48][10:].startswith('"envelopeoptions"')
    assert err.startswith("valid: 2 message definition(s)")


def test_lint_format_json_places_overlaps_at_the_first_definition(tmp_path, capsys):
    doc = tmp_path / "overlap.xreg.json"
    doc.write_text(json.dumps({"messagegroups": {"g": {"messages": {
        "a": {"protocol": "MQTT/5.0", "protocoloptions": {"topic_name": "/s/{x}/desk"}},
        "b": {"protocol": "MQTT/5.0", "protocoloptions": {"topic_name": "/s/1/{y}"}},
    }}}}, indent=1))
    assert main(["lint", "--format", "json", str(doc)]) == 0
    out, err = capsys.readouterr()
    [entry] = json.loads(out)
    assert set(entry) == JSON_KEYS | {"first", "second", "example"}
    assert (entry["file"], entry["path"], entry["severity"]) == (
        str(doc), "$.messagegroups.g.messages.a", "warning")
    assert doc.read_text().splitlines()[entry["line"] - 1][entry["column"] - 1:] == '"a": {'
    assert entry["example"]["topic_name"] == "/s/1/desk"
    assert err == "1 overlapping pair(s)\n"
    assert main(["lint", "--strict", "--format", "json", str(doc)]) == 1
    assert json.loads(capsys.readouterr().out)[0]["severity"] == "error"


def test_lint_format_json_with_broken_documents(tmp_path, capsys):
    doc = tmp_path / "broken.xreg.json"
    doc.write_text('{"messagegroups": {\n  "g": 1,\n}}')
    assert main(["lint", "--format", "json", str(doc)]) == 1
    [entry] = json.loads(capsys.readouterr().out)
    assert (entry["severity"], entry["line"], entry["column"]) == ("error", 3, 1)
    assert entry["message"].startswith("malformed JSON")


@pytest.mark.parametrize(("problem", "text"), [
    (Problem("error", "a.yaml", "$.x", "bad", "fix it", line=3, column=7),
     "a.yaml:3:7: error: bad ($.x) (fix: fix it)"),
    (Problem("warning", "a.yaml", "$.x", "odd", line=3),
     "a.yaml:3: warning: odd ($.x)"),
    (Problem("error", "https://reg.example/export", '$.endpoints["e"]', "bad", "fix it"),
     'https://reg.example/export: error: bad ($.endpoints["e"]) (fix: fix it)'),
    (Problem("error", "a.json", "$", "file not found", "check the path"),
     "a.json: error: file not found (fix: check the path)"),
])
def test_printed_forms(problem, text):
    assert str(problem) == text


def test_the_documented_problem_matcher_reads_the_printed_lines(tmp_path, capsys):
    text = (ROOT / "docs/troubleshooting.md").read_text()
    start = text.index('{"problemMatcher"')
    matcher = json.loads(text[start:text.index("}]}]}", start) + 5])
    pattern = matcher["problemMatcher"][0]["pattern"][0]
    path = _config(tmp_path, "routes:\n  - from: store-mqtt\n    to: [events-kafka]\n"
                             "    mdoe: structured\ndeadletter: log\n")
    main(["validate", "-c", str(path)])
    [line] = [x for x in capsys.readouterr().out.splitlines() if x.startswith(str(path))]
    found = re.match(pattern["regexp"], line)
    assert found is not None, line
    assert [found.group(pattern[k]) for k in ("file", "line", "column", "severity")] == [
        str(path), "5", "5", "error"]
    assert found.group(pattern["message"]).startswith("unknown key 'mdoe' ($.routes[0].mdoe)")
