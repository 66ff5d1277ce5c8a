"""`xrgw learn [FILE|-] -o DRAFT`: native message records (JSON Lines) in, a draft
xRegistry document out, with a summary of what was proposed (counts per definition,
cardinality per placeholder) on stdout - text, or JSON with `--format json`.

Nothing learned (empty input, nothing but invalid lines) is exit 1 with a message, never a
traceback; invalid lines are skipped, counted and quoted. The learner itself is
`gateway.learn.learn`, over any iterable of records (a live endpoint is left for wiring).
"""

from __future__ import annotations

import argparse
import json
import sys

NAME = "learn"
HELP = "propose an xRegistry document from native message records (JSON Lines)"
EXAMPLES = """\
  xrgw learn records.jsonl -o draft.xreg.json            learn a draft; summary on stdout
  xrgw learn records.jsonl -o d.json --format json       the summary as JSON
  xrgw learn r.jsonl -o d.json --split-on topic_name[3]  always one definition per value
  xrgw learn r.jsonl -o d.json --merge headers.region    always a placeholder there
  xrgw learn r.jsonl -o d.json --type-prefix com.example.  types com.example.<words>
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("input", nargs="?", default="-",
                        help="JSON Lines file of native records, or - for stdin (default)")
    parser.add_argument("-o", "--output", metavar="DRAFT",
                        help="write the draft xRegistry document here (default: only the "
                             "summary)")
    parser.add_argument("--format", choices=["text", "json"], default="text",
                        help="the summary: text (default) or one JSON document")
    parser.add_argument("--max-constant-values", type=_positive, default=64, metavar="N",
                        help="a place with at most N word-like values splits into one "
                             "definition per value; more become a placeholder (default 64)")
    parser.add_argument("--min-group-size", type=_positive, default=2, metavar="N",
                        help="leave out definitions seen in fewer than N messages "
                             "(default 2)")
    parser.add_argument("--split-on", action="append", default=[], metavar="PATH",
                        help="always split on this place (topic_name[3], headers.action); "
                             "repeatable")
    parser.add_argument("--merge", action="append", default=[], metavar="PATH",
                        help="always make this place a placeholder; repeatable")
    parser.add_argument("--type-prefix", default="", metavar="PREFIX",
                        help="put before every proposed CloudEvents type")
    parser.add_argument("--group", default="learned", metavar="ID",
                        help="the message group id of the draft (default learned)")


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def execute(args: argparse.Namespace) -> int:
    from gateway.learn import LearnOptions, draft_document, learn
    from gateway.learn.summary import summary_json, summary_text
    from gateway.record import read_records

    options = LearnOptions(
        max_constant_values=args.max_constant_values, min_group_size=args.min_group_size,
        split_on=frozenset(args.split_on), merge=frozenset(args.merge),
        type_prefix=args.type_prefix, group=args.group)
    stream = sys.stdin if args.input == "-" else open(args.input, encoding="utf-8")  # noqa: SIM115
    try:
        result = learn(read_records(iter(stream)), options)
    except UnicodeDecodeError as exc:
        print(f"xrgw learn: {args.input}: not UTF-8 text ({exc.reason}); give a JSON Lines "
              "file of native records", file=sys.stderr)
        return 1
    finally:
        if stream is not sys.stdin:
            stream.close()
    if args.format == "json":
        print(json.dumps(summary_json(result, options), indent=2, ensure_ascii=False))
    else:
        print(summary_text(result, options))
    if not result.proposals:
        why = ("no native records in the input" if result.messages == 0 else
               f"no definition has --min-group-size {options.min_group_size} messages")
        print(f"xrgw learn: nothing learned: {why}", file=sys.stderr)
        return 1
    if args.output:
        with open(args.output, "w", encoding="utf-8") as out:
            json.dump(draft_document(result.proposals, options), out, indent=2,
                      ensure_ascii=False)
            out.write("\n")
    return 0
