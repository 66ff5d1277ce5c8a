"""Admission: a consumer whose senders wait on the line for the answer (the HTTP
ingress) can refuse messages while the route cannot deliver them.

A broker source holds messages at the broker while a route waits for its outputs (the
route does not read). A sender on the line has no broker between it and the gateway:
not listening would show as "connection refused". Such a consumer listens from the
start and, while held, answers every new message with "not now, retry later" (HTTP 503
+ Retry-After) before reading its body.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class Admission(Protocol):
    def hold(self, reason: str | None) -> None:
        """Refuse new messages (retry later) while `reason` is set; None admits again."""
