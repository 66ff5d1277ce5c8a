"""A tapped message as one line of the stream (JSON), redacted as its route says.

    {"tap": "message", "at": ..., "route": ..., "outcome": "matched" | "dead-lettered",
     "reason": ..., "definition": ..., "nearest": ..., "tied": [...],
     "record": {native record in}, "cloudevent": {...}, "output": {endpoint: record},
     "explain": [{"definition", "failure", "passed"}], "detail": ..., "observe": true}

Other lines: `attached` (first; the routes tapped and the filter), `dropped` (how many
messages this tap lost since the last such line because its reader fell behind, and in
all) and `end` (the limit was reached). Every line has `tap` naming its kind; `xrgw diff
--replay` reads the `record` of the message lines and skips the others.

Redaction (`gateway.redaction`): the record as the conformance samples show it
(credential headers and the route's `redact:` paths replaced by `***`); the CloudEvent
and native outputs get the same `data.*` paths replaced in their `data`, and every text
of the line (the record's too) is scrubbed of the hidden values wherever else they
appear (a template can copy a header into an attribute). Bodies longer than
`BODY_BYTES` of JSON text are cut (`"truncated": true`).
"""

from __future__ import annotations

from collections.abc import Sequence

from gateway.cloudevents.jsonformat import event_to_json
from gateway.cloudevents.timestamps import format_rfc3339
from gateway.json.values import JSON, JSONObject, copy_json
from gateway.redaction.cut import cut_body
from gateway.redaction.redactor import Redactor
from gateway.tap.filter import DEAD_LETTERED, MATCHED
from gateway.tap.hub import Entry

#: The longest body a line carries (JSON text, text or base64), in bytes of UTF-8.
BODY_BYTES = 64 * 1024


def message_line(entry: Entry) -> JSONObject:
    item, redactor = entry.item, entry.redactor
    conversion = item.conversion
    secrets = redactor.secrets(item.record)
    line: JSONObject = {"tap": "message", "at": format_rfc3339(entry.at),
                        "route": entry.route}
    if entry.observe:
        line["observe"] = True
    line["outcome"] = MATCHED if item.reason is None else DEAD_LETTERED
    if item.reason is not None:
        line["reason"] = item.reason
    line["definition"] = item.definition
    if item.definition is None and item.nearest is not None:
        line["nearest"] = item.nearest
    if len(conversion.match.tied) > 1:
        line["tied"] = [d.xid for d in conversion.match.tied]
    # The body's size as received bounds its data's (and the event's data) as JSON text:
    # only a large one is measured again to be cut.
    large = len(item.record.body_bytes()) > BODY_BYTES
    line["record"] = _scrubbed(_cut(redactor.record_json(item.record), large), redactor,
                               secrets)
    if conversion.event is not None:
        event = copy_json(event_to_json(conversion.event))
        assert isinstance(event, dict)
        line["cloudevent"] = _hidden(event, redactor, secrets, large)
    if item.outputs:
        line["output"] = {
            endpoint: _scrubbed(_cut(redactor.record_json(record),
                                     len(record.body_bytes()) > BODY_BYTES),
                                redactor, secrets)
            for endpoint, record in item.outputs}
    if conversion.explain:
        line["explain"] = [e.to_json() for e in
                           redactor.explanations(conversion.explain, secrets)]
    detail = "; ".join(item.failures) if item.failures else conversion.detail
    if detail and item.reason is not None:
        line["detail"] = redactor.text(detail, secrets)
    return line


def dropped_line(at: str, since: int, total: int) -> JSONObject:
    return {"tap": "dropped", "at": at, "dropped": since, "total": total}


def _hidden(doc: JSONObject, redactor: Redactor, secrets: Sequence[str],
            large: bool) -> JSONObject:
    """A CloudEvent: the body paths of `redact:`
    replaced in its data, the hidden values scrubbed from every text."""
    body_paths = [p for p in redactor.paths if p.split(".", 1)[0] == "data"]
    if body_paths and "data" in doc:
        doc = Redactor(body_paths, names=()).record_json(doc)
    return _scrubbed(_cut(doc, large), redactor, secrets)


def _cut(doc: JSONObject, large: bool) -> JSONObject:
    return cut_body(doc, BODY_BYTES) if large else doc


def _scrubbed(doc: JSONObject, redactor: Redactor, secrets: Sequence[str]) -> JSONObject:
    if not secrets:
        return doc
    out = _scrub(doc, redactor, secrets)
    assert isinstance(out, dict)
    return out


def _scrub(node: JSON, redactor: Redactor, secrets: Sequence[str]) -> JSON:
    if isinstance(node, str):
        return redactor.text(node, secrets)
    if isinstance(node, dict):
        return {key: _scrub(value, redactor, secrets) for key, value in node.items()}
    if isinstance(node, list):
        return [_scrub(value, redactor, secrets) for value in node]
    return node


__all__ = ["BODY_BYTES", "dropped_line", "message_line"]
