"""The admin token of the pages with message samples (`admin.token_file`), as the
commands that read them (`xrgw report URL`, `xrgw tap URL`) take it: `--token-file FILE`,
else `$XRGW_ADMIN_TOKEN`, else none."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

ENV = "XRGW_ADMIN_TOKEN"


def add_token_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--token-file", metavar="FILE",
                        help="file holding the admin token (admin.token_file) to send as "
                             f"Authorization: Bearer; default: ${ENV}, if set")


def admin_token(args: argparse.Namespace) -> str | None:
    """The token to send; raises OSError when `--token-file` cannot be read."""
    if args.token_file:
        return Path(args.token_file).read_text(encoding="utf-8").strip()
    return os.environ.get(ENV) or None
