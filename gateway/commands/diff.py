"""`xrgw diff OLD NEW [--replay RECORDS...]`: what a change to a catalog does before it
ships - the definitions (and endpoints) added, removed or changed (by xid, field by
field), the lint findings it introduces (overlapping pairs with their witness message,
warnings) and, with `--replay`, what each record does under OLD and under NEW
(`gateway/catalogdiff`).

OLD and NEW are each a file, a directory or a registry URL, as `xrgw validate` reads them.
Exit codes, as `diff(1)` has them, so that the command can gate a catalog's CI:

- 0: nothing changed for the worse (there may be changes);
- 1: something changed for the worse (`gateway/catalogdiff/verdict.py` says what);
- 2: the arguments, a catalog or a replay input that cannot be read.

`--format json` writes one JSON document on stdout (for tools); text goes to a terminal,
coloured when stdout is one (and `NO_COLOR` is unset). Why a catalog cannot be read goes
to stderr in `xrgw validate`'s form; errors in its definitions are findings of the diff.
"""

from __future__ import annotations

import argparse
import os
import sys
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING

from gateway.commands.loading import FORMATS, make_converter, print_problems
from gateway.json.text import utf8_json

if TYPE_CHECKING:
    from gateway.definitions.model import Catalog

NAME = "diff"
HELP = "what a catalog change does: definitions, new lint findings, replayed records"
EXAMPLES = """\
  xrgw diff old.xreg.json new.xreg.json            definitions changed, new overlaps
  xrgw diff old/ new/ --replay records.jsonl       ... and what each record does now
  xrgw diff https://registry.example.com new/      the deployed registry against a change
  xrgw diff old/ new/ --replay deadletters.jsonl   would the change take the dead letters?
  xrgw diff --format json old/ new/ --replay r.jsonl   one JSON document (tools, CI)
  xrgw diff --strict old/ new/                     new warnings fail too
exit codes: 0 nothing for the worse, 1 something for the worse, 2 usage or load problem
"""
EXIT_WORSE = 1
EXIT_USAGE = 2


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("old", metavar="OLD", help="the catalog as it is: a file, a "
                        "directory or a registry URL")
    parser.add_argument("new", metavar="NEW", help="the catalog as it will be")
    parser.add_argument("--replay", nargs="+", action="extend", default=[],
                        metavar="RECORDS",
                        help="JSON Lines files (or directories of *.jsonl, or - for "
                             "stdin) of native records, dead letters the gateway wrote "
                             "or the Spark job's dead-letter lines, replayed under both "
                             "catalogs; give it after OLD NEW")
    parser.add_argument("--schema", choices=["off", "tiebreak", "enforce"], default=None,
                        help="replay with payload schemas as the route option (as `xrgw "
                             "match --schema`): enforce dead-letters a body that fails its "
                             "definition's schema (invalid-data), so a tightened schema "
                             "shows as newly-dead-lettered")
    parser.add_argument("--show", type=int, default=10, metavar="N",
                        help="text: list at most N records of each change (default: 10; "
                             "0: all); --format json lists all")
    parser.add_argument("--strict", action="store_true",
                        help="new lint warnings are for the worse too (exit 1)")
    parser.add_argument("--format", choices=FORMATS, default="text",
                        help="text: sections for people, coloured on a terminal; json: "
                             "one JSON document on stdout (default: text)")


def execute(args: argparse.Namespace) -> int:
    from gateway.catalogdiff.definitions import diff_definitions, diff_endpoints
    from gateway.catalogdiff.findings import diff_findings
    from gateway.catalogdiff.records import read_replay, replay_files
    from gateway.catalogdiff.replay import replay
    from gateway.catalogdiff.verdict import CatalogDiff

    old, new = _load("OLD", args.old), _load("NEW", args.new)
    if old is None or new is None:
        return EXIT_USAGE
    try:
        files = replay_files(args.replay)
    except OSError as exc:
        print(f"xrgw diff: --replay {exc}", file=sys.stderr)
        return EXIT_USAGE
    old_messages, new_messages = list(old.messages()), list(new.messages())
    replayed = None
    if files:
        try:
            replayed = replay(read_replay(files), old_messages, new_messages,
                              datetime.now(UTC),
                              partial(make_converter, schema=args.schema))
        except (OSError, UnicodeDecodeError) as exc:
            print(f"xrgw diff: --replay: {exc}", file=sys.stderr)
            return EXIT_USAGE
    diff = CatalogDiff(args.old, args.new, len(old_messages), len(new_messages),
                       diff_definitions(old_messages, new_messages),
                       diff_findings(old, new, strict=args.strict), replayed,
                       strict=args.strict,
                       endpoints=diff_endpoints(old.endpoints.values(), new.endpoints.values()),
                       old_endpoints=len(old.endpoints), new_endpoints=len(new.endpoints))
    if args.format == "json":
        sys.stdout.write(utf8_json(diff.to_json(), indent=2) + "\n")
    else:
        from gateway.catalogdiff.text import render

        sys.stdout.write(render(diff, colour=_colour(sys.stdout), show=max(args.show, 0)))
    return EXIT_WORSE if diff.worse() else 0


def _load(which: str, source: str) -> Catalog | None:
    """The catalog `source` names; None, with the problems on stderr, when a document of
    it cannot be read at all (missing, not JSON/YAML, a registry that does not answer).
    A catalog with errors in its definitions loads: they are findings of the diff (an
    error NEW has and OLD had not is for the worse)."""
    from gateway.definitions import load_catalog

    catalog = load_catalog([source])
    unreadable = [p for p in catalog.errors if p.path in ("", "$")]
    if unreadable:
        print_problems(unreadable, sys.stderr)
        print(f"xrgw diff: {which} {source}: cannot be read", file=sys.stderr)
        return None
    return catalog


def _colour(out: object) -> bool:
    isatty = getattr(out, "isatty", None)
    return bool(isatty and isatty()) and not os.environ.get("NO_COLOR")
