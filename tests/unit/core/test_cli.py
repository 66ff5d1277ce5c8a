"""The CLI against the shipped store example (config/examples)."""

import json
from pathlib import Path

import pytest

from gateway.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[3]
STORE = str(ROOT / "config/examples/store.xreg.json")
MESSAGES = str(ROOT / "config/examples/store-messages.jsonl")


def test_validate_store_example(capsys):
    assert main(["validate", STORE]) == 0
    assert "valid: 2 message definition(s), 3 endpoint(s), 0 error(s)" in capsys.readouterr().out


def test_validate_reports_errors_with_exit_1(tmp_path, capsys):
    bad = tmp_path / "bad.xreg.json"
    bad.write_text(json.dumps({"messagegroups": {"g": {"messages": {"m": {
        "protocol": "MQTT/5.0", "protocoloptions": {"topic_name": "/a/{+x}", "qos": 7}}}}}}))
    assert main(["validate", str(bad)]) == 1
    out = capsys.readouterr().out
    assert "bad.xreg.json" in out and "qos" in out and "{+x}" in out


def test_match_store_messages(capsys):
    assert main(["match", "-d", STORE, MESSAGES]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(lines) == 5
    sale = lines[0]
    assert sale["match"] == "/messagegroups/store/messages/cashierdesk"
    assert sale["context"] == {"storeid": "12", "cdid": "3", "eventType": "com.example.sale"}
    ce = sale["cloudevent"]
    assert (ce["type"], ce["source"], ce["subject"]) == ("com.example.sale", "12", "3")
    assert ce["time"] == "2026-11-21T09:00:00Z" and ce["data"] == {"amount": 12.5,
                                                                  "currency": "EUR"}
    assert lines[2]["match"] == "/messagegroups/store/messages/storestatus"
    assert lines[2]["cloudevent"]["source"] == "/stores/12"
    unmatched = lines[3]
    assert unmatched["match"] is None and unmatched["reason"] == "unmatched"
    assert unmatched["explain"][0]["failure"] == (
        "topic_name: expected /store/{storeid}/cashierdesk/{cdid}, got /store/12/desk/3")
    binary = lines[4]  # a binary-mode CloudEvent over MQTT 5 passes through unchanged
    assert binary["match"] == "/messagegroups/store/messages/cashierdesk"
    assert binary["cloudevent"]["id"] == "evt-1" and binary["cloudevent"]["data"] == {"amount": 3}


def test_match_reports_bad_lines_and_continues(tmp_path, capsys):
    f = tmp_path / "in.jsonl"
    f.write_text('not json\n{"protocol": "MQTT/5.0", "topic_name": "/store/1/status", "qos": 1}\n')
    assert main(["match", "-d", STORE, str(f)]) == 0
    first, second = (json.loads(x) for x in capsys.readouterr().out.splitlines())
    assert first["reason"] == "invalid-record" and first["line"] == 1
    assert second["match"] == "/messagegroups/store/messages/storestatus"


def test_test_command_passes_and_fails_with_diff(tmp_path, capsys):
    assert main(["test", str(ROOT / "config/examples/store.tests.yaml")]) == 0
    assert "4 passed, 0 failed" in capsys.readouterr().out
    cases = tmp_path / "wrong.yaml"
    cases.write_text(
        f"definitions: [{STORE}]\n"
        "cases:\n"
        "  - name: wrong subject\n"
        "    input: {protocol: MQTT/5.0, topic_name: /store/1/cashierdesk/2,\n"
        "            user_properties: [{name: eventType, value: t}]}\n"
        "    expect: {cloudevent: {subject: '9'}}\n")
    assert main(["test", str(cases)]) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and '-    "subject": "9"' in out and '+    "subject": "2"' in out


def test_lint_reports_overlap_with_a_witness(tmp_path, capsys):
    doc = tmp_path / "overlap.xreg.json"
    doc.write_text(json.dumps({"messagegroups": {"g": {"messages": {
        "a": {"protocol": "MQTT/5.0", "protocoloptions": {"topic_name": "/s/{x}/desk"}},
        "b": {"protocol": "MQTT/5.0", "protocoloptions": {"topic_name": "/s/1/{y}"}},
        "c": {"protocol": "MQTT/5.0", "protocoloptions": {"topic_name": "/other/{z}"}},
    }}}}))
    assert main(["lint", str(doc)]) == 0
    [line] = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert {line["first"], line["second"]} == {"/messagegroups/g/messages/a",
                                               "/messagegroups/g/messages/b"}
    assert line["example"]["topic_name"] == "/s/1/desk"


def test_spark_kafka_sink_is_structured_unless_told_binary(capsys):
    """The job never reads the routes' `mode`: without --kafka-mode a Kafka sink gets
    structured CloudEvents (the help says so)."""
    common = ["spark", "-c", "gateway.yaml", "--source", "file:in", "--sink", "kafka://k:9092/t"]
    parser = build_parser()
    assert parser.parse_args(common).kafka_mode == "structured"
    assert parser.parse_args([*common, "--kafka-mode", "binary"]).kafka_mode == "binary"
    with pytest.raises(SystemExit):
        main(["spark", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert "Kafka sink (default: structured, whatever mode the config's routes have)" in shown
