"""The CLI against the shipped store example (config/examples)."""

import json
import re
import shlex
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
    out, err = capsys.readouterr()
    *overlaps, summary = out.splitlines()
    assert summary == "1 overlapping pair(s)" and err == ""  # one stream, like validate
    [line] = [json.loads(x) for x in overlaps]
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


def test_spark_refuses_a_partition_key_a_route_would_refuse(capsys):
    """Checked before Spark starts, in the words of the route option."""
    store = str(Path(__file__).resolve().parents[3] / "config/examples/store.xreg.json")
    code = main(["spark", "-d", store, "--source", "file:in", "--sink", "kafka://k:9092/t",
                 "--partition-key", "fixed"])
    assert code == 2
    err = capsys.readouterr().err
    assert ("--partition-key 'fixed': a constant key sends every record to one partition; "
            "write source, none or a template with a placeholder such as {storeid}") in err


def test_lint_and_validate_report_on_the_same_stream(tmp_path, capsys):
    """Problems, verdicts and summaries of both commands go to stdout; stderr stays empty."""
    doc = tmp_path / "warn.xreg.json"
    doc.write_text(json.dumps({"messagegroups": {"g": {"messages": {"m": {
        "protocol": "MQTT/5.0", "protocoloptions": {"topic_name": "/a"},
        "envelopeoptions": {"type": {"value": "t"}}}}}}}))
    for command in (["validate"], ["lint"]):
        assert main([*command, str(doc)]) == 0
        out, err = capsys.readouterr()
        assert err == "", command
        assert "warn.xreg.json" in out and "warning" in out, (command, out)


def test_version(capsys, monkeypatch):
    from gateway import __version__

    monkeypatch.setenv("XRGW_REVISION", "abc1234")
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"xrgw {__version__} (revision abc1234)\n"


def _example_commands(help_text):
    """The `xrgw ...` command lines of a help text's examples. An example is a command,
    then two or more spaces and what it does; continuations are joined, and pipes,
    redirections and leading variable assignments cut off."""
    examples = help_text.split("\nexamples:\n", 1)[1]
    joined = re.sub(r"\s*\\\n\s*", " ", examples)
    commands = []
    for line in joined.splitlines():
        command = re.split(r"\s{2,}", line.strip())[0]
        for part in command.split("|"):
            words = shlex.split(part.split(">")[0], comments=True)
            while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
                words.pop(0)
            if words[:1] == ["xrgw"]:
                commands.append(words[1:])
    return commands


@pytest.mark.parametrize("name", ["validate", "lint", "diff", "match", "run", "test", "spark",
                                  "schema"])
def test_every_subcommand_help_ends_with_examples_that_parse(name, capsys):
    with pytest.raises(SystemExit):
        main([name, "--help"])
    commands = _example_commands(capsys.readouterr().out)
    assert len(commands) >= 1
    for argv in commands:
        assert argv[0] == name, argv
        build_parser().parse_args(argv)  # SystemExit(2) on an example that does not parse


def test_schema_prints_the_config_json_schema(tmp_path, capsys):
    from gateway.config import config_json_text

    assert main(["schema"]) == 0
    out = capsys.readouterr().out
    assert out == config_json_text()
    assert json.loads(out)["$schema"] == "http://json-schema.org/draft-07/schema#"
    assert main(["schema", "-o", str(tmp_path / "s.json")]) == 0
    assert (tmp_path / "s.json").read_text() == out
