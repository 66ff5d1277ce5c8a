"""The daemon's collector setting (gateway/heap.py), in a child process: freezing
and thresholds are process-wide and must not leak into the test process."""

import subprocess
import sys
import textwrap


def run_child(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=60, check=True)
    return done.stdout.strip()


def test_settle_heap_freezes_what_exists_and_widens_the_young_generation() -> None:
    out = run_child("""
        import gc
        from gateway.heap import YOUNG_THRESHOLD, settle_heap
        catalog = [[i] for i in range(50_000)]  # lists: always tracked
        settle_heap()
        print(gc.get_freeze_count() >= 50_000, gc.get_threshold()[0] == YOUNG_THRESHOLD,
              gc.is_tracked(catalog[0]))
    """)
    assert out == "True True True"


def test_a_second_settle_lets_what_was_dropped_be_collected() -> None:
    """A reload drops the old catalog: if it held cycles, the next settle collects them
    instead of keeping them frozen forever."""
    out = run_child("""
        import gc, weakref
        from gateway.heap import settle_heap
        class Node: pass
        old = Node(); old.me = old  # a cycle: only the collector frees it
        alive = weakref.ref(old)
        settle_heap()
        del old
        settle_heap()
        print(alive() is None)
    """)
    assert out == "True"
