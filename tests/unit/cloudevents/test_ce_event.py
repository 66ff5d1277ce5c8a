"""The CloudEvent type: construction paths, SDK compatibility, equality, canonical forms."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from cloudevents.core.v1.event import CloudEvent as SdkCloudEvent

from gateway.cloudevents.errors import CloudEventError
from gateway.cloudevents.event import CloudEvent

MINIMAL = {"specversion": "1.0", "id": "1", "type": "t", "source": "/s"}


def test_is_the_sdk_event_type() -> None:
    event = CloudEvent.create(MINIMAL)
    assert isinstance(event, SdkCloudEvent)
    assert (event.get_id(), event.get_source(), event.get_type()) == ("1", "/s", "t")
    assert event.get_specversion() == "1.0"


def test_no_id_or_time_is_invented() -> None:
    event = CloudEvent.create(MINIMAL)
    assert "time" not in event.attributes
    assert event.get_time() is None
    with pytest.raises(CloudEventError) as caught:
        CloudEvent.create({"specversion": "1.0", "type": "t", "source": "/s"})
    assert caught.value.problems == ["id: required attribute is missing"]


def test_constructor_validates_like_create() -> None:
    with pytest.raises(CloudEventError):
        CloudEvent({**MINIMAL, "time": "2018-04-05T17:31:00Z"})


def test_create_copies_attributes() -> None:
    attributes = dict(MINIMAL)
    event = CloudEvent.create(attributes)
    attributes["id"] = "changed"
    assert event.attributes["id"] == "1"


def test_attributes_are_read_only() -> None:
    event = CloudEvent.create(MINIMAL)
    with pytest.raises(TypeError):
        event.attributes["id"] = "x"  # type: ignore[index]


def test_trusted_skips_validation_and_copies_nothing() -> None:
    attributes: dict[str, object] = {"id": ""}
    event = CloudEvent.trusted(attributes, None)  # type: ignore[arg-type]
    assert event.attributes["id"] == ""
    assert event.get_attributes() is attributes


def test_trusted_data_flags() -> None:
    assert not CloudEvent.trusted(dict(MINIMAL)).has_data
    assert CloudEvent.trusted(dict(MINIMAL), b"x").has_data
    null = CloudEvent.trusted(dict(MINIMAL), None, True)
    assert null.has_data and null.data is None


def test_explicit_null_data_needs_has_data() -> None:
    assert CloudEvent.create(MINIMAL, None, has_data=True) != CloudEvent.create(MINIMAL)


def test_time_compares_as_instant() -> None:
    utc = CloudEvent.create({**MINIMAL, "time": datetime(2018, 4, 5, 17, 31, tzinfo=UTC)})
    plus_one = CloudEvent.create(
        {**MINIMAL, "time": datetime(2018, 4, 5, 18, 31, tzinfo=timezone(timedelta(hours=1)))}
    )
    later = CloudEvent.create({**MINIMAL, "time": datetime(2018, 4, 5, 17, 32, tzinfo=UTC)})
    assert utc == plus_one
    assert utc != later


def test_boolean_and_integer_are_different_types() -> None:
    assert CloudEvent.create({**MINIMAL, "x": True}) != CloudEvent.create({**MINIMAL, "x": 1})
    assert CloudEvent.create(MINIMAL, {"a": True}) != CloudEvent.create(MINIMAL, {"a": 1})
    assert CloudEvent.create(MINIMAL, {"a": 1}) == CloudEvent.create(MINIMAL, {"a": 1.0})


def test_extension_type_matters() -> None:
    typed = CloudEvent.create({**MINIMAL, "x": 10})
    text = CloudEvent.create({**MINIMAL, "x": "10"})
    assert typed != text


def test_data_equality_is_by_content() -> None:
    text = {**MINIMAL, "datacontenttype": "text/plain"}
    assert CloudEvent.create(text, "hé") == CloudEvent.create(text, "hé".encode())
    assert CloudEvent.create(text, "a") != CloudEvent.create(text, b"b")
    as_json = {**MINIMAL, "datacontenttype": "application/json"}
    assert CloudEvent.create(as_json, {"a": 1}) == CloudEvent.create(as_json, b'{ "a" : 1 }')
    assert CloudEvent.create(as_json, "a") != CloudEvent.create(as_json, b"a")
    assert CloudEvent.create(as_json, {"a": 1}) != CloudEvent.create(as_json, b"{")


def test_canonical_forms() -> None:
    event = CloudEvent.create(
        {
            **MINIMAL,
            "time": datetime(2018, 4, 5, 17, 31, 0, 500000, tzinfo=UTC),
            "flag": False,
            "count": -3,
            "blob": b"Ma",
        }
    )
    assert event.canonical_attributes() == {
        **MINIMAL,
        "time": "2018-04-05T17:31:00.5Z",
        "flag": False,
        "count": -3,
        "blob": "TWE=",
    }
    strings = event.canonical_strings()
    assert (strings["flag"], strings["count"]) == ("false", "-3")


def test_to_dict_places_data_by_type() -> None:
    assert CloudEvent.create(MINIMAL, b"\x01").to_dict()["data_base64"] == "AQ=="
    assert CloudEvent.create(MINIMAL, [1]).to_dict()["data"] == [1]
    assert "data" not in CloudEvent.create(MINIMAL).to_dict()


def test_with_attributes_validates_and_removes() -> None:
    event = CloudEvent.create({**MINIMAL, "subject": "s"})
    assert "subject" not in event.with_attributes(subject=None).attributes
    with pytest.raises(CloudEventError):
        event.with_attributes(id="")


def test_attribute_types() -> None:
    event = CloudEvent.create({**MINIMAL, "b": True, "y": b"", "t": datetime.now(UTC)})
    types = event.attribute_types()
    assert (types["b"], types["y"], types["t"], types["id"]) == (
        "Boolean",
        "Binary",
        "Timestamp",
        "String",
    )


def test_events_are_not_hashable() -> None:
    with pytest.raises(TypeError):
        hash(CloudEvent.create(MINIMAL))


def test_sdk_constructor_would_invent_time() -> None:
    # Documents why we never call the SDK constructor.
    sdk = SdkCloudEvent(dict(MINIMAL))
    assert sdk.get_time() is not None
