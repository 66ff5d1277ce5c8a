"""The `xrgw` command line.

    xrgw validate DOC...            check definitions; exit 1 with every error
    xrgw validate -c CONFIG         check a gateway configuration without running it
    xrgw run -c CONFIG              run the gateway daemon
    xrgw lint DOC...                report definitions that can match the same message
    xrgw match -d DOC... [FILE|-]   native records (JSON Lines) -> one JSON result per line
    xrgw test FILE...               run definition test cases; exit 1 on any failure
    xrgw spark -c CONFIG --source SRC --sink DST ...   the same conversion as a PySpark job
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import TextIO

from gateway.definitions import load_catalog
from gateway.definitions.model import Catalog
from gateway.jsontypes import JSON
from gateway.problems import Problem


def _print_problems(problems: Sequence[Problem], out: TextIO) -> None:
    for problem in problems:
        print(str(problem), file=out)


def _load(docs: Sequence[str], err: TextIO) -> Catalog | None:
    catalog = load_catalog(list(docs))
    _print_problems(catalog.warnings, err)
    if catalog.errors:
        _print_problems(catalog.errors, err)
        print(f"xrgw: {len(catalog.errors)} error(s) in definitions", file=err)
        return None
    return catalog


def cmd_validate(args: argparse.Namespace) -> int:
    if args.config:
        from gateway.config import load_config

        config, problems = load_config(args.config)
        _print_problems(problems, sys.stdout)
        if config is None:
            print(f"invalid: {args.config}: "
                  f"{sum(1 for p in problems if p.is_error)} error(s)")
            return 1
        print(f"valid: {args.config}: {len(config.routes)} route(s), "
              f"{len(config.endpoints)} endpoint(s), "
              f"{sum(1 for _ in config.catalog.messages())} message definition(s), "
              f"{len(problems)} warning(s)")
        if not args.docs:
            return 0
    if not args.docs:
        print("xrgw validate: give documents, or -c CONFIG", file=sys.stderr)
        return 2
    catalog = load_catalog(list(args.docs))
    _print_problems(catalog.problems, sys.stdout)
    messages = sum(1 for _ in catalog.messages())
    errors, warnings = len(catalog.errors), len(catalog.warnings)
    print(
        f"{'invalid' if errors else 'valid'}: {messages} message definition(s), "
        f"{len(catalog.endpoints)} endpoint(s), {errors} error(s), {warnings} warning(s)"
    )
    return 1 if errors else 0


def cmd_lint(args: argparse.Namespace) -> int:
    from gateway.matching.lint import find_overlaps

    catalog = _load(args.docs, sys.stderr)
    if catalog is None:
        return 1
    overlaps = find_overlaps(list(catalog.messages()))
    for overlap in overlaps:
        print(json.dumps(overlap.to_json(), ensure_ascii=False))
    print(f"{len(overlaps)} overlapping pair(s)", file=sys.stderr)
    return 1 if overlaps and args.strict else 0


def cmd_match(args: argparse.Namespace) -> int:
    from gateway.convert import Converter
    from gateway.record import read_records

    docs = list(args.definitions)
    if args.input is None:
        # `-d DOC... FILE`: argparse gives FILE to -d; records files are JSON Lines.
        if len(docs) > 1 and (docs[-1] == "-" or docs[-1].endswith((".jsonl", ".ndjson"))):
            args.input = docs.pop()
        else:
            args.input = "-"
    catalog = _load(docs, sys.stderr)
    if catalog is None:
        return 1
    converter = Converter(
        catalog.messages(), ambiguity=args.ambiguity, validate_schema=args.validate_schema
    )
    stream = sys.stdin if args.input == "-" else open(args.input, encoding="utf-8")  # noqa: SIM115
    try:
        for number, item in read_records(iter(stream)):
            line: dict[str, JSON]
            if isinstance(item, Exception):
                line = {"match": None, "reason": "invalid-record", "detail": str(item),
                        "line": number}
            else:
                line = converter.convert(item, explain=not args.no_explain).to_json()
            sys.stdout.write(json.dumps(line, ensure_ascii=False) + "\n")
    finally:
        if stream is not sys.stdin:
            stream.close()
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from gateway.daemon import run

    return run(args.config)


def cmd_test(args: argparse.Namespace) -> int:
    from gateway.testcases import run_case_files

    return run_case_files(args.files, sys.stdout)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="xrgw", description="xRegistry definition-driven protocol gateway"
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("validate", help="validate xRegistry documents or a gateway config")
    p.add_argument("docs", nargs="*", help="files, directories or registry URLs")
    p.add_argument("-c", "--config", help="a gateway configuration file (YAML)")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("lint", help="find definitions that can match the same message")
    p.add_argument("docs", nargs="+")
    p.add_argument("--strict", action="store_true", help="exit 1 when overlaps exist")
    p.set_defaults(func=cmd_lint)

    p = sub.add_parser("match", help="match native message records (JSON Lines)")
    p.add_argument("-d", "--definitions", nargs="+", required=True, metavar="DOC")
    p.add_argument("input", nargs="?", default=None,
                   help="JSON Lines file, or - for stdin (default); put it before -d, after "
                        "--, or name it *.jsonl / *.ndjson")
    p.add_argument("--ambiguity", choices=["first", "deadletter"], default="first",
                   help="what a tie between equally specific definitions does")
    p.add_argument("--validate-schema", action="store_true",
                   help="break ties by validating the body against inline JSON Schemas")
    p.add_argument("--no-explain", action="store_true",
                   help="do not explain unmatched messages (faster)")
    p.set_defaults(func=cmd_match)

    p = sub.add_parser("run", help="run the gateway daemon")
    p.add_argument("-c", "--config", required=True, help="gateway configuration file (YAML)")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("test", help="run definition test cases")
    p.add_argument("files", nargs="+")
    p.set_defaults(func=cmd_test)

    _add_spark(sub)
    return parser


def _add_spark(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """`xrgw spark ...` (gateway/spark/cli.py); pyspark is imported only when it runs."""
    from gateway.spark.cli import add_parser

    add_parser(sub)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
    except BrokenPipeError:
        return 0
    except OSError as exc:
        print(f"xrgw: {exc}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":
    raise SystemExit(main())
