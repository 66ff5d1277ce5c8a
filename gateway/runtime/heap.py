"""The garbage collector, set for a daemon that holds a large catalog and a full window.

CPython's cyclic collector scans a generation when enough container objects were
allocated since its last scan. A running gateway allocates a few dozen containers per
message and keeps thousands of messages in flight, so they survive the young scans and are
promoted; every promotion brings the next full scan closer, and a full scan walks every
object the process holds: the compiled catalog (about 70 objects per definition: 680,000
at 10,000 definitions), the adapters' client libraries, and the window. Measured in one
process converting `bench/bench_matcher.py`'s mqtt messages in batches of 256 with 4,096
kept in flight (building the messages included): 41 µs per message at 10,000 definitions
with the default collector, 27 with this setting; 28 and 18 with one definition.

So, once the routes are built (and again after each reload):
- what exists then (catalog, clients, config) is moved out of the collector's view
  (`gc.freeze`): it lives until the next reload anyway, and frozen objects are still
  freed by reference counting when they are dropped;
- the young generation is scanned every `YOUNG_THRESHOLD` allocations rather than 700, so
  a batch of messages is usually settled and freed by reference counting before a scan
  looks at it. The cost is bounded: at most that many young container objects wait.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 10_000


def settle_heap() -> None:
    """Freeze what the process holds now (after one full collection of what was dropped,
    e.g. the routes a reload replaced) and widen the young generation."""
    gc.unfreeze()  # the previous catalog's objects become collectable again
    gc.collect()
    gc.freeze()
    young, middle, old = gc.get_threshold()
    gc.set_threshold(max(young, YOUNG_THRESHOLD), middle, old)
