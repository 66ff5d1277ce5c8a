"""Shared test material: paths of the third-party vectors, loaders, golden samples.

The vectors are third-party files copied into `tests/data/cloudevents-vectors` with their
provenance and licences (see its README).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from gateway.cloudevents.event import CloudEvent
from gateway.cloudevents.typesystem import AttributeType, AttributeValue

PROJECT_ROOT = Path(__file__).resolve().parents[3]
VECTORS = PROJECT_ROOT / "tests" / "data" / "cloudevents-vectors"
CONFORMANCE_JSON = VECTORS / "conformance" / "format" / "json"
CONFORMANCE_YAML = VECTORS / "conformance" / "yaml"
SDK_JAVA = VECTORS / "sdk-java" / "formats" / "json-jackson" / "src" / "test" / "resources" / "v1"
SCHEMA = VECTORS / "spec" / "cloudevents" / "formats" / "cloudevents.json"


def load_tests(name: str) -> list[dict[str, Any]]:
    """The `tests` array of a conformance JSON file (e.g. "valid-events")."""
    document = json.loads((CONFORMANCE_JSON / f"{name}.json").read_text(encoding="utf-8"))
    tests: list[dict[str, Any]] = document["tests"]
    return tests


def sdk_java(name: str) -> bytes:
    return (SDK_JAVA / name).read_bytes()


# Types of the conformance sample extensions (upstream format/README, digest section 8.2).
SAMPLE_EXTENSION_TYPES: dict[str, AttributeType] = {
    "extinteger": "Integer",
    "extboolean": "Boolean",
    "extstring": "String",
    "extbinary": "Binary",
    "exttimestamp": "Timestamp",
    "exturi": "URI",
    "exturiref": "URI-reference",
}


def _sample(sample_id: str, data: str | None = None, **extra: AttributeValue) -> CloudEvent:
    attributes: dict[str, AttributeValue] = {
        "specversion": "1.0",
        "id": sample_id,
        "type": "io.cloudevents.test",
        "source": "https://cloudevents.io",
    }
    attributes.update(extra)
    return CloudEvent.create(attributes, data)


_T = datetime(2018, 4, 5, 17, 31, tzinfo=UTC)

# Golden samples, restated from the digest's section 8.2 table.
GOLDEN: dict[str, CloudEvent] = {
    "minimal": _sample("minimal"),
    "minimalWithTime": _sample("minimalWithTime", time=_T),
    "minimalWithRelativeSource": _sample("minimalWithRelativeSource", source="#fragment"),
    "allCore": _sample(
        "allCore",
        datacontenttype="text/plain",
        dataschema="https://cloudevents.io/dataschema",
        subject="tests",
        time=_T,
    ),
    "simpleTextData": _sample("simpleTextData", datacontenttype="text/plain", data="Simple text"),
    "allExtensionTypes": _sample(
        "allExtensionTypes",
        extinteger=10,
        extboolean=True,
        extstring="text",
        extbinary=b"\x4d\x61",
        exttimestamp=datetime(2023, 3, 31, 15, 12, tzinfo=UTC),
        exturi="https://cloudevents.io",
        exturiref="//authority/path",
    ),
}

GOLDEN_BATCHES: dict[str, list[CloudEvent]] = {
    "empty": [],
    "minimal": [GOLDEN["minimal"]],
    "minimal2": [GOLDEN["minimal"], GOLDEN["minimal"]],
    "minimalAndAllCore": [GOLDEN["minimal"], GOLDEN["allCore"]],
    "minimalAndAllExtensionTypes": [GOLDEN["minimal"], GOLDEN["allExtensionTypes"]],
}


def valid_events() -> list[CloudEvent]:
    """Every valid event the vectors describe, parsed with the sample types where needed."""
    from gateway.cloudevents.jsonformat import parse_event

    events = []
    for test in load_tests("valid-events"):
        types = SAMPLE_EXTENSION_TYPES if test.get("sampleExtensionAttributes") else None
        events.append(parse_event(json.dumps(test["event"]), types))
    for name in sorted(p.name for p in SDK_JAVA.glob("*.json")):
        if not name.startswith("fail_") and "invalid" not in name and "upper_case" not in name:
            events.append(parse_event(sdk_java(name)))
    return events


def yaml_documents(relative: str) -> list[dict[str, Any]]:
    text = (CONFORMANCE_YAML / relative).read_text(encoding="utf-8")
    return [doc for doc in yaml.safe_load_all(text) if doc]


def yaml_wire_attributes(document: dict[str, Any]) -> dict[str, str]:
    """The canonical strings of a YAML document's attributes, as the upstream tool sends them.

    PyYAML turns `specversion: 1.0` into a float and `time:` into a datetime; the Go tool
    reads every field as a string, so both are turned back into their text.
    """
    context = dict(document["ContextAttributes"])
    extensions = context.pop("Extensions", None) or {}
    out: dict[str, str] = {}
    for name, value in {**context, **extensions}.items():
        if isinstance(value, datetime):
            text = value.isoformat().replace("+00:00", "Z")
        elif isinstance(value, float):
            text = repr(value)
        else:
            text = str(value)
        out[name] = text
    return out
