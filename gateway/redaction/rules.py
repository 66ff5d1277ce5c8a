"""What a route's `redact:` may name: dot-separated field paths of the record
(`topic_name`, `headers.x-api-key`, `data.card.number`). The config check reads this at
load time; `gateway.redaction.redactor` hides what the paths name."""

from __future__ import annotations

__all__ = ["redaction_problem"]


def redaction_problem(path: str) -> str | None:
    """Why `path` is not a usable `redact:` path (None: it is)."""
    parts = path.split(".")
    if not path or any(not p for p in parts):
        return "a redact path is dot-separated names, such as data.card.number"
    return None
