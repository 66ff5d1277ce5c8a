"""The one exception the CloudEvents layer raises for bad input."""

from __future__ import annotations

from collections.abc import Iterable

# Reason codes. Callers route on them (dead-letter, metrics), so they are stable strings
# rather than exception subclasses.
NOT_JSON = "not-json"
INVALID_CLOUDEVENT = "invalid-cloudevent"
BATCH_INVALID = "batch-invalid"
UNSUPPORTED_FORMAT = "unsupported-format"
UNEXPECTED_BATCH = "unexpected-batch"


class CloudEventError(ValueError):
    """Input that claims to be a CloudEvent (or batch) but is not a valid one.

    `reason` is a short code (see the constants above); `problems` lists every problem
    found, each naming the attribute or position it concerns. It subclasses ValueError
    so code that already guards parsing with `except ValueError` keeps working.
    """

    def __init__(self, reason: str, problems: Iterable[str]) -> None:
        self.reason = reason
        self.problems = list(problems)
        detail = "; ".join(self.problems) if self.problems else "no detail"
        super().__init__(f"{reason}: {detail}")
