"""`xrgw learn [FILE|-] -o DRAFT`: native message records (JSON Lines) in, a draft
xRegistry document out, with a summary of what was proposed (counts per definition,
cardinality per placeholder) on stdout - text, or JSON with `--format json`.

`xrgw learn -c CONFIG --endpoint ID --count N / --for DURATION` reads the records from a
live consumer endpoint instead, non-destructively as a shadow-mode route does
(`learn_live.py`); the output is the same.

Nothing learned (empty input, nothing but invalid lines) is exit 1 with a message, never a
traceback; invalid lines are skipped, counted and quoted. Arguments that name nothing
learnable (no --count/--for, an unknown, producer-only or unobservable endpoint) are exit
2. The learner itself is `gateway.learn.learn`, over any iterable of records.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from gateway.json.text import utf8_json

if TYPE_CHECKING:
    from gateway.learn import LearnOptions, LearnResult

NAME = "learn"
HELP = ("propose an xRegistry document from native message records (JSON Lines, or a "
        "live consumer endpoint)")
EXAMPLES = """\
  xrgw learn records.jsonl -o draft.xreg.json            learn a draft; summary on stdout
  xrgw learn -c gw.yaml --endpoint plant --for 5m -o d.json   observe a live endpoint 5 min
  xrgw learn -c gw.yaml --endpoint plant --count 10000 -o d.json   ... or 10000 messages
  xrgw learn records.jsonl -o d.json --format json       the summary as JSON
  xrgw learn r.jsonl -o d.json --split-on topic_name[3]  always one definition per value
  xrgw learn r.jsonl -o d.json --merge headers.region    always a placeholder there
  xrgw learn r.jsonl -o d.json --type-prefix com.example.  types com.example.<words>
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("input", nargs="?",
                        help="JSON Lines file of native records, or - for stdin (default)")
    live = parser.add_argument_group(
        "live input", "observe a consumer endpoint of a gateway configuration instead, "
        "taking nothing from its real consumers (as routes[].observe does)")
    live.add_argument("-c", "--config", metavar="CONFIG",
                      help="gateway configuration file (YAML) defining the endpoint")
    live.add_argument("--endpoint", metavar="ID", help="the consumer endpoint to observe")
    live.add_argument("--count", type=_positive, metavar="N",
                      help="stop after N messages")
    live.add_argument("--for", dest="duration", type=_duration, metavar="DURATION",
                      help="stop after DURATION (30s, 5m, 1h); Ctrl-C or SIGTERM stops "
                           "earlier and learns from what was read")
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


def _duration(text: str) -> float:
    from gateway.spec.durations import DURATION_FIX, parse_duration

    seconds = parse_duration(text)
    if seconds is None or seconds <= 0:
        raise argparse.ArgumentTypeError(f"'{text}' is not a duration: {DURATION_FIX}")
    return seconds


def usage_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the combination of input arguments; None: nothing."""
    live = [name for name, value in (("-c", args.config), ("--count", args.count),
                                     ("--for", args.duration)) if value is not None]
    if args.endpoint is None:
        return (None if not live else
                f"{', '.join(live)} read a live endpoint: give --endpoint ID too")
    if args.input is not None:
        return f"give either an input file ({args.input}) or --endpoint, not both"
    if args.config is None:
        return "--endpoint needs -c CONFIG, the gateway configuration defining it"
    if args.count is None and args.duration is None:
        return ("--endpoint needs --count N or --for DURATION (or both): a live endpoint "
                "never ends by itself")
    return None


def execute(args: argparse.Namespace) -> int:
    from gateway.commands.learn_live import EXIT_USAGE, LiveInputError
    from gateway.learn import LearnOptions

    options = LearnOptions(
        max_constant_values=args.max_constant_values, min_group_size=args.min_group_size,
        split_on=frozenset(args.split_on), merge=frozenset(args.merge),
        type_prefix=args.type_prefix, group=args.group)
    problem = usage_problem(args)
    if problem is not None:
        print(f"xrgw learn: {problem}", file=sys.stderr)
        return EXIT_USAGE
    if args.endpoint is not None:
        try:
            result = _learn_endpoint(args, options)
        except LiveInputError as exc:
            print(f"xrgw learn: {exc}", file=sys.stderr)
            return exc.code
        if result is None:
            return 1
    else:
        result = _learn_file(args.input or "-", options)
        if result is None:
            return 1
    return _report(result, options, args)


def _learn_file(path: str, options: LearnOptions) -> LearnResult | None:
    from gateway.learn import learn
    from gateway.record import read_records

    stream = sys.stdin if path == "-" else open(path, encoding="utf-8")  # noqa: SIM115
    try:
        return learn(read_records(iter(stream)), options)
    except UnicodeDecodeError as exc:
        print(f"xrgw learn: {path}: not UTF-8 text ({exc.reason}); give a JSON Lines "
              "file of native records", file=sys.stderr)
        return None
    finally:
        if stream is not sys.stdin:
            stream.close()


def _learn_endpoint(args: argparse.Namespace, options: LearnOptions) -> LearnResult | None:
    """The live input; None (exit 1) when the configuration has errors (printed)."""
    from gateway.commands.learn_live import (
        Limits,
        learn_live,
        observed_endpoint,
        open_observer,
    )
    from gateway.commands.loading import load_gateway_config

    config, _ = load_gateway_config(args.config, sys.stderr)
    if config is None:
        print(f"xrgw learn: {args.config}: invalid configuration", file=sys.stderr)
        return None
    endpoint = observed_endpoint(config, args.endpoint)
    consumer = open_observer(config, endpoint)
    live = learn_live(consumer, endpoint.endpoint_id, Limits(args.count, args.duration),
                      options)
    print(f"xrgw learn: read {live.read} message(s) from endpoint '{endpoint.endpoint_id}' "
          f"in {live.seconds:.1f}s ({live.stopped})", file=sys.stderr)
    return live.result


def _report(result: LearnResult, options: LearnOptions, args: argparse.Namespace) -> int:
    from gateway.learn import draft_document
    from gateway.learn.summary import summary_json, summary_text

    if args.format == "json":
        print(utf8_json(summary_json(result, options), indent=2))
    else:
        print(summary_text(result, options))
    if not result.proposals:
        why = ("no native records in the input" if result.messages == 0 else
               f"no definition has --min-group-size {options.min_group_size} messages")
        print(f"xrgw learn: nothing learned: {why}", file=sys.stderr)
        return 1
    if args.output:
        with open(args.output, "w", encoding="utf-8") as out:
            out.write(utf8_json(draft_document(result.proposals, options), indent=2) + "\n")
    return 0
