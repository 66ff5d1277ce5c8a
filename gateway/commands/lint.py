"""`xrgw lint DOC...`: report pairs of definitions that can match the same message, each
with an example message (one JSON object a line), then their count. Templates that need
a separator between adjacent placeholders, or whose repeated names make matching search,
are warnings (problem lines) before the pairs.

Everything goes to stdout, as with `xrgw validate`: the problems of the documents, the
overlaps and the summary are the command's report, and both commands' reports can be
piped or captured the same way. A line that starts with `{` is an overlap.

With `--format json` stdout is one JSON array instead, as `xrgw validate --format json`
writes it: the documents' problems, then one entry per overlap in the same shape (placed
at the first definition of the pair; a warning, an error with `--strict`) with the pair
and the witness message as extra keys; the count goes to stderr.
"""

from __future__ import annotations

import argparse
import sys

from gateway.commands.loading import FORMATS, Report
from gateway.definitions import load_catalog
from gateway.json.text import utf8_json

NAME = "lint"
HELP = "find definitions that can match the same message"
EXAMPLES = """\
  xrgw lint store.xreg.json                    overlapping pairs, each with a witness message
  xrgw lint --strict definitions/              exit 1 when any pair overlaps (for CI)
  xrgw lint defs/ | grep '^{' | jq .example    only the witness messages
  xrgw lint --format json defs/                problems and overlaps as one JSON array
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("docs", nargs="+")
    parser.add_argument("--strict", action="store_true", help="exit 1 when overlaps exist")
    parser.add_argument("--format", choices=FORMATS, default="text",
                        help="text: problems one a line, overlaps as JSON lines; json: one "
                             "JSON array of problems and overlaps (default: text)")


def execute(args: argparse.Namespace) -> int:
    report = Report(sys.stdout, args.format)
    try:
        return _execute(args, report)
    finally:
        report.finish()


def _execute(args: argparse.Namespace, report: Report) -> int:
    from gateway.matching.lint import find_overlaps, overlap_problem, template_problems

    summary = sys.stdout if args.format == "text" else sys.stderr
    catalog = load_catalog(list(args.docs))
    report.add(catalog.warnings)
    if catalog.errors:
        report.add(catalog.errors)
        print(f"xrgw: {len(catalog.errors)} error(s) in definitions", file=summary)
        return 1
    messages = list(catalog.messages())
    report.add(template_problems(messages))
    overlaps = find_overlaps(messages)
    for overlap in overlaps:
        if args.format == "text":
            print(utf8_json(overlap.to_json()))
            continue
        [located] = report.locate([overlap_problem(catalog, overlap, strict=args.strict)])
        report.add_entry(located, **overlap.to_json())
    print(f"{len(overlaps)} overlapping pair(s)", file=summary)
    return 1 if overlaps and args.strict else 0
