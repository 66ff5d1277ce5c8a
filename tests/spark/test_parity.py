"""Parity: the Spark job and `xrgw match` (the core converter) give the same results.

Same records (every protocol; matched, unmatched, ambiguous, invalid) through both; the
CloudEvents and dead letters must be identical, except generated `id` / `time` values,
which must follow the same deterministic rule when the record has a native identity.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from pyspark.sql import SparkSession

from gateway.convert import Converter
from gateway.definitions import load_catalog, read_document
from gateway.definitions.model import MessageDefinition
from gateway.envelope.ids import native_identity
from gateway.envelope.native import context_names, render_native
from gateway.envelope.render import RenderError
from gateway.record import NativeMessage, RecordError
from gateway.spark import JobOptions, compile_catalog, compile_stage, run_job

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "config" / "examples"
DATA = Path(__file__).parent / "data"


def _docs() -> list[str]:
    return [*(str(p) for p in sorted(EXAMPLES.glob("*.xreg.json"))),
            str(DATA / "edge.xreg.json")]


def _records() -> list[str]:
    lines: list[str] = []
    for case_file in sorted(EXAMPLES.glob("*.tests.yaml")):
        for case in yaml.safe_load(case_file.read_text())["cases"]:
            lines.append(json.dumps(case["input"]))
    lines += [line for line in (EXAMPLES / "store-messages.jsonl").read_text().splitlines()
              if line.strip()]
    lines += (DATA / "edge-records.jsonl").read_text().splitlines()
    return lines


@pytest.fixture(scope="module")
def definitions() -> list[MessageDefinition]:
    catalog = load_catalog(_docs())
    assert not catalog.errors, catalog.errors
    return list(catalog.messages())


def _expected(converter: Converter, line: str) -> dict[str, Any]:
    """What `xrgw match` prints for the line (without its `line` number)."""
    try:
        record = NativeMessage.from_line(line)
    except RecordError as exc:
        return {"match": None, "reason": "invalid-record", "detail": str(exc)}
    return converter.convert(record).to_json()


def _is_date(text: str) -> bool:
    """A receive time both sides use (an impossible date falls back to the clock)."""
    try:
        datetime.fromisoformat(text)
    except ValueError:
        return False
    return True


def _generated_ok(line: str, event: dict[str, Any], expected: dict[str, Any]) -> None:
    """`id` and `time` follow the core's rule: equal when deterministic."""
    record = NativeMessage.from_line(line)
    random = len(expected["id"]) == 36 and expected["id"][14] == "4"
    if native_identity(record) is not None or not random:  # derived or declared
        assert event["id"] == expected["id"]
    else:
        assert len(event["id"]) == 36 and event["id"][14] == "4"
    if "time" not in expected:  # a CloudEvent passed through without one
        assert "time" not in event
    elif record.received_at is not None and _is_date(record.received_at):
        assert event["time"] == expected["time"]
    else:
        assert event["time"].endswith(("Z", "+00:00"))


def _assert_same(converter: Converter, rows: list[Any]) -> dict[str, int]:
    """Every outcome row equals the core's result for its record; counts rows per path."""
    paths = {"sql": 0, "python": 0}
    for row in rows:
        paths[row["path"]] += 1
        expected = _expected(converter, row["record"])
        if row["outcome"] == "event":
            assert "cloudevent" in expected, (row["record"], expected)
            event, want = json.loads(row["event"]), dict(expected["cloudevent"])
            _generated_ok(row["record"], event, want)
            for name in ("id", "time"):
                event.pop(name, None)
                want.pop(name, None)
            assert event == want, row["record"]
            assert row["match"] == expected["match"]
            assert dict(row["context"] or {}) == expected["context"]
        else:
            dead = json.loads(row["deadletter"])
            dead.pop("record")
            assert dead == expected, row["record"]
            assert row["outcome"] == expected["reason"]
    return paths


@pytest.mark.parametrize("ambiguity", ["first", "deadletter"])
def test_spark_matches_core(spark: SparkSession, definitions: list[MessageDefinition],
                            ambiguity: str) -> None:
    converter = Converter(definitions, ambiguity=ambiguity)  # type: ignore[arg-type]
    lines = _records()
    stage = compile_stage(spark, compile_catalog(definitions, ambiguity=ambiguity))
    frame = spark.createDataFrame([(line,) for line in lines], "record string")
    rows = stage.convert(frame).collect()
    assert len(rows) == len(lines)
    paths = _assert_same(converter, rows)
    # The compiled path must carry the bulk; only the odd records go to Python.
    assert paths["sql"] >= 15, paths


def test_compiled_then_python_matches_core(spark: SparkSession,
                                          definitions: list[MessageDefinition]) -> None:
    """The batch job's two passes (`Stage.compiled`, then `Stage.python_outcomes` over
    the flagged records only) give `convert`'s rows: the core's results, same paths."""
    converter = Converter(definitions)
    lines = _records()
    stage = compile_stage(spark, compile_catalog(definitions))
    frame = spark.createDataFrame([(line,) for line in lines], "record string")
    compiled = stage.compiled(frame).cache()
    flagged = compiled.filter("_py").select("record")
    rows = compiled.filter("NOT _py").drop("_py").collect() + \
        stage.python_outcomes(flagged).collect()
    compiled.unpersist()
    assert sorted(row["record"] for row in rows) == sorted(lines)
    paths = _assert_same(converter, rows)
    assert paths == _assert_same(converter, stage.convert(frame).collect())
    assert paths["sql"] >= 15 and paths["python"] >= 15, paths


def test_a_job_without_python_rows_writes_the_compiled_events(
        tmp_path: Path, spark: SparkSession, definitions: list[MessageDefinition]) -> None:
    """Every record settled by the compiled path: the job never runs the Python stage,
    and its events are the core's."""
    stage = compile_stage(spark, compile_catalog(definitions))
    frame = spark.createDataFrame([(line,) for line in _records()], "record string")
    sql_only = [row["record"] for row in stage.compiled(frame).filter("NOT _py").collect()]
    source = tmp_path / "in"
    source.mkdir()
    (source / "part.jsonl").write_text("\n".join(sql_only) + "\n")
    result = run_job(spark, definitions, JobOptions(
        source=f"file:{source}", sink=f"file:{tmp_path / 'events'}",
        deadletter=f"file:{tmp_path / 'dead'}", engine="compiled"))
    assert result.counts == {"event": len(sql_only)}
    events = _read_lines(tmp_path / "events")
    assert not (tmp_path / "dead").exists() or not _read_lines(tmp_path / "dead")
    converter = Converter(definitions)
    by_type = sorted((e["type"], e["source"]) for e in events)
    assert by_type == sorted(
        (want["cloudevent"]["type"], want["cloudevent"]["source"])
        for want in (_expected(converter, line) for line in sql_only))


def test_ambiguous_first_vs_deadletter(spark: SparkSession,
                                       definitions: list[MessageDefinition]) -> None:
    line = '{"protocol":"MQTT/3.1.1","topic_name":"tie/1/end","data":{"a":1}}'
    frame = spark.createDataFrame([(line,)], "record string")
    for ambiguity, outcome, path in (("first", "event", "sql"),
                                     ("deadletter", "ambiguous", "python")):
        stage = compile_stage(spark, compile_catalog(definitions, ambiguity=ambiguity))
        (row,) = stage.convert(frame).collect()
        assert (row["outcome"], row["path"]) == (outcome, path)


def test_cli_batch_files(tmp_path: Path, spark: SparkSession) -> None:
    """`xrgw spark` end to end on files: events, dead letters, conformance report."""
    from gateway.cli import main

    source = tmp_path / "in"
    source.mkdir()
    (source / "part.jsonl").write_text((EXAMPLES / "store-messages.jsonl").read_text())
    code = main(["spark", "-d", str(EXAMPLES / "store.xreg.json"),
                 "--source", f"file:{source}", "--sink", f"file:{tmp_path / 'events'}",
                 "--deadletter", f"file:{tmp_path / 'dead'}",
                 "--report", f"file:{tmp_path / 'report'}"])
    assert code == 0
    events = _read_lines(tmp_path / "events")
    dead = _read_lines(tmp_path / "dead")
    assert len(events) + len(dead) == 5 and len(dead) == 1
    assert dead[0]["reason"] == "unmatched" and dead[0]["explain"]
    report = _read_lines(tmp_path / "report")
    totals: dict[str, list[int]] = {}
    for r in report:  # one row per definition and window: sum the windows
        counts = totals.setdefault(r["definition"], [0, 0, 0])
        for i, kind in enumerate(("matched", "unmatched", "invalid")):
            counts[i] += r[kind]
    # Two renders and a CloudEvent passed through; the unmatched one is nearest to it.
    assert totals["/messagegroups/store/messages/cashierdesk"] == [3, 1, 0]


@pytest.mark.parametrize("engine", ["compiled", "python"])
def test_parquet_tables(tmp_path: Path, spark: SparkSession,
                        definitions: list[MessageDefinition], engine: str) -> None:
    source = tmp_path / "in"
    spark.createDataFrame([(line,) for line in _records()], "record string") \
        .write.parquet(str(source))
    result = run_job(spark, definitions, JobOptions(
        source=f"file:{source}", sink=f"file:{tmp_path / 'ce'}",
        deadletter=f"file:{tmp_path / 'dead'}", format="parquet",
        engine=engine))
    assert result.engine == engine
    table = spark.read.parquet(str(tmp_path / "ce"))
    assert {"specversion", "id", "type", "source", "time", "data", "count"} <= set(table.columns)
    assert table.count() == result.counts["event"]
    (row,) = table.filter("source = 'urn:count:7'").collect()
    # edgeflag is declared boolean, but a CloudEvent passed through by a definition that
    # does not declare it could carry any text: the column holds the canonical string.
    assert row["count"] == "7" and row["edgeflag"] == "true" and row["source"] == "urn:count:7"
    assert dict(table.dtypes)["edgeflag"] == "string"


def _read_lines(directory: Path) -> list[dict[str, Any]]:
    out = []
    for part in sorted(directory.rglob("part-*")):
        out += [json.loads(line) for line in part.read_text().splitlines() if line.strip()]
    return out


CATALOGS = sorted(
    p for p in (ROOT / "tests" / "data" / "xregistry-catalogs").rglob("*")
    if p.suffix in (".json", ".cereg")
)
_ADDRESSES = ("topic_name", "topic", "subject", "path")


def _catalog_records(definitions: list[MessageDefinition]) -> list[str]:
    """Per definition with a protocol: its own rendering with two sets of context values
    (one with a body, one with a base64 payload) and a near miss (address changed)."""
    lines: list[str] = []
    for n, definition in enumerate(definitions):
        if definition.protocol is None:
            continue
        names = context_names(definition)
        for variant, body in ((f"v{n}", {"data": {"seq": n, "ok": True}}),
                              (f"w-{n}.x", {"data_base64": "eyJhIjoxfQ=="})):
            context = {name: f"{variant}{i}" for i, name in enumerate(sorted(names))}
            record = render_native(definition, None, context)
            if isinstance(record, RenderError):
                continue
            fields = {**record.to_json(), **body, "received_at": "2026-03-01T12:00:00Z"}
            lines.append(json.dumps(fields))
            for address in _ADDRESSES:
                if isinstance(fields.get(address), str):
                    lines.append(json.dumps({**fields, address: fields[address] + "/zz"}))
                    break
    return lines


def test_spark_matches_core_on_31_real_catalogs(spark: SparkSession) -> None:
    """Every real catalog's definitions, rendered natively and near-missed: the Spark job
    and the core agree on each record (match, context, CloudEvent or dead letter)."""
    assert len(CATALOGS) == 31
    catalog = load_catalog([str(p) for p in CATALOGS])
    assert not catalog.errors, catalog.errors
    definitions = list(catalog.messages())
    compiled = compile_catalog(definitions)
    lines = _catalog_records(definitions)
    frame = spark.createDataFrame([(line,) for line in lines], "record string")
    rows = compile_stage(spark, compiled).convert(frame).collect()
    assert len(rows) == len(lines) > 200
    paths = _assert_same(Converter(definitions), rows)
    # An event from a definition compiled to SQL never needs the Python stage (these
    # records are all plain: canonical times, object bodies, valid base64).
    in_sql = {plan.xid for plan in compiled.plans if plan.python is None}
    events = [row for row in rows if row["outcome"] == "event"]
    assert {row["path"] for row in events if row["match"] in in_sql} == {"sql"}
    assert len(in_sql) >= 50 and paths["sql"] >= 100, paths


def test_generated_ids_are_unique_v4_across_rows_and_runs(
        spark: SparkSession, definitions: list[MessageDefinition]) -> None:
    """Records without a native identity get random version-4 ids: distinct per row,
    and the next batch (a new plan of the same stage, like the job's next micro-batch)
    never repeats the first one's."""
    line = '{"protocol":"MQTT/3.1.1","topic_name":"tie/1/end","data":{"a":1}}'
    frame = spark.createDataFrame([(line,)] * 40, "record string").repartition(2)
    stage = compile_stage(spark, compile_catalog(definitions))
    ids = [json.loads(row["event"])["id"] for _ in range(2)
           for row in stage.convert(frame).select("event").collect()]
    assert len(ids) == len(set(ids)) == 80
    assert {uuid.UUID(i).version for i in ids} == {4}
    assert {uuid.UUID(i).variant for i in ids} == {uuid.RFC_4122}


def _definitions(*messages: dict[str, Any]) -> list[MessageDefinition]:
    doc = {"messagegroups": {"g": {"messages": {f"m{i}": m for i, m in enumerate(messages)}}}}
    catalog = read_document(doc, "typed.json")
    assert not catalog.errors, catalog.errors
    return list(catalog.messages())


def _ce(topic: str, **extra: Any) -> dict[str, Any]:
    return {"protocol": "KAFKA", "protocoloptions": {"topic": topic},
            "envelope": "CloudEvents/1.0",
            "envelopemetadata": {"type": {"value": "t"}, "source": {"value": "/s"}, **extra}}


def test_extension_columns_are_typed_only_where_no_cloudevent_can_bring_text() -> None:
    priority = {"priority": {"type": "integer", "value": 5}}
    # every definition that can pass a CloudEvent through declares priority an integer:
    # a CloudEvent's "5" is known to be an integer, the column is typed
    typed = compile_catalog(_definitions(_ce("a", **priority), _ce("b", **priority)))
    assert typed.extensions == {"priority": "int"} and typed.extension_json == {}
    # one does not: it may pass through "high"; the column holds the canonical text,
    # and the compiled path still writes 5 (a number) into the event text
    mixed = compile_catalog(_definitions(_ce("a", **priority), _ce("b")))
    assert mixed.extensions == {"priority": "string"}
    assert mixed.extension_json == {"priority": "int"}


def _without_generated(event: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in event.items() if k not in ("id", "time")}


@pytest.mark.parametrize("report", [False, True])
def test_the_python_engine_writes_what_the_compiled_one_writes(
        tmp_path: Path, spark: SparkSession, definitions: list[MessageDefinition],
        report: bool) -> None:
    """`--engine python` (every record through the Python stage) gives the job's counts,
    events and dead letters of the compiled engine; with a report too (its outcomes are
    then read persisted, not converted twice)."""
    source = tmp_path / "in"
    source.mkdir()
    (source / "part.jsonl").write_text("\n".join(_records()) + "\n")
    written = {}
    for engine in ("compiled", "python"):
        out = tmp_path / engine
        result = run_job(spark, definitions, JobOptions(
            source=f"file:{source}", sink=f"file:{out / 'events'}",
            deadletter=f"file:{out / 'dead'}",
            report=f"file:{out / 'report'}" if report else None,
            engine=engine))
        events = _read_lines(out / "events")
        dead = _read_lines(out / "dead")
        written[engine] = (result.counts,
                           sorted(json.dumps(_without_generated(e), sort_keys=True)
                                  for e in events),
                           sorted(json.dumps(d, sort_keys=True) for d in dead))
        if report:
            assert _read_lines(out / "report")
        if engine == "python":
            assert result.explain() == [f"{len(definitions)} definition(s), every record "
                                        "through the Python stage (--engine python)"]
    assert written["python"] == written["compiled"]
    counts = written["python"][0]
    assert counts["event"] >= 15 and sum(counts.values()) == len(_records())
    assert len(written["python"][2]) == sum(counts.values()) - counts["event"] > 0
