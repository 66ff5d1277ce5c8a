"""`xrgw validate` / `xrgw lint` diagnostics: `FILE:LINE:COL: severity: message` lines
and `--format json`."""

import json
from pathlib import Path

import pytest

from gateway.cli import main
from gateway.problems import Problem

ROOT = Path(__file__).resolve().parents[3]
STORE = ROOT / "config/examples/store.xreg.json"
JSON_KEYS = {"file", "line", "column", "severity", "path", "message", "fix"}


def _config(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "gw.yaml"
    path.write_text(f'definitions: ["{STORE}"]\n' + body)
    return path


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

