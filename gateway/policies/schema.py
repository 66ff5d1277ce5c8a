"""`routes[].schema`: what a route does with its definitions' payload schemas. What each
value does is `gateway.schemas.enforce`'s, which applies it.

    off        schemas are ignored
    tiebreak   (default) a tie between equally specific definitions goes to those whose
               schema the body satisfies
    enforce    tiebreak, and a body its definition's schema rejects is dead-lettered
"""

from __future__ import annotations

from typing import Literal

SchemaPolicy = Literal["off", "tiebreak", "enforce"]
SCHEMA_POLICIES: tuple[SchemaPolicy, ...] = ("off", "tiebreak", "enforce")

__all__ = ["SCHEMA_POLICIES", "SchemaPolicy"]
