"""`admin.readiness`: what takes the gateway out of rotation (`/readyz`). What each value
means is `gateway.observability.readiness`'s, which judges it."""

from __future__ import annotations

from typing import Literal

ReadinessPolicy = Literal["all", "sources", "none"]
POLICIES: tuple[ReadinessPolicy, ...] = ("all", "sources", "none")

__all__ = ["POLICIES", "ReadinessPolicy"]
