"""The dead-letter wire format: the original message, intact, plus why it could not be
delivered. Shared by the daemon (`gateway/runtime/route.py` sends dead letters) and the
Spark job (`gateway/spark/kafka.py` writes them), so it is neither's: one format, read back
by `original_record` whoever wrote it.

The body is the original body, byte for byte. The reason travels as protocol metadata of
the dead-letter endpoint's protocol (where its profile keeps metadata: Kafka/NATS/HTTP
headers, MQTT 5 user properties, AMQP application properties), all prefixed `xrgw-`:

| name | value |
|---|---|
| `xrgw-reason` | the reason code (`gateway.deadletter.reasons`) |
| `xrgw-detail` | a one-line explanation |
| `xrgw-explain` | JSON list of the nearest definitions and their first failed check |
| `xrgw-source-endpoint` | the consumer endpoint the message came from |
| `xrgw-time` | when it was dead-lettered (RFC 3339) |
| `xrgw-record` | JSON of the original native record without its body |

`original_record(dead_letter)` rebuilds the original record, so a dead letter can be
re-driven (by the daemon, or by the Spark job after a definition fix).

A dead letter *without its body* (`withheld_body(letter, original)`) is what is written
when the dead-letter endpoint itself cannot take the message for its size: the same
metadata, no body, and two more entries that identify the body that was left out --
`xrgw-body-size` (bytes) and `xrgw-body-sha256` (hex digest). Such a letter cannot be
re-driven from the dead letter alone; the digest finds the original at its source.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from datetime import UTC, datetime

from gateway.json.values import JSON
from gateway.matching.matcher import Explanation
from gateway.protocols import add_metadata, find_profile, set_content_type
from gateway.record import NativeMessage

PREFIX = "xrgw-"


def deadletter_record(
    original: NativeMessage,
    *,
    protocol: str,
    reason: str,
    detail: str = "",
    explain: Sequence[Explanation] = (),
    source_endpoint: str = "",
    now: datetime | None = None,
) -> NativeMessage:
    meta = original.to_json()
    meta.pop("data", None)
    meta.pop("data_base64", None)
    entries: list[tuple[str, str]] = [
        (PREFIX + "reason", reason),
        (PREFIX + "detail", _utf8(detail.replace("\n", " "))),
        (PREFIX + "source-endpoint", source_endpoint),
        (PREFIX + "time", (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")),
        (PREFIX + "record", _json(meta, separators=(",", ":"))),
    ]
    if explain:
        entries.append((PREFIX + "explain", _json([e.to_json() for e in explain])))
    fields: dict[str, JSON] = {}
    prof = find_profile(protocol)
    if prof is not None:
        if prof.metadata is None:
            # No metadata (MQTT 3.1.1): the dead letter becomes a JSON document instead.
            body: JSON = {"deadletter": dict(entries), "record": original.to_json()}
            return NativeMessage(protocol, {}, data=body)
        add_metadata(fields, prof.metadata, dict(entries))
        ctype = original.content_type
        if ctype:
            set_content_type(fields, prof, _utf8(ctype))
    # The original body, byte for byte (raw bytes travel with parsed JSON data).
    return NativeMessage(protocol, {}).replace_fields(fields) if not original.has_body else (
        original.replace_fields(fields, protocol))


def withheld_body(original: NativeMessage, *, protocol: str, reason: str, detail: str = "",
                  source_endpoint: str = "", now: datetime | None = None) -> NativeMessage:
    """A dead letter of `original` without its body: the reason, the explanation and
    the original's metadata as `deadletter_record` writes them, plus the body's size
    (`xrgw-body-size`) and SHA-256 (`xrgw-body-sha256`). Written when the dead-letter
    endpoint refuses the whole letter for its size: a dead letter that cannot be written
    must not hold the route for ever."""
    body = original.body_bytes()
    headless = NativeMessage(original.protocol, original.fields)
    letter = deadletter_record(headless, protocol=protocol, reason=reason, detail=detail,
                               source_endpoint=source_endpoint, now=now)
    extra = {PREFIX + "body-size": str(len(body)),
             PREFIX + "body-sha256": hashlib.sha256(body).hexdigest()}
    prof = find_profile(protocol)
    if prof is None:
        return letter
    if prof.metadata is None:  # the JSON-document form: the entries sit in its body
        assert isinstance(letter.data, dict)
        entries = letter.data["deadletter"]
        assert isinstance(entries, dict)
        return NativeMessage(protocol, {}, data={"deadletter": {**entries, **extra},
                                                 "record": letter.data["record"]})
    fields: dict[str, JSON] = dict(letter.fields)
    add_metadata(fields, prof.metadata, extra)
    return letter.replace_fields(fields)


def _utf8(text: str) -> str:
    """`text` if it has a UTF-8 form, else with lone surrogates escaped (`\\udXXX`)."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode()
    return text


def _json(value: object, separators: tuple[str, str] | None = None) -> str:
    """JSON text that every protocol can carry. Lone surrogates in the original (from
    hostile input: a JSON escape such as "\\ud800", a wrong-typed field) have no UTF-8
    form, and a header the dead-letter producer cannot encode made the dead letter fail
    and the message come back forever (found by tests/fuzz); escaped JSON is the same
    value, so `original_record` still rebuilds the original exactly."""
    text = json.dumps(value, separators=separators, ensure_ascii=False)
    try:
        text.encode()
    except UnicodeEncodeError:
        return json.dumps(value, separators=separators)
    return text


def deadletter_metadata(record: NativeMessage) -> dict[str, str]:
    """The `xrgw-*` entries of a dead-letter record."""
    prof = find_profile(record.protocol)
    place = None if prof is None else prof.metadata
    if place is None:
        return {}
    if place.shape == "section":
        section = record.fields.get(place.field)
        items = section.items() if isinstance(section, dict) else []
        return {k: str(v) for k, v in items if k.startswith(PREFIX)}
    return {k: v for k, v in record.pairs(place.field) if k.startswith(PREFIX)}


def original_record(record: NativeMessage) -> NativeMessage | None:
    """Rebuild the original record of a dead letter (None if it is not one)."""
    prof = find_profile(record.protocol)
    if prof is not None and prof.metadata is None and isinstance(record.data, dict):
        inner = record.data.get("record")
        return NativeMessage.from_json(inner) if isinstance(inner, dict) else None
    meta = deadletter_metadata(record).get(PREFIX + "record")
    if meta is None:
        return None
    obj = json.loads(meta)
    if record.has_json_data:
        obj["data"] = record.data
    elif record.payload is not None:
        import base64

        obj["data_base64"] = base64.b64encode(record.payload).decode("ascii")
    return NativeMessage.from_json(obj)
