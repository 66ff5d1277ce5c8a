"""Streaming: exactly once in the file sink across a restart from the checkpoint."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from gateway.definitions import load_catalog
from gateway.definitions.model import MessageDefinition
from gateway.spark import JobOptions, run_job

EXAMPLES = Path(__file__).resolve().parents[2] / "config" / "examples"


def _events(directory: Path) -> list[dict[str, Any]]:
    """The events of the committed part files. A task writes into `_temporary/` and Spark
    moves the file out when the task commits: reading it there raced the move
    (FileNotFoundError), and it is not output yet anyway."""
    out = []
    for part in _committed_parts(directory):
        out += [json.loads(line) for line in part.read_text().splitlines() if line.strip()]
    return out


def _committed_parts(directory: Path) -> list[Path]:
    """Part files outside `_temporary/`, which is not even walked: Spark deletes those
    folders while the test looks (`Path.rglob` raised FileNotFoundError on one; `os.walk`
    skips a folder that vanished)."""
    found: list[Path] = []
    for root, folders, files in os.walk(directory):
        folders[:] = [name for name in folders if name != "_temporary"]
        found += [Path(root) / name for name in files if name.startswith("part-")]
    return sorted(found)


def _wait(condition: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.5)


def _definitions(name: str) -> list[MessageDefinition]:
    return list(load_catalog([str(EXAMPLES / name)]).messages())


def test_file_stream_restart_exactly_once(tmp_path: Path, spark: SparkSession) -> None:
    source, sink = tmp_path / "in", tmp_path / "out"
    source.mkdir()
    lines = [line for line in (EXAMPLES / "store-messages.jsonl").read_text().splitlines()
             if line.strip()]
    options = JobOptions(source=f"file:{source}", sink=f"file:{sink}",
                         deadletter=f"file:{tmp_path / 'dead'}",
                         checkpoint=str(tmp_path / "ckpt"), stream=True,
                         trigger="available-now")
    definitions = _definitions("store.xreg.json")
    (source / "a.jsonl").write_text("\n".join(lines[:3]) + "\n")
    first = run_job(spark, definitions, options).query
    assert first is not None
    first.awaitTermination(120)
    (source / "b.jsonl").write_text("\n".join(lines[3:]) + "\n")
    second = run_job(spark, definitions, options).query
    assert second is not None
    second.awaitTermination(120)
    events, dead = _events(sink), _events(tmp_path / "dead")
    assert len(events) == 4 and len(dead) == 1
    assert len({e["id"] for e in events}) == 4  # two micro-batches, no repeated ids
    assert sorted(e["type"] for e in events) == sorted(
        ["com.example.sale", "com.example.drawer.opened", "com.example.store.status",
         "com.example.sale"])


@pytest.mark.integration
def test_kafka_stream_exactly_once_across_restart(tmp_path: Path, spark: SparkSession) -> None:
    from harness.brokers import Tansu

    aiokafka = pytest.importorskip("aiokafka")

    async def produce(servers: str, first: int, count: int) -> None:
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=servers)
        await producer.start()
        try:
            for n in range(first, first + count):
                await producer.send_and_wait(
                    "payments", json.dumps({"amount": n}).encode(), key=f"acc-{n}".encode(),
                    headers=[("kind", b"authorized"), ("region", b"eu"),
                             ("content-type", b"application/json")])
        finally:
            await producer.stop()

    definitions = _definitions("kafka-payments.xreg.json")
    sink = tmp_path / "out"
    with Tansu() as kafka:
        servers = kafka.bootstrap_servers
        options = JobOptions(source=f"kafka://{servers}/payments", sink=f"file:{sink}",
                             checkpoint=str(tmp_path / "ckpt"), stream=True)
        asyncio.run(produce(servers, 0, 5))
        query = run_job(spark, definitions, options).query
        assert query is not None
        try:
            asyncio.run(produce(servers, 5, 5))  # arrives while the job runs
            _wait(lambda: len(_events(sink)) >= 10)
        finally:
            query.stop()
        asyncio.run(produce(servers, 10, 5))  # arrives while the job is down
        query = run_job(spark, definitions, options).query
        assert query is not None
        try:
            _wait(lambda: len(_events(sink)) >= 15)
            time.sleep(2)  # a duplicate would show up in the next batch
        finally:
            query.stop()
    events = _events(sink)
    assert len(events) == 15
    assert sorted(e["subject"] for e in events) == sorted(f"acc-{n}" for n in range(15))
    assert len({e["id"] for e in events}) == 15  # uuid5 of topic/partition/offset
    assert all(e["type"] == "com.example.payments.authorized" for e in events)
