"""`xrgw run -c CONFIG`: the gateway daemon."""

from __future__ import annotations

import argparse

NAME = "run"
HELP = "run the gateway daemon"
EXAMPLES = """\
  xrgw run -c /etc/xrgw/config.yaml                  run until SIGTERM (drains, then exits 0)
  XRGW_LOG_LEVEL=debug xrgw run -c gateway.yaml      more detail, whatever log.level says
  kill -HUP <pid>                                    reload the config and definitions
exit codes: 0 stopped, 1 invalid configuration, 3 could not start (e.g. admin port taken)
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-c", "--config", required=True,
                        help="gateway configuration file (YAML)")


def execute(args: argparse.Namespace) -> int:
    from gateway.daemon import run

    return run(args.config)
