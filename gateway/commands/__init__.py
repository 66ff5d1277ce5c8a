"""The `xrgw` subcommands, one module each; `gateway/cli.py` builds the parser from them.

A subcommand module has `NAME` and `HELP` (its parser's name and one-line help),
`EXAMPLES` (command lines with a comment each, shown at the end of its `--help`),
`configure(parser)` (its arguments) and `execute(args) -> exit code`. Heavy imports (the
daemon, pyspark) happen in `execute`, so `xrgw --help` and every other subcommand start
without them. Loading shared by several subcommands is in `loading.py`.
"""

from __future__ import annotations

import argparse
from typing import Protocol


class Command(Protocol):
    """What `gateway/cli.py` needs of a subcommand module."""

    NAME: str
    HELP: str
    EXAMPLES: str

    def configure(self, parser: argparse.ArgumentParser) -> None: ...

    def execute(self, args: argparse.Namespace) -> int: ...
