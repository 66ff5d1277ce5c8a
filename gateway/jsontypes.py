"""Type aliases shared by the core."""

from __future__ import annotations

from typing import TypeAlias

JSON: TypeAlias = "dict[str, JSON] | list[JSON] | str | int | float | bool | None"
JSONObject: TypeAlias = "dict[str, JSON]"
