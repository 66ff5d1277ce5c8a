"""settle_heap (gateway/heap.py) in this process, against a stand-in for `gc`:
the order of its calls and the thresholds it sets. tests/unit/core/test_heap.py runs
the real collector in a child process."""

from __future__ import annotations

import pytest

from gateway import heap


class FakeGc:
    def __init__(self, threshold: tuple[int, int, int]) -> None:
        self.threshold = threshold
        self.calls: list[object] = []

    def unfreeze(self) -> None:
        self.calls.append("unfreeze")

    def collect(self) -> int:
        self.calls.append("collect")
        return 0

    def freeze(self) -> None:
        self.calls.append("freeze")

    def get_threshold(self) -> tuple[int, int, int]:
        return self.threshold

    def set_threshold(self, *threshold: int) -> None:
        self.calls.append(threshold)


@pytest.mark.parametrize(("before", "after"), [
    ((700, 10, 10), (300_000, 10, 10)),  # CPython's default: widened
    ((700, 15, 25), (300_000, 15, 25)),  # the older generations are kept as they were
    ((500_000, 3, 7), (500_000, 3, 7)),  # already wider: never narrowed
])
def test_settle_heap_frees_then_freezes_then_widens_the_young_generation(
        monkeypatch: pytest.MonkeyPatch, before: tuple[int, int, int],
        after: tuple[int, int, int]) -> None:
    fake = FakeGc(before)
    monkeypatch.setattr(heap, "gc", fake)
    heap.settle_heap()
    assert fake.calls == ["unfreeze", "collect", "freeze", after]


def test_freeze_new_freezes_without_another_full_collection(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A second settle_heap would unfreeze and walk the whole catalog again (0.86 s at
    # 10,000 definitions) while an HTTP source already listens.
    fake = FakeGc((300_000, 10, 10))
    monkeypatch.setattr(heap, "gc", fake)
    heap.freeze_new()
    assert fake.calls == ["freeze"]
