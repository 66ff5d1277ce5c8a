"""The garbage collector, set for a process that holds a large catalog and a full window:
the daemon, and each Python worker of a Spark job (`spark/fallback.py`).

CPython's cyclic collector scans a generation when enough container objects were
allocated since its last scan. A running gateway allocates a few dozen containers per
message and keeps thousands of messages in flight, so they survive the young scans and are
promoted; every promotion brings the next full scan closer, and a full scan walks every
object the process holds: the compiled catalog (about 70 objects per definition: 680,000
at 10,000 definitions), the adapters' client libraries, and the window. Measured in one
process converting `bench/bench_matcher.py`'s mqtt messages in batches of 256 with 4,096
kept in flight (building the messages included): 41 µs per message at 10,000 definitions
with the default collector, 27 with this setting; 28 and 18 with one definition.

So, once the routes are built, before they start (and again after each reload):
- what exists then (catalog, clients, config) is moved out of the collector's view
  (`gc.freeze`): it lives until the next reload anyway, and frozen objects are still
  freed by reference counting when they are dropped;
- the young generation is scanned only once `YOUNG_THRESHOLD` more container objects
  exist than at the last scan (CPython counts allocations minus deallocations), rather
  than 700. A full window of the default size (4,096 messages, about 25 tracked
  objects each) stays below it, so in steady state messages are allocated and freed by
  reference counting and no scan walks them; only real growth (or garbage in reference
  cycles) brings a scan. The cost is bounded: at most that many objects wait for one.

At 10,000 (the setting before) the window was larger than the threshold, so every scan
walked thousands of live messages: measured with the passthrough harness (Kafka->NATS and
Kafka->Kafka, 30,000 messages, two runs) 71-88 µs of gateway CPU per message, against
52-62 at 300,000 and 52-71 with the collector off.

The data path makes no reference cycles per message (each adapter's receive path is
checked: `gc.collect()` after 30,000 messages with the collector off found 17-52 objects
in all; the MQTT link and the HTTP ingress each made one per message until they were
mended), so nothing piles up between scans.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 300_000


def settle_heap() -> None:
    """Freeze what the process holds now (after one full collection of what was dropped,
    e.g. the routes a reload replaced) and widen the young generation."""
    gc.unfreeze()  # the previous catalog's objects become collectable again
    gc.collect()
    gc.freeze()
    young, middle, old = gc.get_threshold()
    gc.set_threshold(max(young, YOUNG_THRESHOLD), middle, old)


def freeze_new() -> None:
    """Move what was made since `settle_heap` (the clients the routes connected) out of
    the collector's scans as well, without another full collection. At start-up
    `settle_heap` runs before the routes start, because its full collection walks the
    whole compiled catalog (0.86 s at 10,000 definitions, measured): after the start it
    held the event loop while an HTTP source was already listening and its outputs had
    not connected yet, so senders got 503 for that long."""
    gc.freeze()
