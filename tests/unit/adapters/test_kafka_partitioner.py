"""The Kafka producer's partitioner: aiokafka's answers (the Java client's murmur2), with
the hashes of recent keys remembered."""

from __future__ import annotations

import pytest
from aiokafka.partitioner import DefaultPartitioner  # type: ignore[import-untyped]
from hypothesis import given
from hypothesis import strategies as st

from adapters.kafka import producer as kafka
from adapters.kafka.producer import _Partitioner

PARTITIONS = st.integers(1, 64).map(lambda n: list(range(n)))


@given(st.lists(st.binary(max_size=64), min_size=1, max_size=20), PARTITIONS)
def test_keyed_records_go_where_aiokafka_sends_them(keys: list[bytes], partitions: list[int]
                                                    ) -> None:
    ours, theirs = _Partitioner(), DefaultPartitioner()
    for key in keys + keys:  # the second round answers from the remembered hashes
        assert ours(key, partitions, partitions) == theirs(key, partitions, partitions)


def test_a_remembered_hash_follows_the_partition_count() -> None:
    partitioner, reference = _Partitioner(), DefaultPartitioner()
    for count in (3, 8, 3):
        partitions = list(range(count))
        assert partitioner(b"store-12", partitions, partitions) == reference(
            b"store-12", partitions, partitions)


def test_without_a_key_any_available_partition() -> None:
    partitioner = _Partitioner()
    picked = {partitioner(None, [0, 1, 2, 3], [1, 3]) for _ in range(200)}
    assert picked == {1, 3}
    assert partitioner(None, [0, 1], []) in (0, 1)  # none available: any of them


def test_remembered_hashes_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kafka, "_HASHES_KEPT", 4)
    partitioner = _Partitioner()
    for n in range(10):
        partitioner(f"key-{n}".encode(), [0, 1], [0, 1])
        assert len(partitioner._hashes) <= 4
