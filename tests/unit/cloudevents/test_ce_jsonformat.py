"""The JSON event format against the conformance vectors, sdk-java vectors and the schema."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from ce_testdata import (
    GOLDEN,
    GOLDEN_BATCHES,
    SAMPLE_EXTENSION_TYPES,
    SCHEMA,
    load_tests,
    sdk_java,
)
from cloudevents.core.formats.json import JSONFormat

from gateway.cloudevents.errors import CloudEventError
from gateway.cloudevents.event import CloudEvent
from gateway.cloudevents.jsonformat import (
    event_to_json,
    parse_batch,
    parse_event,
    serialize_batch,
    serialize_event,
)
from gateway.cloudevents.validation import validate_json_event

VALID = load_tests("valid-events")
INVALID = load_tests("invalid-events")
VALID_BATCHES = load_tests("valid-batches")
INVALID_BATCHES = load_tests("invalid-batches")


def _ids(tests: list[dict[str, Any]]) -> list[str]:
    return [test["id"] for test in tests]


# -- conformance: single events -------------------------------------------------------------
@pytest.mark.parametrize("test", VALID, ids=_ids(VALID))
def test_valid_event_equals_golden_sample(test: dict[str, Any]) -> None:
    types = SAMPLE_EXTENSION_TYPES if test.get("sampleExtensionAttributes") else None
    event = parse_event(json.dumps(test["event"]), types)
    assert event == GOLDEN[test["sampleId"]]


@pytest.mark.parametrize("test", VALID, ids=_ids(VALID))
def test_valid_event_without_types_matches_golden_as_strings(test: dict[str, Any]) -> None:
    # Without typed-extension knowledge the values must still match in canonical form.
    event = parse_event(json.dumps(test["event"]).encode())
    golden = GOLDEN[test["sampleId"]]
    assert event.canonical_strings().keys() == golden.canonical_strings().keys()
    for name, text in golden.canonical_strings().items():
        if name == "time" or name == "exttimestamp":
            continue  # instants are compared in the typed test; offsets may differ in text
        assert event.canonical_strings()[name] == text


@pytest.mark.parametrize("test", VALID, ids=_ids(VALID))
def test_valid_event_round_trips_through_serialization(test: dict[str, Any]) -> None:
    types = SAMPLE_EXTENSION_TYPES if test.get("sampleExtensionAttributes") else None
    event = parse_event(json.dumps(test["event"]), types)
    assert parse_event(serialize_event(event), types) == event


@pytest.mark.parametrize("test", INVALID, ids=_ids(INVALID))
def test_invalid_event_is_rejected(test: dict[str, Any]) -> None:
    with pytest.raises(CloudEventError) as caught:
        parse_event(json.dumps(test["event"]))
    assert caught.value.reason == "invalid-cloudevent"
    assert caught.value.problems


def test_invalid_events_name_the_attribute_at_fault() -> None:
    expected = {
        "invalidNoSpecVersion": "specversion:",
        "invalidNoId": "id:",
        "invalidTimeToMinute": "time:",
        "invalidNonRfc2046DataContentType": "datacontenttype:",
        "invalidEmptyDataSchema": "dataschema:",
        "invalidEmptySubject": "subject:",
        "invalidNumericId": "id:",
        "invalidCapitalizedExtension": "MyExtension:",
        "invalidBothDataAndDataBase64": "data_base64:",
    }
    by_id = {test["id"]: test for test in INVALID}
    for test_id, prefix in expected.items():
        problems = validate_json_event(by_id[test_id]["event"])
        assert any(p.startswith(prefix) for p in problems), (test_id, problems)


def test_time_message_explains_the_rfc3339_requirement() -> None:
    problems = validate_json_event(
        {"specversion": "1.0", "id": "x", "type": "t", "source": "/s", "time": "2018-04-05T18:31Z"}
    )
    assert problems == [
        "time: '2018-04-05T18:31Z' is not an RFC 3339 timestamp (seconds and offset are required)"
    ]


def test_all_problems_are_reported_together() -> None:
    problems = validate_json_event({"specversion": "0.9", "id": 25, "source": "", "Bad": 1.5})
    joined = "\n".join(problems)
    for prefix in ("specversion:", "id:", "source:", "type:", "Bad:"):
        assert prefix in joined


@pytest.mark.parametrize(
    ("name", "value"),
    [("myext", 1.5), ("myext", 4247483647), ("myext", {"a": 1}), ("myext", [1])],
)
def test_non_integer_or_structured_extension_values_are_rejected(name: str, value: object) -> None:
    # The upstream case uses an invalid name too, so it cannot prove the value check alone.
    event = {"specversion": "1.0", "id": "x", "type": "t", "source": "/s", name: value}
    with pytest.raises(CloudEventError) as caught:
        parse_event(json.dumps(event))
    assert all(p.startswith("myext:") for p in caught.value.problems)


# -- conformance: batches -----------------------------------------------------------------------
@pytest.mark.parametrize("test", VALID_BATCHES, ids=_ids(VALID_BATCHES))
def test_valid_batch_equals_golden_batch(test: dict[str, Any]) -> None:
    types = SAMPLE_EXTENSION_TYPES if test.get("sampleExtensionAttributes") else None
    events = parse_batch(json.dumps(test["batch"]), types)
    assert events == GOLDEN_BATCHES[test["sampleId"]]
    assert parse_batch(serialize_batch(events), types) == events


@pytest.mark.parametrize("test", INVALID_BATCHES, ids=_ids(INVALID_BATCHES))
def test_invalid_batch_is_rejected(test: dict[str, Any]) -> None:
    with pytest.raises(CloudEventError) as caught:
        parse_batch(json.dumps(test["batch"]))
    assert caught.value.reason == "batch-invalid"


def test_a_batch_member_with_a_structured_specversion_is_a_problem_not_a_crash() -> None:
    with pytest.raises(CloudEventError) as caught:
        parse_batch(b'[{"specversion":"1.0","id":"1","source":"/s","type":"t"},'
                    b' {"specversion":[],"id":"1","source":"/s","type":"t"}]')
    assert caught.value.reason == "batch-invalid"
    assert "batch: members must share one specversion, found '1.0', []" in caught.value.problems


def test_batch_problems_name_the_member() -> None:
    with pytest.raises(CloudEventError) as caught:
        parse_batch(b'[{"specversion":"1.0","id":"a","type":"t","source":"/s"}, "x", {}]')
    text = "\n".join(caught.value.problems)
    assert "[1] event: must be a JSON object" in text
    assert "[2] id: required attribute is missing" in text
    assert "[0]" not in text


@pytest.mark.parametrize("body", [b"{}", b'"x"', b"null"])
def test_batch_must_be_an_array(body: bytes) -> None:
    with pytest.raises(CloudEventError) as caught:
        parse_batch(body)
    assert caught.value.reason == "batch-invalid"


# -- sdk-java vectors (expectations from their PROVENANCE.md) ---------------------------------
SDK_JAVA_PAIRS = [
    ("base64_json_data.json", "json_data.json"),
    ("base64_json_data_with_ext.json", "json_data_with_ext.json"),
    ("base64_text_data.json", "text_data.json"),
    ("base64_xml_data.json", "xml_data.json"),
    ("min_subject_null.json", "min.json"),
]


@pytest.mark.parametrize(("left", "right"), SDK_JAVA_PAIRS)
def test_sdk_java_equivalent_files_decode_to_the_same_event(left: str, right: str) -> None:
    assert parse_event(sdk_java(left)) == parse_event(sdk_java(right))


def test_sdk_java_base64_decodes_to_bytes_and_data_stays_json() -> None:
    assert parse_event(sdk_java("base64_json_data.json")).data == b"{}"
    assert parse_event(sdk_java("json_data.json")).data == {}
    assert parse_event(sdk_java("text_data.json")).data == "Hello World Lorena!"
    assert parse_event(sdk_java("base64_xml_data.json")).data == b"<stuff></stuff>"


def test_sdk_java_min_round_trips_as_json() -> None:
    raw = sdk_java("min.json")
    assert json.loads(serialize_event(parse_event(raw))) == json.loads(raw)


def test_sdk_java_fractional_time_keeps_sub_millisecond_digits() -> None:
    event = parse_event(sdk_java("json_data_with_fractional_time.json"))
    time = event.attributes["time"]
    assert getattr(time, "microsecond", None) == 123400
    assert event_to_json(event)["time"] == "2018-04-26T14:48:09.1234Z"


def test_sdk_java_binary_attribute_is_a_string_unless_typed() -> None:
    assert parse_event(sdk_java("binary_attr.json")).attributes["binary"] == "4P8ARKo="
    typed = parse_event(sdk_java("binary_attr.json"), {"binary": "Binary"})
    assert typed.attributes["binary"] == bytes([0xE0, 0xFF, 0x00, 0x44, 0xAA])


def test_sdk_java_numeric_extensions() -> None:
    attributes = parse_event(sdk_java("numeric_ext.json")).attributes
    assert attributes["integer"] == 42 and type(attributes["integer"]) is int
    assert attributes["decimal"] == "42.42"
    assert attributes["float"] == "4.2"
    assert attributes["long"] == "4200"


@pytest.mark.parametrize(
    "name",
    [
        "fail_numeric_decimal.json",
        "fail_numeric_long.json",
        "json_data_with_ext_upper_case.json",
        "json_data_with_ext_invalid.json",
    ],
)
def test_sdk_java_invalid_files_are_rejected(name: str) -> None:
    with pytest.raises(CloudEventError):
        parse_event(sdk_java(name))


def test_sdk_java_extensions_keep_their_json_types() -> None:
    attributes = parse_event(sdk_java("json_data_with_ext.json")).attributes
    assert (attributes["astring"], attributes["aboolean"], attributes["anumber"]) == (
        "aaa",
        True,
        10,
    )
    assert type(attributes["aboolean"]) is bool


# -- official JSON schema -----------------------------------------------------------------------
SCHEMA_DOC = json.loads(SCHEMA.read_text(encoding="utf-8"))
SCHEMA_VALIDATOR = jsonschema.Draft7Validator(
    SCHEMA_DOC, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER
)


@pytest.mark.parametrize("test", VALID + INVALID, ids=_ids(VALID + INVALID))
def test_schema_never_accepts_more_than_we_do_reject(test: dict[str, Any]) -> None:
    # The schema is a necessary check: whatever it rejects, we must reject too; whatever
    # we accept, it must accept.
    schema_ok = SCHEMA_VALIDATOR.is_valid(test["event"])
    ours_ok = not validate_json_event(test["event"])
    if ours_ok:
        assert schema_ok
    if not schema_ok:
        assert not ours_ok


def test_schema_misses_what_the_digest_says_it_misses() -> None:
    missed = {
        test["id"]
        for test in INVALID
        if SCHEMA_VALIDATOR.is_valid(test["event"]) and validate_json_event(test["event"])
    }
    assert missed == {
        "invalidUnknownSpecVersion",
        "invalidNonRfc2046DataContentType",
        "invalidCapitalizedExtension",
        "invalidPunctuatedExtension",
        "invalidNonIntegerExtensionValue",
        "invalidBothDataAndDataBase64",
    }


def test_our_output_is_schema_valid() -> None:
    for test in VALID:
        types = SAMPLE_EXTENSION_TYPES if test.get("sampleExtensionAttributes") else None
        document = json.loads(serialize_event(parse_event(json.dumps(test["event"]), types)))
        SCHEMA_VALIDATOR.validate(document)


# -- data rules (JSON format section 3.1) -------------------------------------------------------
BASE = {"specversion": "1.0", "id": "1", "type": "t", "source": "/s"}


def test_explicit_null_data_differs_from_no_data() -> None:
    null = parse_event(json.dumps({**BASE, "data": None}))
    absent = parse_event(json.dumps(BASE))
    assert null.has_data and null.data is None
    assert not absent.has_data
    assert null != absent
    assert json.loads(serialize_event(null)) == {**BASE, "data": None}
    assert "data" not in json.loads(serialize_event(absent))


def test_json_string_data_stays_a_string_and_is_not_parsed_again() -> None:
    event = parse_event(json.dumps({**BASE, "datacontenttype": "application/json", "data": "[1]"}))
    assert event.data == "[1]"
    assert json.loads(serialize_event(event))["data"] == "[1]"


def test_data_without_content_type_is_json() -> None:
    event = parse_event(json.dumps({**BASE, "data": {"a": [1, 2.5, True, None]}}))
    assert event.data == {"a": [1, 2.5, True, None]}


def test_data_base64_without_content_type_gets_none_invented() -> None:
    event = parse_event(json.dumps({**BASE, "data_base64": "AAEC"}))
    assert event.data == b"\x00\x01\x02"
    assert "datacontenttype" not in json.loads(serialize_event(event))


@pytest.mark.parametrize("encoded", ["not base64!", "AAE", 5])
def test_bad_data_base64_is_rejected(encoded: object) -> None:
    with pytest.raises(CloudEventError) as caught:
        parse_event(json.dumps({**BASE, "data_base64": encoded}))
    assert caught.value.problems[0].startswith("data_base64:")


def test_non_json_content_type_needs_string_data() -> None:
    with pytest.raises(CloudEventError) as caught:
        parse_event(json.dumps({**BASE, "datacontenttype": "text/plain", "data": {"a": 1}}))
    assert caught.value.problems[0].startswith("data:")


@pytest.mark.parametrize("content_type", ["application/vnd.x+json", "foo/json", "TEXT/JSON"])
def test_json_family_is_any_json_subtype_case_insensitively(content_type: str) -> None:
    event = parse_event(json.dumps({**BASE, "datacontenttype": content_type, "data": {"a": 1}}))
    assert json.loads(serialize_event(event))["data"] == {"a": 1}


def test_bytes_data_is_written_as_data_base64() -> None:
    event = CloudEvent.create({**BASE, "datacontenttype": "application/octet-stream"}, b"\xff")
    assert event_to_json(event)["data_base64"] == "/w=="


@pytest.mark.parametrize(
    "body",
    [b"", b"not json", b"\xff\xfe", b"[1,", b'{"a": NaN}', b"[" * 100000, "{\ud800}"],
)
def test_unparseable_input_is_not_json(body: bytes | str) -> None:
    with pytest.raises(CloudEventError) as caught:
        parse_event(body)
    assert caught.value.reason == "not-json"


@pytest.mark.parametrize("body", [b"[]", b'"x"', b"1", b"null"])
def test_non_object_event_is_invalid(body: bytes) -> None:
    with pytest.raises(CloudEventError) as caught:
        parse_event(body)
    assert caught.value.reason == "invalid-cloudevent"


def test_lone_surrogate_in_attribute_is_rejected() -> None:
    with pytest.raises(CloudEventError) as caught:
        parse_event('{"specversion":"1.0","id":"\\ud800","type":"t","source":"/s"}')
    assert caught.value.problems == ["id: contains an unpaired surrogate"]


def test_lone_surrogate_in_data_still_serializes() -> None:
    event = parse_event('{"specversion":"1.0","id":"1","type":"t","source":"/s","data":"\\ud800"}')
    assert parse_event(serialize_event(event)) == event


# -- the SDK's JSONFormat as a reference where it is correct ---------------------------------------
def test_sdk_json_format_reads_what_we_write() -> None:
    event = CloudEvent.create(
        {**BASE, "subject": "s", "datacontenttype": "application/json"}, {"k": [1, "v"]}
    )
    theirs = JSONFormat().read(CloudEvent.create, serialize_event(event))
    assert theirs == event


def test_sdk_json_format_is_lenient_where_we_are_strict() -> None:
    # The reason we do not parse with it: it accepts a time without seconds.
    lenient = json.dumps({**BASE, "time": "2018-04-05T18:31Z"})
    JSONFormat().read(lambda attributes, data: CloudEvent.trusted(attributes, data), lenient)
    with pytest.raises(CloudEventError):
        parse_event(lenient)
