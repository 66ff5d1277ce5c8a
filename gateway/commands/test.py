"""`xrgw test FILE...`: run definition test cases (`*.tests.yaml`); exit 1 on any
failure."""

from __future__ import annotations

import argparse
import sys

NAME = "test"
HELP = "run definition test cases"
EXAMPLES = """\
  xrgw test store.tests.yaml                 run the cases; exit 1 on any failure
  xrgw test config/examples/*.tests.yaml     several files
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+")


def execute(args: argparse.Namespace) -> int:
    from gateway.commands.testcases import run_case_files

    return run_case_files(args.files, sys.stdout)
