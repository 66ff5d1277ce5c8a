"""`gateway.redaction.cut.cut_body`: the one place a body shown to people (conformance
samples, tap lines) is cut to a size."""

from __future__ import annotations

from gateway.json.values import JSONObject
from gateway.redaction.cut import ELLIPSIS, cut_body


def test_a_body_that_fits_is_left_alone() -> None:
    doc: JSONObject = {"data": {"v": "x" * 10}, "data_base64": "QUJD"}
    assert cut_body(doc, 64) == {"data": {"v": "x" * 10}, "data_base64": "QUJD"}


def test_a_structured_body_is_cut_as_compact_json_text() -> None:
    doc = cut_body({"data": {"v": "x" * 100}}, 20)
    assert doc == {"data": '{"v":"' + "x" * 14 + ELLIPSIS, "truncated": True}


def test_the_limit_is_in_bytes_and_never_splits_a_character() -> None:
    doc = cut_body({"data": "é" * 100}, 21)  # 2 bytes each: 10 fit, the 11th would not
    assert doc["data"] == "é" * 10 + ELLIPSIS and doc["truncated"] is True
    # Under the limit in characters, over it in bytes: still cut.
    assert cut_body({"data": "€" * 10}, 20)["data"] == "€" * 6 + ELLIPSIS


def test_a_text_body_at_the_limit_exactly_is_not_cut() -> None:
    assert cut_body({"data": "a" * 20}, 20) == {"data": "a" * 20}


def test_a_text_body_with_a_lone_surrogate_does_not_raise() -> None:
    doc = cut_body({"data": "\ud800" * 50}, 20)
    assert doc["truncated"] is True and isinstance(doc["data"], str)


def test_base64_is_cut_without_an_ellipsis_and_scalars_are_kept() -> None:
    doc = cut_body({"data": 12345, "data_base64": "A" * 30}, 8)
    assert doc == {"data": 12345, "data_base64": "A" * 8, "truncated": True}
