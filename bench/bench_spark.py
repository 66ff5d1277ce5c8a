"""Spark benchmark: compiled path vs a Python-UDF path vs a passthrough, in one run.

    .venv/bin/python -m bench.bench_spark [--records 1000000] [--definitions 10,1000]

Records are MQTT-like (one topic per definition family member, a user property, a JSON
body, a receive time); every definition is `plant/{site}/lineNNN/{device}/temp` with a
constant user property, rendered into type/source/subject. All three jobs read the same
JSON Lines file, in one JVM started like `xrgw spark` starts it (with
`-XX:-DontCompileHugeMethods` unless `--interpreted-huge-methods`), and write to Spark's
`noop` sink:

- compiled: the job's conversion, `Stage.compiled` (the compiled SQL; the job then runs
  the Python stage over the rows it flags, and every bench record is settled in SQL);
- convert (with `--convert`): `Stage.convert`, the one-pass API with the Python stage's
  Arrow UDF in the plan (it receives a null per row here);
- udf: a plain (non-Arrow) Python UDF calling the core converter per record;
- python: the conversion of `--engine python`, `Stage.python_outcomes` with the columns
  a JSON Lines job keeps (outcome, event text, dead letter): the Python stage's Arrow UDF
  over every record;
- passthrough: `from_json` + `to_json` of the record, nothing else;
- least plan (with `--least-plan`): the least plan that converts these records at all,
  written for this bench's catalog alone (no screen, no checks, one candidate per key,
  one shape per attribute): `from_json` of the MQTT fields, the topic split, one
  broadcast join on the line segment, the event text by one `concat` with the body
  spliced in and `random_id`. Not a conversion of arbitrary records: a bound on what a
  plan specialised per catalog shape could reach (docs/spark.md, "What bounds the
  compiled path").

Each definition count gets its own catalog, stage and input file in the same session;
the passthrough is timed again next to each, so every ratio compares runs made under the
same load. The whole job (fresh JVMs, file to file) is `bench.bench_spark_job`.

Targets (issue 36): compiled >= 5x udf, compiled >= 0.5x passthrough, at 10 and at 1,000
definitions.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from gateway.definitions.model import (
    CLOUDEVENTS,
    MessageDefinition,
    OptionConstraint,
    Property,
    Provenance,
)
from gateway.spark.compiler import compile_catalog
from gateway.spark.pipeline import compile_stage
from gateway.spark.records import PARSE_SCHEMA, parse_type
from gateway.spark.session import COMPILE_HUGE_METHODS, JVM_OPTION_KEYS
from gateway.spark.sqlfuncs import random_id


def definitions(count: int) -> list[MessageDefinition]:
    out = []
    for i in range(count):
        mid = f"line{i:03d}"
        out.append(MessageDefinition(
            xid=f"/messagegroups/plant/messages/{mid}", message_id=mid, group_id="plant",
            provenance=Provenance("bench", f"$.{mid}"), protocol="MQTT/5.0",
            protocol_options=(
                OptionConstraint("topic_name", None, Property(
                    "uritemplate", f"plant/{{site}}/line{i:03d}/{{device}}/temp", True)),
                OptionConstraint("user_properties", "kind", Property(
                    "string", "reading", True)),
            ),
            envelope=CLOUDEVENTS,
            envelope_metadata={
                "type": Property("string", f"com.example.plant.line{i:03d}.temp", True),
                "source": Property("uritemplate", "/plants/{site}", True),
                "subject": Property("uritemplate", "{device}", True),
            },
            order=i,
        ))
    return out


def write_records(spark: SparkSession, path: str, records: int, lines: int) -> None:
    n = F.col("id")
    line = F.concat(
        F.lit('{"protocol":"MQTT/5.0","topic_name":"plant/s'), (n % 50).cast("string"),
        F.lit("/line"), F.lpad((n % lines).cast("string"), 3, "0"), F.lit("/d"),
        n.cast("string"),
        F.lit('/temp","qos":1,"user_properties":[{"name":"kind","value":"reading"}],'
              '"received_at":"2026-01-01T00:00:00Z","data":{"v":'), n.cast("string"),
        F.lit(',"unit":"C","ok":true}}'),
    )
    spark.range(records, numPartitions=8).select(line.alias("value")).write.mode(
        "overwrite").text(path)


def timed(label: str, run: object, records: int, repeat: int) -> float:
    """Best of `repeat` runs (the first also warms the JVM's JIT for that plan)."""
    seconds = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        run()  # type: ignore[operator]
        seconds = min(seconds, time.perf_counter() - start)
    rate = records / seconds
    print(f"{label:12s} {seconds:8.2f} s {rate:12,.0f} rec/s", flush=True)
    return rate


def run_catalog(spark: SparkSession, args: argparse.Namespace, count: int) -> None:
    defs = definitions(count)
    catalog = compile_catalog(defs)
    stage = compile_stage(spark, catalog)
    with tempfile.TemporaryDirectory() as tmp:
        path = f"{tmp}/records"
        write_records(spark, path, args.records, count)
        lines = spark.read.text(path).select(F.col("value").alias("record"))
        lines.count()  # warm the file listing and the JVM

        def compiled() -> None:
            stage.compiled(lines).write.format("noop").mode("overwrite").save()

        def convert() -> None:
            stage.convert(lines).write.format("noop").mode("overwrite").save()

        def passthrough() -> None:
            parsed = lines.select(F.from_json("record", PARSE_SCHEMA).alias("r"))
            parsed.select(F.to_json("r").alias("value")).write.format("noop") \
                .mode("overwrite").save()

        def least_plan() -> None:
            types = spark.createDataFrame(
                [(f"line{i:03d}", f"com.example.plant.line{i:03d}.temp") for i in range(count)],
                "line string, type string")
            r = lines.select(F.from_json("record", parse_type(["MQTT/5.0"])).alias("r"))
            parts = r.select(F.split("r.topic_name", "/", -1).alias("s"),
                             F.col("r.received_at").alias("t"), F.col("r.data").alias("d"))
            joined = parts.join(F.broadcast(types), F.col("s")[2] == F.col("line"), "left")
            event = F.concat(
                F.lit('{"specversion":"1.0","id":"'), random_id("least"),
                F.lit('","source":"/plants/'), F.col("s")[1], F.lit('","type":"'),
                F.col("type"), F.lit('","subject":"'), F.col("s")[3], F.lit('","time":"'),
                F.col("t"), F.lit('","datacontenttype":"application/json","data":'),
                F.col("d"), F.lit("}"))
            joined.select(event.alias("event")).write.format("noop").mode("overwrite").save()

        def python() -> None:
            stage.python_outcomes(lines, ("outcome", "event", "deadletter")) \
                .write.format("noop").mode("overwrite").save()

        def udf() -> None:
            from gateway.convert import Converter
            from gateway.record import NativeMessage

            state: dict[str, Converter] = {}

            def convert(line: str) -> str:
                converter = state.get("c")
                if converter is None:
                    converter = state["c"] = Converter(defs)
                import json

                return json.dumps(converter.convert(NativeMessage.from_line(line)).to_json())

            fn = F.udf(convert, "string", useArrow=False)
            lines.select(fn("record").alias("value")).write.format("noop") \
                .mode("overwrite").save()

        print(f"\n{args.records:,} records, {count:,} definitions, {args.master}, "
              f"huge methods {'interpreted' if args.interpreted_huge_methods else 'compiled'}")
        print("\n".join(catalog.explain()[-1:]))
        sample = stage.compiled(lines.limit(1000)).groupBy("_py").count().collect()
        print("paths on a 1,000-record sample:",
              {"python" if r["_py"] else "sql": r["count"] for r in sample})
        rate_pass = timed("passthrough", passthrough, args.records, args.repeat)
        rate_compiled = timed("compiled", compiled, args.records, args.repeat)
        if args.least_plan:
            rate_least = timed("least plan", least_plan, args.records, args.repeat)
            print(f"least plan / passthrough = {rate_least / rate_pass:5.2f}x")
        if args.convert:
            timed("convert", convert, args.records, args.repeat)
        rate_python = timed("python", python, args.records, args.repeat)
        rate_udf = timed("python udf", udf, args.records, args.repeat)
        print(f"compiled / udf         = {rate_compiled / rate_udf:5.2f}x (target >= 5)")
        print(f"compiled / passthrough = {rate_compiled / rate_pass:5.2f}x (target >= 0.5)")
        print(f"python / udf           = {rate_python / rate_udf:5.2f}x; "
              f"compiled / python = {rate_compiled / rate_python:5.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--definitions", default="10,1000",
                        help="definition counts, comma-separated (one catalog each)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--convert", action="store_true",
                        help="also time Stage.convert (the Python stage UDF in the plan)")
    parser.add_argument("--least-plan", action="store_true",
                        help="also time the least plan for this catalog (a bound, not a "
                             "conversion)")
    parser.add_argument("--interpreted-huge-methods", action="store_true",
                        help="start the JVM without -XX:-DontCompileHugeMethods (a plain "
                             "spark-submit)")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a Spark SQL setting for every run (compare code generation "
                             "limits, say)")
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (SparkSession.builder.master(args.master).config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.driver.memory", "4g"))
    if not args.interpreted_huge_methods:
        # The JVM options `xrgw spark` starts its session with (`session.get_session`).
        for key in JVM_OPTION_KEYS:
            builder = builder.config(key, COMPILE_HUGE_METHODS)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    for setting in args.conf:
        key, _, value = setting.partition("=")
        spark.conf.set(key, value)
    for count in [int(c) for c in args.definitions.split(",") if c]:
        run_catalog(spark, args, count)
    spark.stop()


if __name__ == "__main__":
    main()
