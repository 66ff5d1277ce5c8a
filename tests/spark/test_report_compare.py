"""A Spark backfill and a live gateway compare line by line: the Spark job's `--report`
rows, its `--deadletter` files read by `xrgw report`, and the live route's `/conformance`
rows for the same messages are the same (definition, matched, unmatched, invalid)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from pyspark.sql import SparkSession

from adapters.memory import MemoryConsumer, MemoryProducer
from gateway.cli import main
from gateway.convert import Converter
from gateway.definitions import load_catalog
from gateway.observability.conformance import Conformance
from gateway.observability.metrics import Metrics
from gateway.observability.report_sources import load_report
from gateway.record import NativeMessage
from gateway.runtime.route import Output, Route

EXAMPLES = Path(__file__).resolve().parents[2] / "config" / "examples"


def _counts(rows: list) -> dict:
    return {r["definition"]: (r["matched"], r["unmatched"], r["invalid"]) for r in rows}


def _live(lines: list[str]) -> dict:
    catalog = load_catalog([EXAMPLES / "store.xreg.json"])
    consumer = MemoryConsumer([NativeMessage.from_line(line) for line in lines],
                              close_when_empty=True)
    conformance = Conformance()
    route = Route("store", "store-mqtt", consumer, Converter(catalog.messages()),
                  [Output("events", "KAFKA", MemoryProducer(), defaults={"topic": "t"})],
                  deadletter=None, metrics=Metrics(),
                  report=conformance.route("store", "store-mqtt", observe=True),
                  observe=True)

    async def scenario() -> None:
        await route.start()
        await asyncio.wait_for(route.wait_finished(), 10)
        await route.stop(grace=5)

    asyncio.run(scenario())
    return _counts(conformance.to_json()["rows"])


def test_spark_report_equals_live_report(tmp_path: Path, spark: SparkSession) -> None:
    text = (EXAMPLES / "store-messages.jsonl").read_text()
    source = tmp_path / "in"
    source.mkdir()
    (source / "part.jsonl").write_text(text)
    code = main(["spark", "-d", str(EXAMPLES / "store.xreg.json"),
                 "--source", f"file:{source}", "--sink", f"file:{tmp_path / 'events'}",
                 "--deadletter", f"file:{tmp_path / 'dead'}",
                 "--report", f"file:{tmp_path / 'report'}"])
    assert code == 0
    spark_rows = _counts(load_report(str(tmp_path / "report"))["rows"])
    live_rows = _live([line for line in text.splitlines() if line.strip()])
    assert spark_rows == live_rows
    assert sum(m for m, _, _ in live_rows.values()) == 4  # the example's four conforming
    # The Spark dead letters, read by `xrgw report`, count what the rows call failures.
    dead = _counts(load_report(str(tmp_path / "dead"))["rows"])
    assert {k: v[1:] for k, v in dead.items()} == {
        k: v[1:] for k, v in live_rows.items() if v[1:] != (0, 0)}
