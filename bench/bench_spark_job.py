"""The whole `xrgw spark --batch` job against a plain PySpark copy job and a UDF job.

    .venv/bin/python -m bench.bench_spark_job [--records 400000] [--definitions 200]
        [--master local[2]] [--repeat 2]

Each subject is a fresh process (a fresh JVM: what a user's batch job pays), run on a
file of one record and on a file of `--records` records, file to file (JSON Lines in,
JSON Lines out):

- bare: start a PySpark session as `xrgw spark` does, run one trivial action, stop;
- job: `xrgw spark -d DOC --source file:IN --sink file:OUT --deadletter file:DEAD --batch
  --engine compiled`;
- pyjob: the same with `--engine python` (the default, `auto`, picks one by input size);
- copy: the same session, `from_json` of the record with the job's parse schema and
  `to_json` back, written as text;
- udf: the same session, a plain Python UDF calling the core `Converter` per record.

Fixed cost = the one-record run; marginal cost = N records minus one record. Targets
(issue 36): the job's fixed cost within ~5 s of the bare session's, its marginal cost
>= 5x the UDF job's speed and >= 0.5x the copy job's. Subjects are interleaved per
repetition so that load from other processes hits them alike; ratios are computed per
repetition and the best repetition of each subject is reported too.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SUBJECTS = ("bare", "job", "pyjob", "copy", "udf")


def xreg_document(count: int) -> dict[str, object]:
    """The definitions of `bench.bench_spark.definitions` as an xRegistry document."""
    messages = {}
    for i in range(count):
        mid = f"line{i:03d}"
        messages[mid] = {
            "protocol": "MQTT/5.0",
            "protocoloptions": {
                "topic_name": {"type": "uritemplate",
                               "value": f"plant/{{site}}/line{i:03d}/{{device}}/temp"},
                "user_properties": [{"name": "kind", "value": "reading"}],
            },
            "envelope": "CloudEvents/1.0",
            "envelopemetadata": {
                "type": {"value": f"com.example.plant.line{i:03d}.temp"},
                "source": {"type": "uritemplate", "value": "/plants/{site}"},
                "subject": {"type": "uritemplate", "value": "{device}"},
            },
        }
    return {"messagegroups": {"plant": {"messages": messages}}}


def record_line(n: int, lines: int) -> str:
    """The record `bench.bench_spark.write_records` writes for row `n`."""
    return (f'{{"protocol":"MQTT/5.0","topic_name":"plant/s{n % 50}/line{n % lines:03d}/d{n}'
            f'/temp","qos":1,"user_properties":[{{"name":"kind","value":"reading"}}],'
            f'"received_at":"2026-01-01T00:00:00Z","data":{{"v":{n},"unit":"C","ok":true}}}}')


def write_input(path: Path, records: int, lines: int) -> None:
    path.mkdir(parents=True)
    with open(path / "part-0.jsonl", "w", encoding="utf-8") as out:
        for n in range(records):
            out.write(record_line(n, lines) + "\n")


def _session(master: str):  # type: ignore[no-untyped-def]
    from gateway.spark.session import get_session

    spark = get_session(master)
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def run_subject(subject: str, master: str, doc: str, source: str, sink: str) -> None:
    """One subject in this process (the child side of `timed_subject`)."""
    if subject in ("job", "pyjob"):
        from gateway.cli import main as cli

        engine = "python" if subject == "pyjob" else "compiled"
        code = cli(["spark", "-d", doc, "--source", f"file:{source}", "--sink",
                    f"file:{sink}/events", "--deadletter", f"file:{sink}/dead", "--batch",
                    "--master", master, "--engine", engine])
        raise SystemExit(code)
    spark = _session(master)
    from pyspark.sql import functions as F

    if subject == "bare":
        spark.range(1).count()
        spark.stop()
        return
    lines = spark.read.text(source).select(F.col("value").alias("record"))
    if subject == "copy":
        from gateway.spark.records import PARSE_SCHEMA

        out = lines.select(F.to_json(F.from_json("record", PARSE_SCHEMA)).alias("value"))
    else:
        from gateway.definitions import load_catalog

        definitions = list(load_catalog([doc]).messages())

        def convert(line: str) -> str:
            from gateway.convert import Converter
            from gateway.record import NativeMessage

            converter = _UDF_STATE.get("c")
            if converter is None:
                converter = _UDF_STATE["c"] = Converter(definitions)
            result = converter.convert(NativeMessage.from_line(line)).to_json()
            return json.dumps(result)

        fn = F.udf(convert, "string", useArrow=False)
        out = lines.select(fn("record").alias("value"))
    out.write.mode("overwrite").text(f"{sink}/events")
    spark.stop()


_UDF_STATE: dict[str, Any] = {}


def timed_subject(subject: str, master: str, doc: str, source: Path, sink: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "bench.bench_spark_job", "--subject", subject, "--master",
         master, "--doc", doc, "--source", str(source), "--sink", str(sink)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{subject} failed:\n{done.stderr[-3000:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=400_000)
    parser.add_argument("--definitions", type=int, default=200)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--subjects", default=",".join(SUBJECTS))
    # the child side
    parser.add_argument("--subject", help=argparse.SUPPRESS)
    parser.add_argument("--doc", help=argparse.SUPPRESS)
    parser.add_argument("--source", help=argparse.SUPPRESS)
    parser.add_argument("--sink", help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if args.subject:
        run_subject(args.subject, args.master, args.doc, args.source, args.sink)
        return
    subjects = [s for s in args.subjects.split(",") if s]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        doc = root / "defs.xreg.json"
        doc.write_text(json.dumps(xreg_document(args.definitions)), encoding="utf-8")
        inputs = {1: root / "in1", args.records: root / "inN"}
        for count, path in inputs.items():
            write_input(path, count, args.definitions)
        print(f"{args.records:,} records, {args.definitions:,} definitions, {args.master}, "
              f"fresh process per run", flush=True)
        times: dict[tuple[str, int], list[float]] = {}
        for rep in range(args.repeat):
            for subject in subjects:
                for count, path in inputs.items():
                    if subject == "bare" and count != 1:
                        continue
                    seconds = timed_subject(subject, args.master, str(doc), path,
                                            root / f"out-{subject}-{count}")
                    times.setdefault((subject, count), []).append(seconds)
                    print(f"rep {rep} {subject:5s} {count:>9,} records {seconds:7.2f} s",
                          flush=True)
        report(times, subjects, args.records, args.repeat)


def report(times: dict[tuple[str, int], list[float]], subjects: list[str], records: int,
           repeat: int) -> None:
    def marginal(subject: str, rep: int) -> float:
        return times[(subject, records)][rep] - times[(subject, 1)][rep]

    for rep in range(repeat):
        line = [f"rep {rep}:"]
        jobs = [job for job in ("job", "pyjob") if job in subjects]
        for job in jobs:
            if "bare" in subjects:
                fixed = times[(job, 1)][rep] - times[("bare", 1)][rep]
                line.append(f"{job} fixed - bare = {fixed:+.1f} s (target <= ~5)")
        for subject in ("job", "pyjob", "copy", "udf"):
            if subject in subjects:
                line.append(f"{subject} marginal {marginal(subject, rep):.1f} s "
                            f"({records / max(marginal(subject, rep), 1e-3):,.0f} rec/s)")
        for job in jobs:
            if "udf" in subjects:
                line.append(f"{job}/udf = {marginal('udf', rep) / marginal(job, rep):.2f}x "
                            "(target >= 5)")
            if "copy" in subjects:
                line.append(f"{job}/copy = {marginal('copy', rep) / marginal(job, rep):.2f}x"
                            " (target >= 0.5)")
        print("; ".join(line), flush=True)

if __name__ == "__main__":
    main()
