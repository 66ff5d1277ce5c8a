"""Timestamps, URIs, media types, the type system and native-value validation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rfc3339_validator import validate_rfc3339

from gateway.cloudevents import mediatype
from gateway.cloudevents.timestamps import format_rfc3339, parse_rfc3339
from gateway.cloudevents.typesystem import coerce, to_canonical
from gateway.cloudevents.uri import is_uri, is_uri_reference
from gateway.cloudevents.validation import validate_attributes, validate_data, validate_event

# -- RFC 3339 ---------------------------------------------------------------------------------
ACCEPTED = {
    "2018-04-05T17:31:00Z": datetime(2018, 4, 5, 17, 31, tzinfo=UTC),
    "2018-04-05t17:31:00z": datetime(2018, 4, 5, 17, 31, tzinfo=UTC),
    "2018-04-05T18:31:00+01:00": datetime(2018, 4, 5, 17, 31, tzinfo=UTC),
    "2018-04-05T16:31:00-01:00": datetime(2018, 4, 5, 17, 31, tzinfo=UTC),
    "2018-04-05T17:31:00.000000000Z": datetime(2018, 4, 5, 17, 31, tzinfo=UTC),
    "2018-04-05T17:31:00.1234567Z": datetime(2018, 4, 5, 17, 31, 0, 123456, tzinfo=UTC),
    "2020-02-29T00:00:00-00:00": datetime(2020, 2, 29, tzinfo=UTC),
}
# The Python pitfall: fromisoformat accepts all of the first four.
REJECTED = [
    "2018-04-05T18:31Z",
    "2018-04-05T18:31:00+05",
    "2018-04-05T18:31:00+0100",
    "2018-04-05T18:31:00+01:0",
    "2018-04-05T18:31:00.5+01:00:00",
    "20180405T173100Z",
    "2018-04-05T17:31:00",
    "2018-04-05 17:31:00Z",
    "2018-04-05T18:31:00X",
    "2018-04-05T18:31:00+25:00",
    "2018-04-05T18:31:00+xx:00",
    "2018-04-05T24:00:00Z",
    "2018-13-05T17:31:00Z",
    "2019-02-29T17:31:00Z",
    "0000-01-01T00:00:00Z",
    "2018-04-05T17:31:00.Z",
    "2018-04-05T17:31:60Z",
    "\uff12018-04-05T17:31:00Z",  # a full-width digit
    "lunchtime",
    "",
]


@pytest.mark.parametrize(("text", "instant"), ACCEPTED.items())
def test_rfc3339_accepts(text: str, instant: datetime) -> None:
    assert parse_rfc3339(text) == instant


@pytest.mark.parametrize("text", REJECTED)
def test_rfc3339_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_rfc3339(text)


def test_leap_second_has_its_own_message() -> None:
    with pytest.raises(ValueError, match="leap seconds are not supported"):
        parse_rfc3339("2016-12-31T23:59:60Z")


def test_offset_is_kept() -> None:
    assert parse_rfc3339("2018-04-05T18:31:00+01:00").utcoffset() == timedelta(hours=1)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (datetime(2018, 4, 5, 17, 31, tzinfo=UTC), "2018-04-05T17:31:00Z"),
        (datetime(2018, 4, 5, 17, 31, 0, 120000, tzinfo=UTC), "2018-04-05T17:31:00.12Z"),
        (datetime(2018, 4, 5, 17, 31, 0, 1, tzinfo=UTC), "2018-04-05T17:31:00.000001Z"),
        (
            datetime(2018, 4, 5, 18, 31, tzinfo=timezone(timedelta(hours=1))),
            "2018-04-05T18:31:00+01:00",
        ),
        (
            datetime(2018, 4, 5, 12, 1, tzinfo=timezone(-timedelta(hours=5, minutes=30))),
            "2018-04-05T12:01:00-05:30",
        ),
        (
            datetime(2018, 4, 5, 12, 0, 30, tzinfo=timezone(timedelta(seconds=30))),
            "2018-04-05T12:00:00Z",
        ),
    ],
)
def test_format_rfc3339(value: datetime, text: str) -> None:
    assert format_rfc3339(value) == text


def test_format_rejects_naive() -> None:
    with pytest.raises(ValueError):
        format_rfc3339(datetime(2018, 4, 5))


OFFSETS = st.integers(min_value=-23 * 60 - 59, max_value=23 * 60 + 59).map(
    lambda minutes: timezone(timedelta(minutes=minutes))
)


@given(
    st.datetimes(timezones=OFFSETS, min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30))
)
def test_format_then_parse_is_identity(value: datetime) -> None:
    text = format_rfc3339(value)
    assert validate_rfc3339(text)  # an independent RFC 3339 checker agrees
    parsed = parse_rfc3339(text)
    assert parsed == value and parsed.utcoffset() == value.utcoffset()


@given(st.text(max_size=40))
def test_parse_agrees_with_independent_checker_on_rejections(text: str) -> None:
    try:
        parse_rfc3339(text)
    except ValueError:
        return
    assert validate_rfc3339(text)


# -- URIs --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text",
    ["https://cloudevents.io", "urn:uuid:6e8bc430", "mailto:a@b.c", "http://[::1]:8080/p?q=1#f"],
)
def test_absolute_uris(text: str) -> None:
    assert is_uri(text) and is_uri_reference(text)


@pytest.mark.parametrize(
    "text", ["#fragment", "//authority/path", "/a/b", "1-555-123-4567", "a/b?c", "/a%20b"]
)
def test_relative_references_are_not_absolute(text: str) -> None:
    assert is_uri_reference(text) and not is_uri(text)


@pytest.mark.parametrize(
    "text", ["/a b", "http://x/%zz", "a\nb", "http://a b", "<x>", "\u00e9", "http://x/?a b", "#a#b"]
)
def test_not_uri_references(text: str) -> None:
    assert not is_uri_reference(text) and not is_uri(text)


# -- media types -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text",
    ["text/plain", "application/json; charset=utf-8", 'text/plain;charset="us ascii"', "a/b+c"],
)
def test_media_types(text: str) -> None:
    assert mediatype.is_media_type(text)


@pytest.mark.parametrize("text", ["xyz", "", "text/", "/json", "text/plain;", "a/b; c", "a b/c"])
def test_not_media_types(text: str) -> None:
    assert not mediatype.is_media_type(text)


@pytest.mark.parametrize(
    ("content_type", "json", "text"),
    [
        (None, True, False),
        ("application/json", True, False),
        ("Application/JSON; charset=UTF-8", True, False),
        ("application/cloudevents+json", True, False),
        ("text/json", True, False),
        ("text/plain", False, True),
        ("application/xml; charset=utf-8", False, True),
        ("application/atom+xml", False, True),
        ("text/plain; charset=iso-8859-1", False, False),
        ("application/octet-stream", False, False),
        ("application/jsonx", False, False),
    ],
)
def test_content_type_classes(content_type: str | None, json: bool, text: bool) -> None:
    assert mediatype.is_json(content_type) is json
    assert mediatype.is_text(content_type) is text


# -- type system -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "kind", "value"),
    [
        ("true", "Boolean", True),
        ("false", "Boolean", False),
        ("-2147483648", "Integer", -(2**31)),
        ("TWE=", "Binary", b"Ma"),
        ("2023-03-31T15:12:00Z", "Timestamp", datetime(2023, 3, 31, 15, 12, tzinfo=UTC)),
        ("https://x", "URI", "https://x"),
        ("#f", "URI-reference", "#f"),
        ("anything", "String", "anything"),
    ],
)
def test_canonical_strings_round_trip(text: str, kind: str, value: object) -> None:
    parsed = coerce(text, kind)  # type: ignore[arg-type]
    assert parsed == value and type(parsed) is type(value)
    assert to_canonical(parsed) == text


def test_a_timestamp_of_a_datetime_subclass_is_written_as_a_datetime_is() -> None:
    # Datetimes take a shortcut by exact class; a subclass (a library's own) goes the
    # general way and must come out the same.
    class Moment(datetime):
        pass

    plain = datetime(2026, 11, 24, 21, 0, 5, 120000, tzinfo=UTC)
    moment = Moment(2026, 11, 24, 21, 0, 5, 120000, tzinfo=UTC)
    assert to_canonical(moment) == to_canonical(plain) == "2026-11-24T21:00:05.12Z"


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("True", "Boolean"),
        ("1", "Boolean"),
        ("2147483648", "Integer"),
        ("1.0", "Integer"),
        ("+1", "Integer"),
        ("٣", "Integer"),
        ("TWE", "Binary"),
        ("T W E=", "Binary"),
        ("2023-03-31", "Timestamp"),
        ("#f", "URI"),
        ("a b", "URI-reference"),
    ],
)
def test_bad_canonical_strings(text: str, kind: str) -> None:
    with pytest.raises(ValueError):
        coerce(text, kind)  # type: ignore[arg-type]


def test_amqp_timestamp_milliseconds_are_accepted() -> None:
    assert coerce(1522949460000, "Timestamp") == datetime(2018, 4, 5, 17, 31, tzinfo=UTC)
    with pytest.raises(ValueError):
        coerce(True, "Timestamp")


# -- native validation ----------------------------------------------------------------------
MINIMAL = {"specversion": "1.0", "id": "1", "type": "t", "source": "/s"}


def test_minimal_native_event_is_valid() -> None:
    assert validate_event(MINIMAL, None, False) == []


@pytest.mark.parametrize(
    ("changes", "prefix"),
    [
        ({"time": "2018-04-05T17:31:00Z"}, "time:"),
        ({"time": datetime(2018, 4, 5)}, "time:"),
        ({"ext": 2**31}, "ext:"),
        ({"ext": 1.5}, "ext:"),
        ({"ext": datetime(2018, 4, 5)}, "ext:"),
        ({"Ext": "x"}, "Ext:"),
        ({"data": "x"}, "data:"),
        ({"id": ""}, "id:"),
        ({"source": "a b"}, "source:"),
        ({"dataschema": "/relative"}, "dataschema:"),
        ({"datacontenttype": "xyz"}, "datacontenttype:"),
        ({"specversion": "0.3"}, "specversion:"),
        ({"subject": 5}, "subject:"),
    ],
)
def test_native_attribute_problems(changes: dict[str, object], prefix: str) -> None:
    problems = validate_attributes({**MINIMAL, **changes})
    assert problems and all(p.startswith(prefix) for p in problems), problems


def test_typed_extensions_are_valid_natives() -> None:
    attributes = {**MINIMAL, "b": True, "i": -5, "y": b"\x00", "t": datetime.now(UTC), "s": "x"}
    assert validate_attributes(attributes) == []


@pytest.mark.parametrize(
    ("data", "content_type", "ok"),
    [
        ({"a": [1, None]}, None, True),
        ({"a": float("nan")}, None, False),
        ({1: "a"}, "application/json", False),
        (object(), None, False),
        ("text", "text/plain", True),
        (b"\x00", "text/plain", True),
        ([1], "text/plain", False),
    ],
)
def test_data_validation(data: object, content_type: str | None, ok: bool) -> None:
    assert (validate_data(data, True, content_type) == []) is ok
