"""The live conformance report: what each route's catalog catches, per definition.

For every route: messages received, matched and rendered per definition, the dead-letter
reasons (in an observing route: the reasons a message *would* have been dead-lettered
for), the most frequent failed checks of unmatched messages ("topic_name segment 3:
expected cashierdesk, got desk") and a bounded ring of unmatched samples, with first and
last seen times. The daemon serves it as JSON at `/conformance`, as Prometheus metrics
and on the status page; `xrgw report` prints it.

The JSON document's `rows` have the shape of the Spark job's `--report` rows
(`gateway/spark/report.py`): one per definition with `window_start`, `window_end`,
`definition`, `matched`, `unmatched`, `invalid`, counted the same way (a failure is
counted against the nearest definition of its explanation, null when none was near), so a
live hour and a Spark backfill compare line by line.

Memory is bounded whatever the traffic: per route at most `MAX_CONSTRAINTS` distinct
failure texts (the least frequent is evicted when a new one comes) and `MAX_SAMPLES`
samples, each body cut at `SAMPLE_BYTES`; definitions and reasons are finite sets.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import NamedTuple

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from gateway.cloudevents.timestamps import format_rfc3339
from gateway.deadletter import reasons
from gateway.json.values import JSON, JSONObject
from gateway.matching.matcher import Explanation
from gateway.record import NativeMessage
from gateway.redaction.cut import cut_body
from gateway.redaction.redactor import REDACTED, Redactor, hide_capture, hide_received

#: The reasons counted as `invalid` in the report rows: the definition matched, but no
#: valid CloudEvent could be rendered (as in the Spark job's report).
INVALID_REASONS = (reasons.MISSING_CONTEXT, reasons.INVALID_ENVELOPE, reasons.NO_ENVELOPE)
MAX_CONSTRAINTS = 200
MAX_SAMPLES = 20
SAMPLE_BYTES = 512
#: Longest metric label of a failed check (the definitions' texts, but still bounded).
LABEL_CHARS = 200


def _now() -> datetime:
    return datetime.now(UTC)


def _stamp(at: datetime | None) -> str | None:
    # The events' own formatter: a report time equals the `time` of the events it counted
    # as text too (strftime's fixed six digits differed whenever a microsecond ended in 0).
    return None if at is None else format_rfc3339(at)


class DefinitionTally:
    """The counts of one definition (or of `None`: failures near no definition)."""

    __slots__ = ("deadletter", "first_seen", "last_seen", "matched", "rendered")

    def __init__(self) -> None:
        self.matched = 0
        self.rendered = 0
        self.deadletter: dict[str, int] = {}
        self.first_seen: datetime | None = None
        self.last_seen: datetime | None = None

    def seen(self, at: datetime) -> None:
        if self.first_seen is None:
            self.first_seen = at
        self.last_seen = at

    @property
    def invalid(self) -> int:
        return sum(self.deadletter.get(r, 0) for r in INVALID_REASONS)

    @property
    def unmatched(self) -> int:
        """Everything dead-lettered that is not `invalid` (as the Spark report counts)."""
        return sum(self.deadletter.values()) - self.invalid


class RouteReport:
    """The conformance counts of one route."""

    def __init__(self, name: str, source: str, *, observe: bool = False,
                 redact: Sequence[str] = (), started: datetime | None = None) -> None:
        self.name = name
        self.source = source
        self.observe = observe
        self.redact = tuple(redact)
        self.redactor = Redactor(self.redact)
        self.started = started or _now()
        self.received = 0
        self.definitions: dict[str | None, DefinitionTally] = {}
        self.constraints: dict[str, int] = {}
        # Each failure text's metric label: the check and what the definition expected,
        # never what the sender sent (bounded by the definitions, whatever arrives).
        self.constraint_labels: dict[str, str] = {}
        self.samples: deque[_Sample] = deque(maxlen=MAX_SAMPLES)

    def _tally(self, definition: str | None) -> DefinitionTally:
        tally = self.definitions.get(definition)
        if tally is None:
            tally = self.definitions[definition] = DefinitionTally()
        return tally

    def received_messages(self, count: int) -> None:
        self.received += count

    def matched(self, definition: str, at: datetime, count: int = 1) -> None:
        """`count` messages matched `definition` (the route counts a batch at once)."""
        tally = self._tally(definition)
        tally.matched += count
        tally.seen(at)

    def rendered(self, definition: str, count: int = 1) -> None:
        self._tally(definition).rendered += count

    def failed(self, record: NativeMessage, reason: str, definition: str | None,
               explain: Sequence[Explanation], detail: str, at: datetime) -> None:
        """One message (or batch member) that failed: counted against `definition` (the
        matched one, else the nearest of the explanation); unmatched ones also add their
        first failed checks and a sample."""
        nearest = definition or (explain[0].definition if explain else None)
        tally = self._tally(nearest)
        tally.deadletter[reason] = tally.deadletter.get(reason, 0) + 1
        tally.seen(at)
        if reason == reasons.UNMATCHED:
            for explanation in explain[:1]:
                self._constraint(*self._failed_check(explanation, record))
        # Kept as they are and turned into JSON only when the report is read: a burst of
        # failures would otherwise build (and redact) a sample per message for the 20 kept.
        self.samples.append(_Sample(at, reason, detail, nearest, tuple(explain[:3]), record))

    def _failed_check(self, explanation: Explanation,
                      record: NativeMessage) -> tuple[str, str]:
        """(the report's text, the metric label) of an explanation's failed check, the
        received value hidden when its field is (`redact:`, credential headers) and
        scrubbed of hidden values otherwise."""
        parts = explanation_parts(explanation)
        if parts is None:  # no structure (read back from JSON): the scrubbed text alone
            text = self.redactor.text(explanation.failure, self.redactor.secrets(record))
            return text, "(other)"
        label, expected, got = parts
        if self.redactor.hides_check(label):
            expected, got = hide_capture(expected), hide_received(got)
        else:
            got = self.redactor.text(got, self.redactor.secrets(record))
        return f"{label}: expected {expected}, got {got}", metric_label(label, expected)

    def _constraint(self, failure: str, label: str) -> None:
        counts = self.constraints
        if failure in counts:
            counts[failure] += 1
            return
        if len(counts) >= MAX_CONSTRAINTS:
            # Bounded: a new text takes the place of the least frequent one.
            evicted = min(counts, key=counts.__getitem__)
            del counts[evicted]
            self.constraint_labels.pop(evicted, None)
        counts[failure] = 1
        self.constraint_labels[failure] = label

    def failed_check_counts(self, limit: int = 10) -> list[tuple[str, int]]:
        """The most frequent failed checks by metric label (texts differing only in
        what was received count together)."""
        merged: dict[str, int] = {}
        for failure, count in self.constraints.items():
            label = self.constraint_labels.get(failure, "(other)")
            merged[label] = merged.get(label, 0) + count
        return sorted(merged.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]

    def deadletter(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for tally in self.definitions.values():
            for reason, count in tally.deadletter.items():
                out[reason] = out.get(reason, 0) + count
        return out

    def top_constraints(self, limit: int = 10) -> list[tuple[str, int]]:
        return sorted(self.constraints.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]

    def to_json(self, now: datetime) -> JSONObject:
        return {
            "route": self.name,
            "source": self.source,
            "observe": self.observe,
            "received": self.received,
            "matched": sum(t.matched for t in self.definitions.values()),
            "rendered": sum(t.rendered for t in self.definitions.values()),
            "deadletter": dict(sorted(self.deadletter().items())),
            "definitions": [
                {"definition": xid, "matched": t.matched, "rendered": t.rendered,
                 "unmatched": t.unmatched, "invalid": t.invalid,
                 "deadletter": dict(sorted(t.deadletter.items())),
                 "first_seen": _stamp(t.first_seen), "last_seen": _stamp(t.last_seen)}
                for xid, t in sorted(self.definitions.items(), key=lambda kv: kv[0] or "")
            ],
            "constraints": [{"failure": f, "count": c} for f, c in self.top_constraints()],
            "samples": [sample.to_json(self.redactor) for sample in self.samples],
        }


class Conformance(Collector):
    """The reports of all routes of one gateway; as a Prometheus collector it exports
    them as `xrgw_conformance_messages{route, definition, outcome}` (outcome: matched,
    rendered, or a dead-letter reason) and `xrgw_conformance_failed_checks{route,
    failure}` (the ten most frequent first failed checks of unmatched messages)."""

    def __init__(self) -> None:
        self.routes: dict[str, RouteReport] = {}
        self.started = _now()

    def route(self, name: str, source: str, *, observe: bool = False,
              redact: Sequence[str] = ()) -> RouteReport:
        """The report of route `name`; a reload keeps the counts of a route that stays."""
        report = self.routes.get(name)
        if report is None:
            report = self.routes[name] = RouteReport(name, source, observe=observe,
                                                     redact=redact, started=self.started)
        if tuple(redact) != report.redact:
            report.redact, report.redactor = tuple(redact), Redactor(redact)
        report.observe = observe
        return report

    def collect(self) -> Iterator[Metric]:
        messages = CounterMetricFamily(
            "xrgw_conformance_messages", "Messages per route and definition by outcome: "
            "matched, rendered, or the dead-letter reason (an observing route: the reason "
            "it would have been dead-lettered for)", labels=["route", "definition", "outcome"])
        checks = GaugeMetricFamily(
            "xrgw_conformance_failed_checks", "The most frequent first failed checks of "
            "unmatched messages, per route (top ten), each the check and the value the "
            "definition expected (never the received value: that is in /conformance, "
            "redacted)", labels=["route", "failure"])
        for name, report in list(self.routes.items()):
            for xid, tally in list(report.definitions.items()):
                definition = xid or ""
                outcomes = {"matched": tally.matched, "rendered": tally.rendered,
                            **tally.deadletter}
                for outcome, count in outcomes.items():
                    messages.add_metric([name, definition, outcome], count)
            for label, count in report.failed_check_counts():
                checks.add_metric([name, label[:LABEL_CHARS]], count)
        yield messages
        yield checks

    def to_json(self, now: datetime | None = None) -> JSONObject:
        now = now or _now()
        routes = list(self.routes.values())
        return {"generated_at": _stamp(now), "rows": rows(routes, self.started, now),
                "routes": [r.to_json(now) for r in routes]}


def rows(routes: Iterable[RouteReport], start: datetime, end: datetime) -> list[JSON]:
    """The Spark `--report` rows of the routes' counts: one window (start to now) and one
    row per definition, summed over the routes."""
    merged: dict[str | None, list[int]] = {}
    for route in routes:
        for xid, tally in route.definitions.items():
            counts = merged.setdefault(xid, [0, 0, 0])
            counts[0] += tally.matched
            counts[1] += tally.unmatched
            counts[2] += tally.invalid
    return [{"window_start": _stamp(start), "window_end": _stamp(end), "definition": xid,
             "matched": c[0], "unmatched": c[1], "invalid": c[2]}
            for xid, c in sorted(merged.items(), key=lambda kv: kv[0] or "")]


# -- failed checks --------------------------------------------------------------------------

_FAILURE = re.compile(r"^(?P<label>[^:]+): expected (?P<expected>.+), got (?P<got>.*)$",
                      re.DOTALL)
_PLACEHOLDER = re.compile(r"^\{[^{}]*\}$")
_CAPTURED = re.compile(r"^(?P<name>\{[^{}]*\}) = .* \(captured earlier\)$", re.DOTALL)


def failed_check(failure: str) -> str:
    """The failure of an address template phrased by its first differing segment, so
    that the messages of a thousand devices failing the same way count as one line:
    `topic_name: expected /store/{storeid}/cashierdesk, got /store/12/desk` becomes
    `topic_name segment 3: expected cashierdesk, got desk`. Other failures as they are."""
    found = _FAILURE.match(failure)
    if found is None:
        return failure
    label, expected, got = check_parts(found["label"], found["expected"], found["got"])
    return f"{label}: expected {expected}, got {got}"


def explanation_parts(explanation: Explanation) -> tuple[str, str, str] | None:
    """(label, expected, got) of an explanation's failed check (`check_parts`), from the
    matcher's own parts; parsed from the text when there are none (an explanation read
    back from JSON: a sender's value may then blur where `got` begins). None when the
    text is not a failed check."""
    if explanation.check:
        return check_parts(explanation.check, explanation.expected, explanation.got)
    found = _FAILURE.match(explanation.failure)
    if found is None:
        return None
    return check_parts(found["label"], found["expected"], found["got"])


def check_parts(label: str, expected: str, got: str) -> tuple[str, str, str]:
    """A failed check phrased by the first differing segment of an address template."""
    whole = label, expected, got
    if "{" not in expected:
        return whole
    separator = "/" if "/" in expected else "." if "." in expected else None
    if separator is None:
        return whole
    want, have = expected.split(separator), got.split(separator)
    for index, (part, value) in enumerate(zip(want, have, strict=False)):
        if "{" in part:
            if _PLACEHOLDER.match(part) and value:
                continue
            return whole  # a placeholder inside a segment: keep the whole text
        if part != value:
            return f"{label} segment {index}", part, value
    if len(want) != len(have):
        return label, f"{len(want)} segments", str(len(have))
    return whole


def metric_label(label: str, expected: str) -> str:
    """A failed check as a metric label: the check and what the definition expected. A
    clash of captures names the placeholder only (the earlier value is the sender's)."""
    found = _CAPTURED.match(expected)
    if found is not None:
        expected = f"{found['name']} as captured earlier"
    return f"{label}: expected {expected}"


# -- samples ----------------------------------------------------------------------------------


class _Sample(NamedTuple):
    """An unmatched (or failed) message as the report keeps it, until it is read."""

    at: datetime
    reason: str
    detail: str
    nearest: str | None
    explain: tuple[Explanation, ...]
    record: NativeMessage

    def to_json(self, redactor: Redactor) -> JSONObject:
        secrets = redactor.secrets(self.record)
        return {
            "at": _stamp(self.at), "reason": self.reason,
            "detail": redactor.text(self.detail, secrets)[:SAMPLE_BYTES],
            "nearest": self.nearest,
            "explain": [e.to_json() for e in redactor.explanations(self.explain, secrets)],
            "record": sample_record(self.record, redactor),
        }


def sample_record(record: NativeMessage, redact: Sequence[str] | Redactor) -> JSONObject:
    """The record as JSON for a sample: the credential headers and the `redact` field
    paths replaced (`data.card.number` in the body, `topic_name` or
    `headers.x-api-key` in the record fields), the body cut to `SAMPLE_BYTES` of JSON
    text."""
    redactor = redact if isinstance(redact, Redactor) else Redactor(redact)
    return cut_body(redactor.record_json(record), SAMPLE_BYTES)


def route_counts(report: Mapping[str, JSON]) -> tuple[int, int, int]:
    """(received, matched, dead-lettered) of one route of a `/conformance` document."""
    dead = report.get("deadletter")
    total = sum(v for v in dead.values() if isinstance(v, int)) if isinstance(dead, dict) else 0
    received, matched = report.get("received"), report.get("matched")
    return (received if isinstance(received, int) else 0,
            matched if isinstance(matched, int) else 0, total)


__all__ = ["INVALID_REASONS", "LABEL_CHARS", "MAX_CONSTRAINTS", "MAX_SAMPLES", "REDACTED",
           "SAMPLE_BYTES", "Conformance", "DefinitionTally", "RouteReport", "check_parts",
           "explanation_parts", "failed_check", "metric_label",
           "route_counts", "rows", "sample_record"]
