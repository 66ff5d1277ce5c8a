"""`compact_text` writes exactly `utf8_json(value, separators=(",", ":"))`'s text: orjson
where orjson writes the same text, `json.dumps` wherever it would not. The places where
the two differ are pinned here, and random JSON values are compared besides."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.json.text import compact_text, utf8_json


def _reference(value: object) -> str:
    return utf8_json(value, separators=(",", ":"))


@pytest.mark.parametrize("value", [
    {"specversion": "1.0", "id": "a", "data": {"v": 1, "unit": "C", "ok": True}},
    {"f": 1e-05}, {"f": 1.5e-07}, {"f": 8.047086160323824e-05}, {"f": 0.0001},
    {"f": -2.5e-08}, [1e-09, 2], 1e-07, {"f": 1.5e-10}, {"f": 5e-100},
    {"hex": "7e-4a07", "n": 3e-05}, {"f": 1e16}, {"f": -0.0}, {"f": 1e300}, {"f": 5e-324},
    {"nan": math.nan}, {"inf": math.inf}, {"-inf": -math.inf}, {"null": None},
    {"big": 2**64}, {"-big": -(2**63) - 1}, {"max": 2**63 - 1},
    {"lone": "\ud800"}, {"pair": "\U0001f600"}, {"ctl": "\x00\x01\x1f\x7f\b\f\n\r\t\"\\"},
    {"sep": "\u2028\u2029\u0085\ufeff"}, {1: "int key"}, [1, [2, [3, {}]], []], "text", 7,
])
def test_known_differences_give_the_reference_text(value: object) -> None:
    assert compact_text(value) == _reference(value)


def test_the_usual_event_takes_orjson() -> None:
    import orjson

    event = {"specversion": "1.0", "type": "t", "source": "/s", "id": "x",
             "data": {"v": 1, "unit": "C", "ok": True, "when": 1.25}}
    assert compact_text(event) == orjson.dumps(event).decode() == _reference(event)


def test_an_event_with_a_random_id_takes_orjson(monkeypatch: pytest.MonkeyPatch) -> None:
    """A random id's hex holds `e-` a quarter of the time (`...f7e-4307...`): that alone
    must not send the event to `json.dumps`."""
    import orjson

    from gateway.json import text

    def refuse(value: object) -> str:
        raise AssertionError(f"json.dumps used for {value!r}")

    event = {"specversion": "1.0", "id": "d28c57f7e-4307-8648-f140-f0bba543e",
             "data": {"v": 1e-12, "w": 12e-30}}
    expected = _reference(event)
    monkeypatch.setattr(text, "_compact_slow", refuse)
    assert compact_text(event) == orjson.dumps(event).decode() == expected


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=2000, deadline=None)
@given(_JSON)
def test_random_values_give_the_reference_text(value: object) -> None:
    assert compact_text(value) == _reference(value)
