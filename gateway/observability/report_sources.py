"""Where `xrgw report` reads a conformance report from, as one `/conformance`-shaped
document (`rows` in the Spark `--report` shape, plus `routes` when live):

- a running gateway's admin URL (`http://127.0.0.1:9464`, `/conformance` appended);
- a `/conformance` JSON document saved to a file;
- the Spark job's `--report file:DIR` output (JSON Lines part files, or one file): rows
  summed per definition over their windows;
- a dead-letter file: JSON Lines of native records as the dead-letter endpoint got them
  (e.g. dumped from its topic), the Spark job's `--deadletter` files, or `xrgw match`
  output; counted by reason against the matched, else the nearest, definition.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterable, Iterator
from pathlib import Path

from gateway.deadletter import reasons
from gateway.deadletter.format import PREFIX, deadletter_metadata
from gateway.json.values import JSON, JSONObject, as_int, as_list
from gateway.observability.conformance import INVALID_REASONS
from gateway.record import NativeMessage, RecordError


class ReportError(ValueError):
    """The input is not a report this command reads (the message says what it is)."""


def load_report(where: str, timeout: float = 10.0, token: str | None = None) -> JSONObject:
    if where.startswith(("http://", "https://")):
        url = where if where.rstrip("/").endswith("/conformance") else (
            where.rstrip("/") + "/conformance")
        request = urllib.request.Request(url, headers={} if token is None else {
            "Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            doc = json.loads(answer.read())
        if not isinstance(doc, dict) or "rows" not in doc:
            raise ReportError(f"{url}: not a conformance report")
        return doc
    path = Path(where)
    files = sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith(
        (".", "_"))) if path.is_dir() else [path]
    if not files:
        raise ReportError(f"{where}: no report files in the directory")
    text = "".join(f.read_text(encoding="utf-8") for f in files)
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        whole = None
    if isinstance(whole, dict) and "rows" in whole:
        return whole
    return from_lines(where, text.splitlines())


def from_lines(where: str, lines: Iterable[str]) -> JSONObject:
    """Spark report rows or dead-letter records, one JSON object a line."""
    counts: dict[str | None, list[int]] = {}  # definition -> [matched, unmatched, invalid]
    windows: list[str] = []
    dead: dict[str, int] = {}
    for number, line in _numbered(lines):
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ReportError(f"{where}:{number}: not JSON ({exc.msg})") from exc
        if not isinstance(obj, dict):
            raise ReportError(f"{where}:{number}: expected a JSON object")
        if "matched" in obj and "unmatched" in obj:  # a Spark report row
            row = counts.setdefault(_definition(obj.get("definition")), [0, 0, 0])
            for i, key in enumerate(("matched", "unmatched", "invalid")):
                row[i] += as_int(obj.get(key))
            windows += [str(obj[k]) for k in ("window_start", "window_end") if obj.get(k)]
            continue
        if "reason" in obj or "cloudevent" in obj:  # Spark dead letter / `xrgw match` line
            reason_or_none, nearest = _conversion(obj)
            if reason_or_none is None:
                counts.setdefault(nearest, [0, 0, 0])[0] += 1
                continue
            reason = reason_or_none
        else:
            reason, nearest = _dead_letter(where, number, obj)
        dead[reason] = dead.get(reason, 0) + 1
        row = counts.setdefault(nearest, [0, 0, 0])
        row[2 if reason in INVALID_REASONS else 1] += 1
    start, end = (min(windows), max(windows)) if windows else (None, None)
    rows: list[JSON] = [
        {"window_start": start, "window_end": end, "definition": xid, "matched": c[0],
         "unmatched": c[1], "invalid": c[2]}
        for xid, c in sorted(counts.items(), key=lambda kv: kv[0] or "")]
    out: JSONObject = {"generated_at": None, "rows": rows, "routes": []}
    if dead:
        out["deadletter"] = dict(sorted(dead.items()))
    return out


def _conversion(obj: JSONObject) -> tuple[str | None, str | None]:
    """(reason, definition) of a conversion result: a line of the Spark job's
    `--deadletter` files or of `xrgw match` (reason None: it rendered a CloudEvent).
    Counted against the matched definition, else the nearest of the explanation."""
    nearest = _definition(obj.get("match"))
    explain = obj.get("explain")
    if nearest is None and isinstance(explain, list) and explain and isinstance(
            explain[0], dict):
        nearest = _definition(explain[0].get("definition"))
    if "cloudevent" in obj:
        return None, nearest
    reason = obj.get("reason")
    return (reason if isinstance(reason, str) and reason else reasons.UNMATCHED), nearest


def _dead_letter(where: str, number: int, obj: JSONObject) -> tuple[str, str | None]:
    try:
        record = NativeMessage.from_json(obj)
    except RecordError as exc:
        raise ReportError(f"{where}:{number}: neither a report row nor a dead-letter "
                          f"record ({exc})") from exc
    meta = deadletter_metadata(record)
    document = record.data.get("deadletter") if isinstance(record.data, dict) else None
    if not meta and isinstance(document, dict):  # no metadata (MQTT 3.1.1): a document
        meta = {str(k): str(v) for k, v in document.items()}
    reason = meta.get(PREFIX + "reason")
    if reason is None:
        raise ReportError(f"{where}:{number}: a record without {PREFIX}reason is not a "
                          "dead letter")
    nearest: str | None = None
    try:
        explain = json.loads(meta.get(PREFIX + "explain", "[]"))
    except json.JSONDecodeError:
        explain = []
    if isinstance(explain, list) and explain and isinstance(explain[0], dict):
        nearest = _definition(explain[0].get("definition"))
    return reason or reasons.UNMATCHED, nearest


def _numbered(lines: Iterable[str]) -> Iterator[tuple[int, str]]:
    for number, line in enumerate(lines, start=1):
        if line.strip():
            yield number, line


def _definition(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def table(report: JSONObject) -> str:
    """The report as text: one line per definition, then per route its dead letters,
    most frequent failed checks and latest unmatched samples."""
    rows = [r for r in as_list(report.get("rows")) if isinstance(r, dict)]
    out = []
    width = max([len("definition"), *(len(str(r.get("definition") or "(none near)"))
                                      for r in rows)])
    out.append(f"{'definition':<{width}}  {'matched':>9}  {'unmatched':>9}  {'invalid':>9}")
    for row in rows:
        out.append(f"{row.get('definition') or '(none near)'!s:<{width}}  "
                   f"{as_int(row.get('matched')):>9,}  {as_int(row.get('unmatched')):>9,}  "
                   f"{as_int(row.get('invalid')):>9,}")
    totals = [sum(as_int(r.get(k)) for r in rows) for k in ("matched", "unmatched", "invalid")]
    out.append(f"{'total':<{width}}  {totals[0]:>9,}  {totals[1]:>9,}  {totals[2]:>9,}")
    dead = report.get("deadletter")
    if isinstance(dead, dict) and dead:
        out.append("")
        out.append("dead letters by reason: " + ", ".join(
            f"{k} {as_int(v):,}" for k, v in dead.items()))
    for route in as_list(report.get("routes")):
        if not isinstance(route, dict):
            continue
        out.append("")
        mode = " (observe)" if route.get("observe") else ""
        out.append(f"route {route.get('route')}{mode}: received {as_int(route.get('received')):,}"
                   f", matched {as_int(route.get('matched')):,}, rendered "
                   f"{as_int(route.get('rendered')):,}")
        reasons_ = route.get("deadletter")
        if isinstance(reasons_, dict) and reasons_:
            out.append("  dead letters: " + ", ".join(
                f"{k} {as_int(v):,}" for k, v in reasons_.items()))
        for entry in as_list(route.get("constraints")):
            if isinstance(entry, dict):
                out.append(f"  {entry.get('failure')} — {as_int(entry.get('count')):,}")
    return "\n".join(out) + "\n"


__all__ = ["ReportError", "from_lines", "load_report", "table"]
