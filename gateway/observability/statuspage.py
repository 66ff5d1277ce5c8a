"""The admin server's status page (`/`): routes with their rates, definitions with their
counts, dead letters by reason, the latest unmatched samples with their explanation.

Server-rendered HTML with no external assets (inline CSS, no script), refreshing itself
every `REFRESH_SECONDS` with a `<meta http-equiv="refresh">`: it works in any browser,
behind any proxy, and shows nothing the `/conformance` JSON does not hold. Every number
carries a `data-*` attribute naming what it counts, so a test (or a scraper) reads it
without parsing the layout.
"""

from __future__ import annotations

import time
from html import escape

from gateway.json.text import utf8_json
from gateway.json.values import JSON, JSONObject, as_int, as_list, as_object

REFRESH_SECONDS = 5
SHOWN_SAMPLES = 10

_STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.3em}h2{font-size:1.1em;margin-top:1.5em}
table{border-collapse:collapse;margin:.5em 0}
td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#f2f2f2}td.n{text-align:right;font-variant-numeric:tabular-nums}
.observe{background:#fff3cd;padding:0 .4em;border-radius:3px}
pre{margin:0;white-space:pre-wrap;max-width:60em;font-size:12px}
.muted{color:#777}
"""


class StatusPage:
    """Renders the page; remembers the last counts of each route for its rate."""

    def __init__(self) -> None:
        self._last: dict[str, tuple[float, int]] = {}  # route -> (monotonic, received)

    def rate(self, route: str, received: int, now: float) -> float:
        """Messages per second since the previous render (0 on the first)."""
        before = self._last.get(route)
        self._last[route] = (now, received)
        if before is None or now <= before[0]:
            return 0.0
        return max(0, received - before[1]) / (now - before[0])

    def render(self, report: JSONObject, ready: dict[str, bool]) -> str:
        now = time.monotonic()
        routes = [r for r in as_list(report.get("routes")) if isinstance(r, dict)]
        parts = [
            "<!doctype html><html lang=en><head><meta charset=utf-8>",
            f'<meta http-equiv="refresh" content="{REFRESH_SECONDS}">',
            "<title>xrgw status</title>", f"<style>{_STYLE}</style></head><body>",
            "<h1>xrgw status</h1>",
            f'<p class=muted>generated {_text(report.get("generated_at"))}; '
            f"refreshes every {REFRESH_SECONDS}s; JSON at <a href=/conformance>/conformance"
            "</a>, metrics at /metrics on the admin port</p>",
            "<h2>Routes</h2><table><tr><th>route</th><th>ready</th><th>received</th>"
            "<th>matched</th><th>rendered</th><th>dead letters</th><th>msg/s</th></tr>",
        ]
        for route in routes:
            name = _text(route.get("route"))
            received = as_int(route.get("received"))
            dead = sum(as_int(v) for v in as_object(route.get("deadletter")).values())
            mode = ' <span class=observe>observe</span>' if route.get("observe") else ""
            parts.append(
                f"<tr data-route='{escape(name)}'><td>{escape(name)}{mode}</td>"
                f"<td>{'yes' if ready.get(name) else 'no'}</td>"
                f"{_cell('received', received)}{_cell('matched', route.get('matched'))}"
                f"{_cell('rendered', route.get('rendered'))}{_cell('deadletter', dead)}"
                f"<td class=n>{self.rate(name, received, now):.1f}</td></tr>")
        parts.append("</table>")
        parts.append("<h2>Definitions</h2><table><tr><th>route</th><th>definition</th>"
                     "<th>matched</th><th>rendered</th><th>unmatched (nearest)</th>"
                     "<th>invalid</th><th>last seen</th></tr>")
        for route in routes:
            for row in as_list(route.get("definitions")):
                row = as_object(row)
                xid = row.get("definition")
                label = escape(str(xid)) if xid else "<span class=muted>(none near)</span>"
                parts.append(
                    f"<tr data-route='{escape(_text(route.get('route')))}' "
                    f"data-definition='{escape(str(xid or ''))}'>"
                    f"<td>{escape(_text(route.get('route')))}</td><td>{label}</td>"
                    f"{_cell('matched', row.get('matched'))}"
                    f"{_cell('rendered', row.get('rendered'))}"
                    f"{_cell('unmatched', row.get('unmatched'))}"
                    f"{_cell('invalid', row.get('invalid'))}"
                    f"<td>{escape(_text(row.get('last_seen')))}</td></tr>")
        parts.append("</table><h2>Dead letters by reason</h2><table>"
                     "<tr><th>route</th><th>reason</th><th>count</th></tr>")
        for route in routes:
            for reason, count in as_object(route.get("deadletter")).items():
                parts.append(f"<tr data-route='{escape(_text(route.get('route')))}' "
                             f"data-reason='{escape(reason)}'>"
                             f"<td>{escape(_text(route.get('route')))}</td>"
                             f"<td>{escape(reason)}</td>{_cell('count', count)}</tr>")
        parts.append("</table><h2>Most frequent failed checks</h2><table>"
                     "<tr><th>route</th><th>failed check</th><th>count</th></tr>")
        for route in routes:
            for entry in as_list(route.get("constraints")):
                entry = as_object(entry)
                parts.append(f"<tr data-route='{escape(_text(route.get('route')))}' "
                             f"data-failure='{escape(_text(entry.get('failure')))}'>"
                             f"<td>{escape(_text(route.get('route')))}</td>"
                             f"<td>{escape(_text(entry.get('failure')))}</td>"
                             f"{_cell('failures', entry.get('count'))}</tr>")
        parts.append("</table><h2>Latest unmatched samples</h2><table>"
                     "<tr><th>route</th><th>at</th><th>reason</th><th>explanation</th>"
                     "<th>record</th></tr>")
        for route in routes:
            for sample in list(reversed(as_list(route.get("samples"))))[:SHOWN_SAMPLES]:
                sample = as_object(sample)
                why = "<br>".join(
                    f"{escape(_text(as_object(e).get('definition')))}: "
                    f"{escape(_text(as_object(e).get('failure')))}"
                    for e in as_list(sample.get("explain"))) or escape(
                        _text(sample.get("detail")))
                record = utf8_json(sample.get("record"), indent=1)
                parts.append(f"<tr class=sample><td>{escape(_text(route.get('route')))}</td>"
                             f"<td>{escape(_text(sample.get('at')))}</td>"
                             f"<td>{escape(_text(sample.get('reason')))}</td><td>{why}</td>"
                             f"<td><pre>{escape(record)}</pre></td></tr>")
        parts.append("</table></body></html>")
        return "".join(parts)


def _cell(what: str, value: JSON | int) -> str:
    return f"<td class=n data-count='{what}'>{as_int(value)}</td>"



def _text(value: object) -> str:
    return "" if value is None else str(value)




__all__ = ["REFRESH_SECONDS", "StatusPage"]
