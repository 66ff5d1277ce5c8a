"""The structured JSON event format (`application/cloudevents+json` and the batch form).

The SDK's `JSONFormat` is not used to read or write: it parses `time` leniently with
dateutil, turns `"data": null` into "no data", decodes `data_base64` without checking
it, lets `data` silently win over `data_base64`, and cannot write Binary extensions or
JSON data under `*/json` types its regex misses (it writes Python `str()` instead). Our
reader validates the raw JSON object strictly before any event exists. `CloudEvent.create`
has the SDK `EventFactory` signature, so SDK readers can still build our events.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from gateway.cloudevents import datacodec
from gateway.cloudevents.errors import (
    BATCH_INVALID,
    INVALID_CLOUDEVENT,
    NOT_JSON,
    CloudEventError,
)
from gateway.cloudevents.event import CloudEvent
from gateway.cloudevents.mediatype import BATCH_JSON_CONTENT_TYPE, STRUCTURED_JSON_CONTENT_TYPE
from gateway.cloudevents.typesystem import ExtensionTypes, json_kind
from gateway.cloudevents.validation import read_json_event
from gateway.json.values import JSON

CONTENT_TYPE = STRUCTURED_JSON_CONTENT_TYPE
BATCH_CONTENT_TYPE = BATCH_JSON_CONTENT_TYPE

__all__ = [
    "BATCH_CONTENT_TYPE",
    "CONTENT_TYPE",
    "event_from_json",
    "event_to_json",
    "load_json",
    "parse_batch",
    "parse_event",
    "serialize_batch",
    "serialize_event",
]


def load_json(text: str | bytes) -> JSON:
    """Parse JSON text (UTF-8 when bytes); raise CloudEventError("not-json") otherwise."""
    try:
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        value: JSON = datacodec.loads(text)
    except UnicodeDecodeError as exc:
        raise CloudEventError(NOT_JSON, [f"body is not UTF-8: {exc.reason}"]) from None
    except json.JSONDecodeError as exc:
        raise CloudEventError(
            NOT_JSON, [f"body is not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"]
        ) from None
    except (ValueError, RecursionError) as exc:
        raise CloudEventError(NOT_JSON, [f"body is not JSON: {exc}"]) from None
    return value


def event_from_json(obj: object, extension_types: ExtensionTypes | None = None) -> CloudEvent:
    """Build an event from a parsed JSON-format object, validating it first."""
    if not isinstance(obj, dict):
        raise CloudEventError(
            INVALID_CLOUDEVENT, [f"event: must be a JSON object, got {json_kind(obj)}"]
        )
    attributes, data, has_data, problems = read_json_event(obj, extension_types)
    if problems:
        raise CloudEventError(INVALID_CLOUDEVENT, problems)
    return CloudEvent.trusted(attributes, data, has_data)


def parse_event(text: str | bytes, extension_types: ExtensionTypes | None = None) -> CloudEvent:
    """Parse one `application/cloudevents+json` event."""
    return event_from_json(load_json(text), extension_types)


def batch_from_json(obj: object, extension_types: ExtensionTypes | None = None) -> list[CloudEvent]:
    """Events of a parsed batch array; every bad member is reported, not just the first."""
    if not isinstance(obj, list):
        raise CloudEventError(BATCH_INVALID, [f"batch: must be a JSON array, got {json_kind(obj)}"])
    events: list[CloudEvent] = []
    problems: list[str] = []
    for index, member in enumerate(obj):
        try:
            events.append(event_from_json(member, extension_types))
        except CloudEventError as exc:
            problems.extend(f"[{index}] {problem}" for problem in exc.problems)
    # A list, not a set: a hostile member's specversion may be an array or object, which
    # a set cannot hold (TypeError escaped and nacked the request; found by tests/fuzz).
    versions: list[object] = []
    for member in obj:
        if isinstance(member, dict) and member.get("specversion") not in versions:
            versions.append(member.get("specversion"))
    if len(versions) > 1:
        shown = ", ".join(sorted(repr(v) for v in versions))
        problems.append(f"batch: members must share one specversion, found {shown}")
    if problems:
        raise CloudEventError(BATCH_INVALID, problems)
    return events


def parse_batch(
    text: str | bytes, extension_types: ExtensionTypes | None = None
) -> list[CloudEvent]:
    """Parse an `application/cloudevents-batch+json` array (`[]` is a valid batch)."""
    return batch_from_json(load_json(text), extension_types)


def event_to_json(event: CloudEvent) -> dict[str, JSON]:
    """The JSON-format object: typed members, and `data` or `data_base64` per section 3.1."""
    return event.to_dict()


def serialize_event(event: CloudEvent) -> bytes:
    return datacodec.dumps(event.to_dict())


def serialize_batch(events: Iterable[CloudEvent]) -> bytes:
    return datacodec.dumps([event.to_dict() for event in events])
