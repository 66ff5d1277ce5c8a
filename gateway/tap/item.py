"""What a route hands the tap for one message (or one event of an HTTP batch)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from gateway.convert import Conversion
from gateway.record import NativeMessage


class Tapped(NamedTuple):
    """One message's outcome: the record in, its conversion (matched definition,
    CloudEvent, explanation of a miss), the dead-letter reason once settled (None:
    delivered) and what went wrong past the conversion (`failures`: a render or a send),
    plus the native records rendered for `deliver: native` outputs (endpoint, record)."""

    record: NativeMessage
    conversion: Conversion
    reason: str | None = None
    failures: Sequence[str] = ()
    outputs: Sequence[tuple[str, NativeMessage]] = ()

    @property
    def definition(self) -> str | None:
        definition = self.conversion.match.definition
        return definition.xid if definition is not None else None

    @property
    def nearest(self) -> str | None:
        """The matched definition, else the nearest one of the explanation."""
        xid = self.definition
        if xid is None and self.conversion.explain:
            xid = self.conversion.explain[0].definition
        return xid


__all__ = ["Tapped"]
