"""`xrgw learn` on files: the draft validates, the summary (text and JSON), and bad input
(empty, not JSON, not UTF-8, one-off messages) gives a clear message, never a traceback."""

from __future__ import annotations

import json

from gateway.cli import main

from .records import store_traffic


def write_records(path, records) -> str:
    path.write_text("".join(r.to_line() + "\n" for r in records), encoding="utf-8")
    return str(path)


def test_learn_writes_a_draft_that_validate_accepts(tmp_path, capsys):
    records = write_records(tmp_path / "r.jsonl", store_traffic(stores=5, desks=2))
    draft = tmp_path / "draft.xreg.json"
    assert main(["learn", records, "-o", str(draft), "--type-prefix", "com.example."]) == 0
    out = capsys.readouterr().out
    assert "learned 30 message(s) into 3 definition(s)" in out
    assert "{storeid} at topic_name[2]: 5 value(s), named after payload storeid" in out
    assert main(["validate", str(draft)]) == 0
    assert "valid: 3 message definition(s)" in capsys.readouterr().out
    assert main(["match", "-d", str(draft), records, "--no-explain"]) == 0
    results = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(results) == 30 and all(r["match"] for r in results)


def test_summary_as_json_has_counts_and_cardinalities(tmp_path, capsys):
    records = write_records(tmp_path / "r.jsonl", store_traffic(stores=4, desks=3))
    assert main(["learn", records, "--format", "json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["messages"] == 36
    assert [d["messages"] for d in summary["definitions"]] == [12, 12, 12]
    first = summary["definitions"][0]
    assert [(p["name"], p["cardinality"]) for p in first["placeholders"]] == [
        ("storeid", 4), ("segment4", 3)]
    assert first["constants"]["qos"] == 1


def test_merge_and_split_knobs_on_the_command_line(tmp_path, capsys):
    records = write_records(tmp_path / "r.jsonl", store_traffic(stores=3, desks=2))
    assert main(["learn", records, "--format", "json", "--merge", "topic_name[5]"]) == 0
    assert len(json.loads(capsys.readouterr().out)["definitions"]) == 1
    assert main(["learn", records, "--format", "json", "--split-on", "topic_name[4]"]) == 0
    assert len(json.loads(capsys.readouterr().out)["definitions"]) == 6
    assert main(["learn", records, "--merge", "topic[5]"]) == 0
    assert "no message has the place(s) topic[5]" in capsys.readouterr().out


def test_empty_input_is_a_clear_message(tmp_path, capsys):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    assert main(["learn", str(empty), "-o", str(tmp_path / "d.json")]) == 1
    assert "nothing learned: no native records in the input" in capsys.readouterr().err
    assert not (tmp_path / "d.json").exists()


def test_lines_that_are_not_records_are_skipped_and_quoted(tmp_path, capsys):
    good = [r.to_line() for r in store_traffic(stores=2, desks=1)]
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join(["not json", *good, '{"protocol": "SMTP"}', "[1, 2]"]) + "\n")
    assert main(["learn", str(path)]) == 0
    out = capsys.readouterr().out
    assert "skipped 3 line(s) that are not native records" in out
    assert "line 1: $: not JSON" in out and "line 8: $.protocol: unknown protocol" in out


def test_only_garbage_is_exit_1_with_a_message(tmp_path, capsys):
    path = tmp_path / "r.jsonl"
    path.write_text("garbage\n{\n")
    assert main(["learn", str(path)]) == 1
    captured = capsys.readouterr()
    assert "skipped 2 line(s)" in captured.out
    assert "nothing learned: no native records in the input" in captured.err


def test_binary_input_is_a_clear_message(tmp_path, capsys):
    path = tmp_path / "r.jsonl"
    path.write_bytes(b"\xff\xfe\x00garbage\n")
    assert main(["learn", str(path)]) == 1
    assert "not UTF-8 text" in capsys.readouterr().err


def test_only_one_off_messages_learn_nothing_and_say_why(tmp_path, capsys):
    lines = [json.dumps({"protocol": "MQTT/5.0", "topic_name": "/".join(["x"] * n)})
             for n in range(1, 6)]
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join(lines) + "\n")
    assert main(["learn", str(path)]) == 1
    captured = capsys.readouterr()
    assert "left out 5 definition(s) of 5 message(s)" in captured.out
    assert "no definition has --min-group-size 2 messages" in captured.err
    assert main(["learn", str(path), "--min-group-size", "1"]) == 0
