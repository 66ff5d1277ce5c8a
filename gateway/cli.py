"""The `xrgw` command line: builds the parser from the subcommand modules in
`gateway/commands/` and runs the one named.

    xrgw validate DOC...            check definitions; exit 1 with every error
    xrgw validate -c CONFIG         check a gateway configuration without running it
    xrgw lint DOC...                report definitions that can match the same message
    xrgw diff OLD NEW [--replay R]  what a catalog change does; exit 1 when it is worse
    xrgw match -d DOC... [FILE|-]   native records (JSON Lines) -> one JSON result per line
    xrgw learn FILE -o DRAFT        native records -> a proposed xRegistry document
    xrgw run -c CONFIG              run the gateway daemon
    xrgw report URL|FILE            the conformance report as a table
    xrgw tap URL                    what the routes do, live (sampled, redacted)
    xrgw test FILE...               run definition test cases; exit 1 on any failure
    xrgw spark -c CONFIG --source SRC --sink DST ...   the same conversion as a PySpark job
    xrgw schema                     the JSON Schema of the config file
    xrgw --version                  release and source revision
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from gateway.buildinfo import version_line
from gateway.commands import (
    Command,
    diff,
    learn,
    lint,
    match,
    report,
    run,
    schema,
    spark,
    tap,
    test,
    validate,
)

#: In the order `xrgw --help` lists them.
COMMANDS: tuple[Command, ...] = (validate, lint, diff, match, learn, run, report, tap, test,
                                 spark, schema)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="xrgw", description="xRegistry definition-driven protocol gateway"
    )
    parser.add_argument("--version", action="version", version=version_line())
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        # Raw: the examples are laid out by hand, one command line each.
        subparser = sub.add_parser(command.NAME, help=command.HELP, description=command.HELP,
                                   epilog="examples:\n" + command.EXAMPLES,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
        command.configure(subparser)
        subparser.set_defaults(execute=command.execute)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.execute(args)
    except BrokenPipeError:
        return 0
    except OSError as exc:
        print(f"xrgw: {exc}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":
    raise SystemExit(main())
