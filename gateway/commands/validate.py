"""`xrgw validate DOC...` / `xrgw validate -c CONFIG`: check definitions or a gateway
configuration without running anything; exit 1 with every error."""

from __future__ import annotations

import argparse
import sys

from gateway.commands.loading import load_gateway_config, print_problems
from gateway.definitions import load_catalog

NAME = "validate"
HELP = "validate xRegistry documents or a gateway config"
EXAMPLES = """\
  xrgw validate store.xreg.json                 check definitions (files, dirs, registry URLs)
  xrgw validate https://registry.example.com    check a registry's export
  xrgw validate -c /etc/xrgw/config.yaml        check a gateway config without running it
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("docs", nargs="*", help="files, directories or registry URLs")
    parser.add_argument("-c", "--config", help="a gateway configuration file (YAML)")


def execute(args: argparse.Namespace) -> int:
    if args.config:
        config, problems = load_gateway_config(args.config, sys.stdout)
        if config is None:
            print(f"invalid: {args.config}: "
                  f"{sum(1 for p in problems if p.is_error)} error(s)")
            return 1
        print(f"valid: {args.config}: {len(config.routes)} route(s), "
              f"{len(config.endpoints)} endpoint(s), "
              f"{sum(1 for _ in config.catalog.messages())} message definition(s), "
              f"{len(problems)} warning(s)")
        if not args.docs:
            return 0
    if not args.docs:
        print("xrgw validate: give documents, or -c CONFIG", file=sys.stderr)
        return 2
    catalog = load_catalog(list(args.docs))
    print_problems(catalog.problems, sys.stdout)
    messages = sum(1 for _ in catalog.messages())
    errors, warnings = len(catalog.errors), len(catalog.warnings)
    print(
        f"{'invalid' if errors else 'valid'}: {messages} message definition(s), "
        f"{len(catalog.endpoints)} endpoint(s), {errors} error(s), {warnings} warning(s)"
    )
    return 1 if errors else 0
