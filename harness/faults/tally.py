"""Counting numbered messages (`{"seq": N}`) by sequence number."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass
class Tally:
    """Arrivals by sequence number."""

    counts: Counter[int] = field(default_factory=Counter)
    #: Positions (Kafka offset, JetStream sequence) already counted: a reader that gets
    #: the same record twice must not report a duplicate the gateway did not write.
    positions: set[int] = field(default_factory=set)
    rereads: int = 0

    def add(self, value: bytes | None, position: int | None = None) -> None:
        if position is not None:
            if position in self.positions:
                self.rereads += 1
                return
            self.positions.add(position)
        self.counts[int(json.loads(value or b"{}")["seq"])] += 1

    @property
    def unique(self) -> int:
        return len(self.counts)

    @property
    def duplicates(self) -> int:
        return sum(self.counts.values()) - len(self.counts)

    def missing(self, sent: Sequence[int]) -> list[int]:
        return [s for s in sent if s not in self.counts]
