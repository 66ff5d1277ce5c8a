"""`xrgw spark -c CONFIG | -d DOC... --source SRC --sink DST ...`: the daemon's conversion
as a PySpark job (batch or stream); see docs/spark.md. pyspark, an optional extra, is
imported only when the job runs."""

from __future__ import annotations

import argparse
import sys

from gateway.commands.loading import load_definitions, load_gateway_config
from gateway.definitions.model import MessageDefinition
from gateway.envelope.partitioning import SOURCE, check_policy

NAME = "spark"
HELP = "run the conversion as a PySpark job (batch or stream)"
EXAMPLES = """\
  xrgw spark -d store.xreg.json --source file:in/ --sink file:out/ --deadletter file:dead/
  xrgw spark -c gateway.yaml --source kafka://kafka:9092/store-deadletter \\
      --sink kafka://kafka:9092/store-events --stream --checkpoint /tmp/ckpt
  xrgw spark -c gateway.yaml --source file:in/ --sink file:out/ --explain-plan
"""


def configure(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("-c", "--config", help="daemon config (definitions and routes)")
    source.add_argument("-d", "--definitions", nargs="+", metavar="DOC")
    parser.add_argument("--source", required=True, help="kafka://HOST:PORT/TOPIC or file:DIR")
    parser.add_argument("--sink", required=True, help="where CloudEvents go")
    parser.add_argument("--deadletter", help="where dead letters go")
    parser.add_argument("--report", help="file:DIR for the per-definition conformance table")
    parser.add_argument("--checkpoint", help="checkpoint DIR (required with --stream)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--batch", action="store_true", help="process what is there (default)")
    mode.add_argument("--stream", action="store_true", help="run until stopped")
    parser.add_argument("--master",
                        help="Spark master URL (default: local[*] or spark-submit's)")
    parser.add_argument("--format", choices=["json", "parquet"], default="json",
                        help="file format of file: sources and sinks (JSON Lines by default)")
    # The job does not read the routes' `mode` (with -c only their definitions and the
    # first route's ambiguity are used): a Kafka sink is structured unless this says binary.
    parser.add_argument("--kafka-mode", choices=["structured", "binary"], default="structured",
                        help="CloudEvents binding of a Kafka sink (default: structured, "
                             "whatever mode the config's routes have)")
    parser.add_argument("--partition-key", default=None, metavar="POLICY",
                        help="key of Kafka sink records whose event has no partitionkey: "
                             "source (the source's unit of order, the default), none, or a "
                             "template such as {storeid}; as routes[].partitionkey (default: "
                             "the config's first route's)")
    parser.add_argument("--kafka-records", choices=["native", "json"], default="native",
                        help="Kafka source values: native messages, or record JSON forms")
    parser.add_argument("--ambiguity", choices=["first", "deadletter"], default=None)
    parser.add_argument("--validate-schema", action="store_true")
    parser.add_argument("--schema", choices=["off", "tiebreak", "enforce"], default=None,
                        help="payload schemas, as the route option (default: the config's "
                             "first route's, else off; --validate-schema means tiebreak)")
    parser.add_argument("--no-explain", action="store_true",
                        help="no explanations in dead letters")
    parser.add_argument("--engine", choices=["auto", "compiled", "python"], default="auto",
                        help="compiled: Spark SQL expressions, the Python stage only for "
                             "what they cannot judge; python: the core converter over "
                             "Arrow batches for every record (no plan to build); auto (the "
                             "default): python for a batch job reading at most 384 MiB of "
                             "files, else compiled (docs/spark.md, \"Engines\")")
    parser.add_argument("--explain-plan", action="store_true",
                        help="print which path (sql / python) each definition takes")


def job_definitions(args: argparse.Namespace) -> tuple[list[MessageDefinition], str] | None:
    """(definitions, ambiguity) from -c CONFIG (its routes' definitions, else all of its
    catalog; the first route's ambiguity) or -d DOC...; --ambiguity overrides either."""
    if args.config:
        config, _ = load_gateway_config(args.config, sys.stderr)
        if config is None:
            return None
        seen: dict[str, MessageDefinition] = {}
        for route in config.routes:
            for definition in route.messages:
                seen.setdefault(definition.xid, definition)
        listed = list(seen.values()) or list(config.catalog.messages())
        ambiguity = config.routes[0].ambiguity if config.routes else "first"
        if args.schema is None and config.routes:
            args.schema = config.routes[0].schema
        if args.partition_key is None and config.routes:
            args.partition_key = config.routes[0].partitionkey
        return listed, args.ambiguity or ambiguity
    catalog = load_definitions(args.definitions, sys.stderr)
    if catalog is None:
        return None
    return list(catalog.messages()), args.ambiguity or "first"


def execute(args: argparse.Namespace) -> int:
    from gateway.spark.compiler import CompileError
    from gateway.spark.job import JobOptions, run_job
    from gateway.spark.session import get_session

    loaded = job_definitions(args)
    if loaded is None:
        return 1
    definitions, ambiguity = loaded
    policy = args.partition_key or SOURCE
    problem = check_policy(policy)
    if problem is not None:
        print(f"xrgw spark: --partition-key {policy!r}: {problem}", file=sys.stderr)
        return 2
    options = JobOptions(
        source=args.source, sink=args.sink, deadletter=args.deadletter, report=args.report,
        checkpoint=args.checkpoint, stream=args.stream, format=args.format,
        kafka_mode=args.kafka_mode, kafka_records=args.kafka_records,
        partition_key=policy,
        ambiguity=ambiguity, validate_schema=args.validate_schema, schema=args.schema,
        explain_dead_letters=not args.no_explain, engine=args.engine,
    )
    try:
        spark = get_session(args.master)
        result = run_job(spark, definitions, options)
    except (CompileError, ValueError) as exc:
        print(f"xrgw spark: {exc}", file=sys.stderr)
        return 1
    if args.explain_plan:
        for line in result.explain():
            print(line, file=sys.stderr)
    if result.query is not None:
        result.query.awaitTermination()
        return 0
    total = sum(result.counts.values())
    shown = ", ".join(f"{k}={v}" for k, v in sorted(result.counts.items()))
    print(f"{total} record(s), {result.engine} engine: {shown}", file=sys.stderr)
    return 0
