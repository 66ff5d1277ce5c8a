"""`xrgw spark`: argument handling for the Spark job (the parser lives in gateway/cli.py)."""

from __future__ import annotations

import argparse
import sys

from gateway.definitions.model import MessageDefinition


def _definitions(args: argparse.Namespace) -> tuple[list[MessageDefinition], str] | None:
    """(definitions, ambiguity) from -c CONFIG (its routes' definitions) or -d DOC..."""
    from gateway.cli import _load

    if args.config:
        from gateway.config import load_config

        config, problems = load_config(args.config)
        for problem in problems:
            print(str(problem), file=sys.stderr)
        if config is None:
            return None
        seen: dict[str, MessageDefinition] = {}
        for route in config.routes:
            for definition in route.messages:
                seen.setdefault(definition.xid, definition)
        listed = list(seen.values()) or list(config.catalog.messages())
        ambiguity = config.routes[0].ambiguity if config.routes else "first"
        return listed, args.ambiguity or ambiguity
    catalog = _load(args.definitions, sys.stderr)
    if catalog is None:
        return None
    return list(catalog.messages()), args.ambiguity or "first"


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("spark", help="run the conversion as a PySpark job (batch or stream)")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("-c", "--config", help="daemon config (definitions and routes)")
    source.add_argument("-d", "--definitions", nargs="+", metavar="DOC")
    p.add_argument("--source", required=True, help="kafka://HOST:PORT/TOPIC or file:DIR")
    p.add_argument("--sink", required=True, help="where CloudEvents go")
    p.add_argument("--deadletter", help="where dead letters go")
    p.add_argument("--report", help="file:DIR for the per-definition conformance table")
    p.add_argument("--checkpoint", help="checkpoint DIR (required with --stream)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--batch", action="store_true", help="process what is there (default)")
    mode.add_argument("--stream", action="store_true", help="run until stopped")
    p.add_argument("--master", help="Spark master URL (default: local[*] or spark-submit's)")
    p.add_argument("--format", choices=["json", "parquet"], default="json",
                   help="file format of file: sources and sinks (JSON Lines by default)")
    p.add_argument("--kafka-mode", choices=["structured", "binary"], default=None,
                   help="CloudEvents binding of a Kafka sink (default: the route's mode)")
    p.add_argument("--kafka-records", choices=["native", "json"], default="native",
                   help="Kafka source values: native messages, or record JSON forms")
    p.add_argument("--ambiguity", choices=["first", "deadletter"], default=None)
    p.add_argument("--validate-schema", action="store_true")
    p.add_argument("--no-explain", action="store_true", help="no explanations in dead letters")
    p.add_argument("--explain-plan", action="store_true",
                   help="print which path (sql / python) each definition takes")
    p.set_defaults(func=cmd_spark)


def cmd_spark(args: argparse.Namespace) -> int:
    from gateway.spark.compiler import CompileError
    from gateway.spark.job import JobOptions, run_job
    from gateway.spark.session import get_session

    loaded = _definitions(args)
    if loaded is None:
        return 1
    definitions, ambiguity = loaded
    options = JobOptions(
        source=args.source, sink=args.sink, deadletter=args.deadletter, report=args.report,
        checkpoint=args.checkpoint, stream=args.stream, format=args.format,
        kafka_mode=args.kafka_mode or "structured", kafka_records=args.kafka_records,
        ambiguity=ambiguity, validate_schema=args.validate_schema,
        explain_dead_letters=not args.no_explain,
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
    print(f"{total} record(s): {shown}", file=sys.stderr)
    return 0
