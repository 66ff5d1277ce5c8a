"""`xrgw report SOURCE`: print a conformance report as a table (or JSON).

SOURCE is a running gateway's admin URL, a saved `/conformance` document, the Spark
job's `--report` directory, or a dead-letter file (JSON Lines); see
`gateway/observability/report_sources.py`. The JSON form is the `/conformance` shape,
whose `rows` are the Spark `--report` rows, so a live hour and a backfill compare line by
line."""

from __future__ import annotations

import argparse
import sys

from gateway.commands.admin_token import add_token_option, admin_token
from gateway.json.text import utf8_json

NAME = "report"
HELP = "print the conformance report of a gateway, a Spark --report or a dead-letter file"
EXAMPLES = """\
  xrgw report http://127.0.0.1:9464             a running gateway's live report
  xrgw report out/report                        the Spark job's --report file:out/report
  xrgw report deadletters.jsonl                 dead letters dumped from their endpoint
  xrgw report --format json http://127.0.0.1:9464 > live.json    the /conformance document
  xrgw report --token-file token http://127.0.0.1:9466   pages behind admin.token_file
exit codes: 0 printed, 2 the source could not be read
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", help="admin URL, /conformance JSON file, Spark --report "
                                       "directory or file, or dead-letter JSON Lines file")
    parser.add_argument("--format", choices=("table", "json"), default="table",
                        help="table (default) or the /conformance JSON document")
    add_token_option(parser)


def execute(args: argparse.Namespace) -> int:
    from gateway.observability.report_sources import ReportError, load_report, table

    try:
        report = load_report(args.source, token=admin_token(args))
    except (ReportError, OSError, ValueError) as exc:
        print(f"xrgw report: {exc}", file=sys.stderr)
        return 2
    if args.format == "json":
        sys.stdout.write(utf8_json(report, indent=1) + "\n")
    else:
        sys.stdout.write(table(report))
    return 0
