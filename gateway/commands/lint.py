"""`xrgw lint DOC...`: report pairs of definitions that can match the same message, each
with an example message (JSON Lines on stdout)."""

from __future__ import annotations

import argparse
import json
import sys

from gateway.commands.loading import load_definitions

NAME = "lint"
HELP = "find definitions that can match the same message"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("docs", nargs="+")
    parser.add_argument("--strict", action="store_true", help="exit 1 when overlaps exist")


def execute(args: argparse.Namespace) -> int:
    from gateway.matching.lint import find_overlaps

    catalog = load_definitions(args.docs, sys.stderr)
    if catalog is None:
        return 1
    overlaps = find_overlaps(list(catalog.messages()))
    for overlap in overlaps:
        print(json.dumps(overlap.to_json(), ensure_ascii=False))
    print(f"{len(overlaps)} overlapping pair(s)", file=sys.stderr)
    return 1 if overlaps and args.strict else 0
