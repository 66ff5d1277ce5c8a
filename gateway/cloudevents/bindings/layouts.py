"""Functions generated per attribute layout, kept for the layouts seen, bounded.

The events of one definition have the same attributes in the same order (its envelope
renders them in that order), so the code that writes them is generated once per layout
-- the tuple of attribute names -- and kept (`unrolled`, `wireform`). A catalog has few
layouts; a stream of passed-through events with ever new extensions must not grow the
table without bound: past `MAX_LAYOUTS` a new layout gets no function, and the caller
writes its event the general way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["MAX_LAYOUTS", "ByLayout", "Layout"]

Layout = tuple[str, ...]
Made = TypeVar("Made")

#: Layouts kept per table at most.
MAX_LAYOUTS = 1024


class ByLayout(Generic[Made]):
    """What `make` generates for each layout, made on first use."""

    __slots__ = ("_limit", "_made", "_make")

    def __init__(self, make: Callable[[Layout], Made]) -> None:
        self._make = make
        self._made: dict[Layout, Made] = {}
        self._limit = MAX_LAYOUTS  # read now: a test may lower it for one table

    def get(self, layout: Layout) -> Made | None:
        """The function of `layout`, or None once the table is full."""
        found = self._made.get(layout)
        if found is None and len(self._made) < self._limit:
            found = self._made[layout] = self._make(layout)
        return found
