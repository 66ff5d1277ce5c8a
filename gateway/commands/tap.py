"""`xrgw tap URL`: what a running gateway's routes do, live, message by message.

Opens the admin server's `/tap` stream (`gateway/tap`) where the sample pages are served
(the admin address on loopback, `admin.pages_listen` otherwise, with `--token-file` when
`admin.token_file` is set) and prints each message as it settles: the native record in
(redacted as the route's `redact:` and the credential masks say), the definition it
matched and the CloudEvent (or native message) it became, or, for a miss, the nearest
definitions and the check each failed. Filters and sampling are applied by the gateway,
so a busy route sends only what is asked for; a reader that cannot keep up loses lines
(the stream says how many) and never slows the route.

`--format json` writes the stream's lines as they come (NDJSON; `xrgw diff --replay`
reads a saved file); text is for a terminal, coloured when stdout is one.
"""

from __future__ import annotations

import argparse
import os
import sys

from gateway.commands.admin_token import add_token_option, admin_token
from gateway.commands.loading import FORMATS
from gateway.json.text import utf8_json

NAME = "tap"
HELP = "stream what a running gateway's routes do, message by message (sampled, redacted)"
EXAMPLES = """\
  xrgw tap http://127.0.0.1:9464                     every message of every route
  xrgw tap http://127.0.0.1:9464 --outcome unmatched why do messages miss?
  xrgw tap URL --route store-mqtt --definition sale  one route, one definition
  xrgw tap URL --outcome dead-lettered --limit 20    the next 20 dead letters, then exit
  xrgw tap URL --sample 0.01                         1 message in 100
  xrgw tap URL --format json --limit 1000 > t.jsonl  keep them (xrgw diff --replay t.jsonl)
  xrgw tap --token-file token http://127.0.0.1:9466  pages behind admin.token_file
exit codes: 0 the stream ended (limit, gateway stopped, Ctrl-C), 2 it could not be opened
"""
EXIT_UNAVAILABLE = 2


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("url", metavar="URL",
                        help="the admin address serving the sample pages "
                             "(http://127.0.0.1:9464, or admin.pages_listen)")
    parser.add_argument("--route", action="append", default=[], metavar="ROUTE",
                        help="a route (source->targets) or its source endpoint; shell "
                             "patterns; repeat for several (default: all)")
    parser.add_argument("--definition", action="append", default=[], metavar="XID",
                        help="a definition's xid or last part (a miss counts for its "
                             "nearest definition); patterns; repeatable")
    parser.add_argument("--outcome", action="append", default=[], metavar="OUTCOME",
                        help="matched, dead-lettered or a dead-letter reason (unmatched, "
                             "ambiguous, invalid-data, ...); repeatable")
    parser.add_argument("--sample", type=float, default=None, metavar="RATE",
                        help="share of the wanted messages to show, 0 < RATE <= 1, taken "
                             "exactly (0.1: every tenth)")
    parser.add_argument("--limit", type=int, default=None, metavar="N",
                        help="stop after N messages")
    parser.add_argument("--queue", type=int, default=None, metavar="N",
                        help="messages the gateway may hold for this tap before it "
                             "drops (default 1000)")
    parser.add_argument("--format", choices=FORMATS, default="text",
                        help="text (default; coloured on a terminal) or json (the "
                             "stream's NDJSON lines)")
    add_token_option(parser)


def execute(args: argparse.Namespace) -> int:
    from gateway.tap.client import TapError, read_tap, tap_url
    from gateway.tap.text import render_line

    try:
        token = admin_token(args)
    except OSError as exc:
        print(f"xrgw tap: {exc}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    url = tap_url(args.url, routes=args.route, definitions=args.definition,
                  outcomes=args.outcome, sample=args.sample, limit=args.limit,
                  queue=args.queue)
    colour = args.format == "text" and _colour(sys.stdout)
    try:
        for line in read_tap(url, token=token):
            if args.format == "json":
                sys.stdout.write(utf8_json(line, separators=(",", ":")) + "\n")
            else:
                sys.stdout.write(render_line(line, colour=colour) + "\n")
            sys.stdout.flush()
    except TapError as exc:
        print(f"xrgw tap: {exc}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    except KeyboardInterrupt:
        return 0
    return 0


def _colour(out: object) -> bool:
    isatty = getattr(out, "isatty", None)
    return bool(isatty and isatty()) and not os.environ.get("NO_COLOR")
