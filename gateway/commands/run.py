"""`xrgw run -c CONFIG`: the gateway daemon."""

from __future__ import annotations

import argparse

NAME = "run"
HELP = "run the gateway daemon"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-c", "--config", required=True,
                        help="gateway configuration file (YAML)")


def execute(args: argparse.Namespace) -> int:
    from gateway.daemon import run

    return run(args.config)
