"""A Kafka reader on PySpark's Python Data Source API, for when Spark's own Kafka
connector (`spark-sql-kafka-0-10`) is not on the classpath.

It yields the connector's columns (`topic`, `partition`, `offset`, `timestamp`, `key`,
`value`, `headers`), so the rest of the job cannot tell the two apart. The streaming
reader's offsets are `{"<partition>": next offset}` dicts that Spark keeps in the
checkpoint; a restart resumes exactly there. The end of a micro-batch is found from the
records themselves (some brokers, Tansu among them, report high watermarks one batch
short), so nothing is skipped or read twice.

Options: `bootstrap.servers`, `topic`, `startingOffsets` (`earliest` | `latest`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.types import StructType

NAME = "xrgw_kafka"
SCHEMA = ("topic string, partition int, offset long, timestamp timestamp, key binary, "
          "value binary, headers array<struct<key:string,value:binary>>")
_POLL_MS = 500


class _Range(InputPartition):
    def __init__(self, partition: int, start: int, end: int) -> None:
        super().__init__((partition, start, end))
        self.partition, self.start, self.end = partition, start, end


def _consumer(servers: str) -> Any:
    from aiokafka import AIOKafkaConsumer  # type: ignore[import-untyped]

    return AIOKafkaConsumer(bootstrap_servers=servers, enable_auto_commit=False,
                            auto_offset_reset="earliest")


async def _stop(consumer: Any) -> None:
    """aiokafka's stop can raise CancelledError from its internal tasks (no group)."""
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await consumer.stop()


async def _partitions(servers: str, topic: str) -> list[int]:
    consumer = _consumer(servers)
    await consumer.start()
    try:
        for _ in range(20):
            found = consumer.partitions_for_topic(topic)
            if found:
                return sorted(found)
            await consumer._client.force_metadata_update()
            await asyncio.sleep(0.1)
        return []
    finally:
        await _stop(consumer)


async def _ends(servers: str, topic: str, start: dict[str, int]) -> dict[str, int]:
    """The next offset after the last record available now, per partition."""
    from aiokafka import TopicPartition

    consumer = _consumer(servers)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, int(p)) for p in start]
        if not tps:
            return {}
        consumer.assign(tps)
        reported = await consumer.end_offsets(tps)
        ends = {str(tp.partition): max(start[str(tp.partition)], reported[tp]) for tp in tps}
        for tp in tps:
            consumer.seek(tp, ends[str(tp.partition)])
        while True:  # read past the reported end until the partitions go quiet
            batch = await consumer.getmany(*tps, timeout_ms=_POLL_MS)
            if not any(batch.values()):
                return ends
            for tp, records in batch.items():
                if records:
                    ends[str(tp.partition)] = max(ends[str(tp.partition)],
                                                  records[-1].offset + 1)
    finally:
        await _stop(consumer)


async def _fetch(servers: str, topic: str, part: _Range) -> list[tuple[Any, ...]]:
    from aiokafka import TopicPartition

    consumer = _consumer(servers)
    await consumer.start()
    rows: list[tuple[Any, ...]] = []
    try:
        tp = TopicPartition(topic, part.partition)
        consumer.assign([tp])
        consumer.seek(tp, part.start)
        position = part.start
        while position < part.end:
            batch = await consumer.getmany(tp, timeout_ms=5000)
            records = batch.get(tp, [])
            if not records:
                raise RuntimeError(
                    f"{topic}[{part.partition}]: offsets {position}..{part.end} are gone")
            for record in records:
                if record.offset >= part.end:
                    break
                rows.append(_row(record))
                position = record.offset + 1
    finally:
        await _stop(consumer)
    return rows


def _row(record: Any) -> tuple[Any, ...]:
    import datetime as dt

    stamp = dt.datetime.fromtimestamp(record.timestamp / 1000, dt.UTC)
    headers = [(k, v) for k, v in (record.headers or ())]
    return (record.topic, record.partition, record.offset, stamp, record.key, record.value,
            headers)


class KafkaDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        return SCHEMA

    def _servers_topic(self) -> tuple[str, str]:
        servers = self.options.get("kafka.bootstrap.servers") or self.options.get(
            "bootstrap.servers")
        topic = self.options.get("subscribe") or self.options.get("topic")
        if not servers or not topic:
            raise ValueError("xrgw_kafka needs the options bootstrap.servers and topic")
        return str(servers), str(topic)

    def reader(self, schema: StructType) -> DataSourceReader:
        return _BatchReader(*self._servers_topic())

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        starting = str(self.options.get("startingOffsets", "earliest"))
        return _StreamReader(*self._servers_topic(), starting)


class _BatchReader(DataSourceReader):
    def __init__(self, servers: str, topic: str) -> None:
        self.servers, self.topic = servers, topic

    def partitions(self) -> Sequence[InputPartition]:
        parts = asyncio.run(_partitions(self.servers, self.topic))
        ends = asyncio.run(_ends(self.servers, self.topic, {str(p): 0 for p in parts}))
        return [_Range(int(p), 0, end) for p, end in sorted(ends.items())]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        assert isinstance(partition, _Range)
        yield from asyncio.run(_fetch(self.servers, self.topic, partition))


class _StreamReader(DataSourceStreamReader):
    def __init__(self, servers: str, topic: str, starting: str) -> None:
        self.servers, self.topic, self.starting = servers, topic, starting
        self._last: dict[str, int] | None = None

    def initialOffset(self) -> dict[str, int]:
        parts = asyncio.run(_partitions(self.servers, self.topic))
        start = {str(p): 0 for p in parts}
        if self.starting == "latest":
            return asyncio.run(_ends(self.servers, self.topic, start))
        return start

    def latestOffset(self, start: dict[str, int] | None = None,
                     limit: object = None) -> dict[str, int]:
        if start is None:  # Spark < 4.2 does not pass the start
            start = self._last if self._last is not None else self.initialOffset()
        parts = asyncio.run(_partitions(self.servers, self.topic))
        begin = {str(p): int(start.get(str(p), 0)) for p in parts}
        self._last = asyncio.run(_ends(self.servers, self.topic, begin))
        return self._last

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        return [_Range(int(p), int(start.get(p, 0)), int(e)) for p, e in sorted(end.items())
                if int(e) > int(start.get(p, 0))]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        assert isinstance(partition, _Range)
        yield from asyncio.run(_fetch(self.servers, self.topic, partition))

    def commit(self, end: dict[str, int]) -> None:
        pass  # offsets live in Spark's checkpoint; nothing to commit to the broker
