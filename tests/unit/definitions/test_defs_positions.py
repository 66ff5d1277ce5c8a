"""Positions of JSON paths in definitions documents, and problems placed with them."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.definitions import load_catalog
from gateway.definitions.positions import (
    json_positions,
    with_document_positions,
    yaml_positions,
)
from gateway.spec.problems import Problem, json_path, position_of

TEXT = """{
  "messagegroups": {
    "a.b": {"messages": {"m": {"protocol": "MQTT/5.0"}}},
    "\\u00e9t\\u00e9": [1, {"x": null}, "s\\"q"]
  }
}"""


def test_members_are_placed_at_their_key_and_items_at_the_item() -> None:
    positions = json_positions(TEXT)
    assert positions is not None
    assert positions["$.messagegroups"] == (2, 3)
    assert positions['$.messagegroups["a.b"]'] == (3, 5)
    assert positions['$.messagegroups["a.b"].messages.m.protocol'] == (3, 32)
    fourth = TEXT.splitlines()[3]
    assert positions["$.messagegroups.été"] == (4, 5)  # the key as decoded
    assert positions["$.messagegroups.été[0]"] == (4, fourth.index("1") + 1)
    assert positions['$.messagegroups.été[1]'] == (4, fourth.index("{") + 1)
    assert positions['$.messagegroups.été[1].x'] == (4, fourth.index('"x"') + 1)
    assert positions["$.messagegroups.été[2]"] == (4, fourth.index('"s') + 1)
    assert "$" not in positions  # the root is no position: problems of the whole file


def test_text_that_is_not_json_has_no_positions() -> None:
    for text in ('{"a": 1,}', '{"a" 1}', "[1 2]", '{"a": 1} x', "", "nope"):
        assert json_positions(text) is None, text


def test_yaml_positions() -> None:
    positions = yaml_positions("messagegroups:\n  g:\n    messages: {m: {protocol: AMQP}}\n"
                               "list:\n  - 1\n  - {k: v}\n")
    assert positions is not None
    assert positions["$.messagegroups.g"] == (2, 3)
    assert positions["$.messagegroups.g.messages.m.protocol"] == (3, 20)
    assert positions["$.list[1].k"] == (6, 6)
    assert yaml_positions("a: [1\nb: 2\n") is None


def test_a_path_not_in_the_text_takes_its_nearest_parent() -> None:
    positions = {"$.a": (1, 2), '$.a["b.c"]': (2, 4)}
    assert position_of('$.a["b.c"].missing[3]', positions) == (2, 4)
    assert position_of("$.a.other", positions) == (1, 2)
    assert position_of("$.z", positions) is None
    assert position_of("$", positions) is None


def test_problems_of_local_documents_get_positions(tmp_path: Path) -> None:
    doc = tmp_path / "d.xreg.json"
    doc.write_text(TEXT)
    problems = [
        Problem("error", str(doc), '$.messagegroups["a.b"].messages.m.protocoloptions', "x"),
        Problem("error", str(doc), "$", "whole file"),
        Problem("error", str(doc), "$.messagegroups", "placed already", line=9, column=9),
        Problem("error", "https://registry.example/export", "$.messagegroups", "remote"),
        Problem("error", str(tmp_path / "absent.json"), "$.a", "unreadable"),
    ]
    located = with_document_positions(problems)
    assert [(p.line, p.column) for p in located] == [
        (3, 26),  # the message `m`: protocoloptions is not written
        (None, None), (9, 9), (None, None), (None, None)]


def test_a_definitions_problem_is_placed_where_it_was_written(tmp_path: Path) -> None:
    doc = tmp_path / "d.cereg.yaml"
    doc.write_text("messagegroups:\n  g:\n    messages:\n      m:\n        protocol: MQTT/5.0\n"
                   "        protocoloptions: {topic_name: /a, qos: 7}\n")
    catalog = load_catalog([doc])
    [error] = with_document_positions(catalog.errors)
    assert error.path == "$.messagegroups.g.messages.m.protocoloptions.qos"
    assert (error.line, error.column) == (6, 43)  # `qos`


_keys = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=6)
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _keys,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_keys, inner, max_size=4),
    max_leaves=20)


def _paths(value: object, parts: tuple[str | int, ...] = ()) -> dict[str, object]:
    out: dict[str, object] = {}
    if isinstance(value, dict):
        for key, item in value.items():
            out[json_path(*parts, key)] = key
            out.update(_paths(item, (*parts, key)))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            out[json_path(*parts, i)] = item
            out.update(_paths(item, (*parts, i)))
    return out


@settings(max_examples=200, deadline=None)
@given(_json, st.sampled_from([None, 0, 2]), st.booleans())
def test_every_position_points_at_its_key_or_item(value: object, indent: int | None,
                                                  ascii_only: bool) -> None:
    text = json.dumps(value, indent=indent, ensure_ascii=ascii_only)
    positions = json_positions(text)
    assert positions is not None
    expected = _paths(value)
    # Paths json_path cannot tell apart (a key `0` in an object vs an index) collapse; the
    # scanner must still know every path the value has.
    assert set(positions) == set(expected)
    lines = text.split("\n")
    for path, (line, column) in positions.items():
        rest = lines[line - 1][column - 1:]
        target = expected[path]
        if isinstance(target, (dict, list)):
            assert rest[:1] in "{[", (path, rest)
        else:
            # A key or a scalar item: the text there decodes to it.
            decoded, _ = json.JSONDecoder().raw_decode(rest)
            assert decoded == target, path
