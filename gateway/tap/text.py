"""`xrgw tap --format text`: the stream's lines for a terminal.

One line per message: time, route, outcome (the reason of a dead letter), the definition
(or `~ nearest` for a miss) and the record's address (topic, subject, path ...); then,
indented, the CloudEvent's `type`, `source` and `subject` for a match, or the failed
check of each near definition for a miss, a dead letter's detail, and the body, cut to
`BODY_CHARS`. Colours (ANSI) only when asked (`colour=True`: a terminal without
`NO_COLOR`): green matched, red dead-lettered, yellow for drops and the end.
"""

from __future__ import annotations

from gateway.json.text import utf8_json
from gateway.json.values import JSON, JSONObject, as_list, as_object
from gateway.protocols import find_profile

BODY_CHARS = 160
_CODES = {"red": "31", "green": "32", "yellow": "33", "dim": "2", "bold": "1"}


def render_line(line: JSONObject, *, colour: bool = False) -> str:
    """The text of one stream line (several terminal lines for a message)."""
    def paint(text: str, style: str) -> str:
        return f"\033[{_CODES[style]}m{text}\033[0m" if colour else text

    kind = line.get("tap")
    if kind == "attached":
        routes = ", ".join(str(r) for r in as_list(line.get("routes")))
        return paint(f"tapping {routes}", "dim")
    if kind == "dropped":
        return paint(f"… {line.get('dropped')} message(s) not shown: this tap fell behind "
                     f"(the route did not wait; {line.get('total')} in all)", "yellow")
    if kind == "end":
        return paint(f"end: {line.get('why')}: {line.get('messages')} message(s), "
                     f"{line.get('dropped')} dropped", "yellow")
    if kind != "message":
        return paint(utf8_json(line), "dim")
    record = as_object(line.get("record"))
    reason = line.get("reason")
    outcome = paint("matched", "green") if reason is None else paint(str(reason), "red")
    observe = " (observe)" if line.get("observe") else ""
    xid = line.get("definition")
    about = str(xid) if xid else f"~ {line.get('nearest') or '(no definition near)'}"
    at = str(line.get("at") or "")
    clock = at[11:23] if len(at) >= 23 else at
    head = (f"{paint(clock, 'dim')} {line.get('route')}{observe} {outcome} {about} "
            f"{paint(address(record), 'bold')}")
    out = [head]
    event = line.get("cloudevent")
    if isinstance(event, dict) and reason is None:
        attributes = " ".join(f"{k}={event[k]}" for k in ("type", "source", "subject", "id")
                              if event.get(k) is not None)
        out.append(f"    -> {attributes}")
    tied = line.get("tied")
    if isinstance(tied, list):
        out.append("    tied: " + ", ".join(str(t) for t in tied))
    for explanation in as_list(line.get("explain")):
        entry = as_object(explanation)
        out.append(f"    x {entry.get('definition')}: {entry.get('failure')}")
    if line.get("detail") and not line.get("explain"):
        out.append(f"    {line.get('detail')}")
    for endpoint, native in as_object(line.get("output")).items():
        out.append(f"    -> {endpoint}: {address(as_object(native))}")
    body = body_text(record)
    if body:
        out.append(paint(f"    {body}", "dim"))
    return "\n".join(out)


def address(record: JSONObject) -> str:
    """The record's address as its protocol's profile names it (topic, subject, path)."""
    profile = find_profile(str(record.get("protocol") or ""))
    if profile is None or profile.address is None:
        return ""
    value: JSON = record.get(profile.address.field)
    name = profile.address.name
    if name is not None:
        if isinstance(value, dict):
            value = value.get(name)
        elif isinstance(value, list):
            value = next((as_object(i).get("value") for i in value
                          if as_object(i).get("name") == name), None)
    return "" if value is None else str(value)


def body_text(record: JSONObject) -> str:
    if "data" in record:
        text = utf8_json(record["data"], separators=(",", ":"))
    elif "data_base64" in record:
        text = f"(base64) {record['data_base64']}"
    else:
        return ""
    return text if len(text) <= BODY_CHARS else text[: BODY_CHARS - 1] + "…"


__all__ = ["BODY_CHARS", "address", "body_text", "render_line"]
