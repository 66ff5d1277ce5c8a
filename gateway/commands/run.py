"""`xrgw run -c CONFIG`: the gateway daemon."""

from __future__ import annotations

import argparse

NAME = "run"
HELP = "run the gateway daemon"
EXAMPLES = """\
  xrgw run -c /etc/xrgw/config.yaml                  run until SIGTERM (drains, then exits 0)
  XRGW_LOG_LEVEL=debug xrgw run -c gateway.yaml      more detail, whatever log.level says
  xrgw run -c gateway.yaml --log-level debug         the same, as an argument (Helm: extraArgs)
  xrgw run -c gateway.yaml --observe                shadow mode on every route: publish nothing
  kill -HUP <pid>                                    reload the config and definitions
exit codes: 0 stopped, 1 invalid configuration, 3 could not start (e.g. admin port taken)
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-c", "--config", required=True,
                        help="gateway configuration file (YAML)")
    parser.add_argument("--log-level", choices=["debug", "info", "warning", "error"],
                        help="lowest level logged, over log.level and XRGW_LOG_LEVEL")
    parser.add_argument("--observe", action="store_true",
                        help="shadow mode on every route: consume, match and render, publish "
                             "and dead-letter nothing, take nothing from real consumers")


def execute(args: argparse.Namespace) -> int:
    from gateway.daemon import run

    return run(args.config, log_level=args.log_level, observe=args.observe)
