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
    #: Sequence numbers in the order they were added (a reader adds in log order).
    order: list[int] = field(default_factory=list)

    def add(self, value: bytes | None, position: int | None = None) -> None:
        if position is not None:
            if position in self.positions:
                self.rereads += 1
                return
            self.positions.add(position)
        seq = int(json.loads(value or b"{}")["seq"])
        self.counts[seq] += 1
        self.order.append(seq)

    @property
    def unique(self) -> int:
        return len(self.counts)

    @property
    def duplicates(self) -> int:
        return sum(self.counts.values()) - len(self.counts)

    def missing(self, sent: Sequence[int]) -> list[int]:
        return [s for s in sent if s not in self.counts]

    def out_of_order(self, lanes: int) -> int:
        """Messages that arrived for the first time after a later one of their lane
        (lane = seq % lanes: the unit of order the publishers keep). Redeliveries of
        what already arrived do not count: a consumer that drops duplicates sees the
        first arrivals."""
        newest: dict[int, int] = {}
        seen: set[int] = set()
        late = 0
        for seq in self.order:
            if seq in seen:
                continue
            seen.add(seq)
            lane = seq % lanes
            if seq < newest.get(lane, -1):
                late += 1
            else:
                newest[lane] = seq
        return late

    def duplicated(self, limit: int = 12) -> str:
        """The sequence numbers that came more than once, as ranges ("1700-1763 x2"),
        at most `limit` of them: a window redelivered after a crash is one run, a
        client's resend another."""
        runs: list[tuple[int, int, int]] = []  # first, last, count
        for seq in sorted(s for s, n in self.counts.items() if n > 1):
            times = self.counts[seq]
            if runs and runs[-1][1] == seq - 1 and runs[-1][2] == times:
                runs[-1] = (runs[-1][0], seq, times)
            else:
                runs.append((seq, seq, times))
        shown = [f"{a}-{b} x{n}" if a != b else f"{a} x{n}" for a, b, n in runs[:limit]]
        more = f" (+{len(runs) - limit} runs)" if len(runs) > limit else ""
        return ", ".join(shown) + more if shown else "none"
