"""`xrgw match -d DOC... [FILE|-]`: native message records (JSON Lines) in, one JSON
result a line out: the matched definition and its CloudEvent, or the reason and the
nearest definitions."""

from __future__ import annotations

import argparse
import sys

from gateway.commands.loading import load_definitions, make_converter
from gateway.json.text import utf8_json
from gateway.json.values import JSON

NAME = "match"
HELP = "match native message records (JSON Lines)"
EXAMPLES = """\
  xrgw match -d store.xreg.json records.jsonl        one JSON result a line: definition + CloudEvent
  cat records.jsonl | xrgw match -d store.xreg.json  records from stdin
  xrgw match -d defs/ -- dead-letter.jsonl           why a dead letter did not match (explain)
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-d", "--definitions", nargs="+", required=True, metavar="DOC")
    parser.add_argument("input", nargs="?", default=None,
                        help="JSON Lines file, or - for stdin (default); put it before -d, "
                             "after --, or name it *.jsonl / *.ndjson")
    parser.add_argument("--ambiguity", choices=["first", "deadletter"], default="first",
                        help="what a tie between equally specific definitions does")
    parser.add_argument("--validate-schema", action="store_true",
                        help="break ties by validating the body against the definitions' "
                             "schemas (the same as --schema tiebreak)")
    parser.add_argument("--schema", choices=["off", "tiebreak", "enforce"], default=None,
                        help="payload schemas as the route option: enforce dead-letters a "
                             "body that fails its definition's schema (invalid-data)")
    parser.add_argument("--no-explain", action="store_true",
                        help="do not explain unmatched messages (faster)")


def execute(args: argparse.Namespace) -> int:
    from gateway.record import read_records

    docs = list(args.definitions)
    if args.input is None:
        # `-d DOC... FILE`: argparse gives FILE to -d; records files are JSON Lines.
        if len(docs) > 1 and (docs[-1] == "-" or docs[-1].endswith((".jsonl", ".ndjson"))):
            args.input = docs.pop()
        else:
            args.input = "-"
    catalog = load_definitions(docs, sys.stderr)
    if catalog is None:
        return 1
    converter = make_converter(list(catalog.messages()), ambiguity=args.ambiguity,
                               validate_schema=args.validate_schema, schema=args.schema)
    stream = sys.stdin if args.input == "-" else open(args.input, encoding="utf-8")  # noqa: SIM115
    try:
        for number, item in read_records(iter(stream)):
            line: dict[str, JSON]
            if isinstance(item, Exception):
                line = {"match": None, "reason": "invalid-record", "detail": str(item),
                        "line": number}
            else:
                line = converter.convert(item, explain=not args.no_explain).to_json()
            sys.stdout.write(utf8_json(line) + "\n")
    finally:
        if stream is not sys.stdin:
            stream.close()
    return 0
