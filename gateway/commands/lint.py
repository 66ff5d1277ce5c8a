"""`xrgw lint DOC...`: report pairs of definitions that can match the same message, each
with an example message (one JSON object a line), then their count.

Everything goes to stdout, as with `xrgw validate`: the problems of the documents, the
overlaps and the summary are the command's report, and both commands' reports can be
piped or captured the same way. A line that starts with `{` is an overlap."""

from __future__ import annotations

import argparse
import json
import sys

from gateway.commands.loading import load_definitions

NAME = "lint"
HELP = "find definitions that can match the same message"
EXAMPLES = """\
  xrgw lint store.xreg.json                    overlapping pairs, each with a witness message
  xrgw lint --strict definitions/              exit 1 when any pair overlaps (for CI)
  xrgw lint defs/ | grep '^{' | jq .example    only the witness messages
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("docs", nargs="+")
    parser.add_argument("--strict", action="store_true", help="exit 1 when overlaps exist")


def execute(args: argparse.Namespace) -> int:
    from gateway.matching.lint import find_overlaps

    catalog = load_definitions(args.docs, sys.stdout)
    if catalog is None:
        return 1
    overlaps = find_overlaps(list(catalog.messages()))
    for overlap in overlaps:
        print(json.dumps(overlap.to_json(), ensure_ascii=False))
    print(f"{len(overlaps)} overlapping pair(s)")
    return 1 if overlaps and args.strict else 0
