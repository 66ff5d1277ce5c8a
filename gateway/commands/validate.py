"""`xrgw validate DOC...` / `xrgw validate -c CONFIG`: check definitions or a gateway
configuration without running anything; exit 1 with every error.

Problems print as `FILE:LINE:COL: severity: message (JSON path) (fix: ...)`, or without
`:LINE:COL` where the position is not known; `--format json` writes them as one JSON
array on stdout instead, and the verdict line goes to stderr. `--no-env` checks a config
as it is written, away from the machine it is meant for: no environment variables, no
secret or TLS files (see `gateway.config.load_config`)."""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from gateway.commands.loading import FORMATS, Report
from gateway.definitions import load_catalog

NAME = "validate"
HELP = "validate xRegistry documents or a gateway config"
EXAMPLES = """\
  xrgw validate store.xreg.json                 check definitions (files, dirs, registry URLs)
  xrgw validate https://registry.example.com    check a registry's export
  xrgw validate -c /etc/xrgw/config.yaml        check a gateway config without running it
  xrgw validate --no-env -c config.yaml         check it on a workstation: no env, no secrets
  xrgw validate --format json -c config.yaml    problems as a JSON array (editors, CI)
  xrgw validate --observe -c config.yaml        can every route be observed (run --observe)?
"""
NO_ENV_NOTE = ("note: --no-env: environment variables, secret files and TLS files were not "
               "checked")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("docs", nargs="*", help="files, directories or registry URLs")
    parser.add_argument("-c", "--config", help="a gateway configuration file (YAML)")
    parser.add_argument("--no-env", action="store_true",
                        help="check the config's structure and references only: leave "
                             "${VAR} unread (defaults are used), do not read secret or "
                             "TLS files")
    parser.add_argument("--observe", action="store_true",
                        help="with -c: check the config as `xrgw run --observe` runs it "
                             "(every route in shadow mode)")
    parser.add_argument("--format", choices=FORMATS, default="text",
                        help="text: one problem a line (FILE:LINE:COL: severity: message); "
                             "json: one JSON array of problems on stdout, the verdict on "
                             "stderr (default: text)")


def execute(args: argparse.Namespace) -> int:
    if not args.docs and not args.config:
        print("xrgw validate: give documents, or -c CONFIG", file=sys.stderr)
        return 2
    report = Report(sys.stdout, args.format)
    # The verdict lines are for people; in JSON form stdout holds only the array.
    verdict = sys.stdout if args.format == "text" else sys.stderr
    code = _execute(args, report, verdict)
    report.finish()
    return code


def _execute(args: argparse.Namespace, report: Report, verdict: TextIO) -> int:
    if args.config:
        # Imported here: the config layer (jsonschema, the endpoint specs) is only needed
        # with -c.
        from gateway.config import load_config

        config, problems = load_config(args.config, check_environment=not args.no_env,
                                       observe=args.observe)
        report.add(problems)
        if args.no_env:
            print(NO_ENV_NOTE, file=sys.stderr)
        if config is None:
            print(f"invalid: {args.config}: "
                  f"{sum(1 for p in problems if p.is_error)} error(s)", file=verdict)
            return 1
        print(f"valid: {args.config}: {len(config.routes)} route(s), "
              f"{len(config.endpoints)} endpoint(s), "
              f"{sum(1 for _ in config.catalog.messages())} message definition(s), "
              f"{len(problems)} warning(s)", file=verdict)
        if not args.docs:
            return 0
    catalog = load_catalog(list(args.docs))
    report.add(catalog.problems)
    messages = sum(1 for _ in catalog.messages())
    errors, warnings = len(catalog.errors), len(catalog.warnings)
    print(
        f"{'invalid' if errors else 'valid'}: {messages} message definition(s), "
        f"{len(catalog.endpoints)} endpoint(s), {errors} error(s), {warnings} warning(s)",
        file=verdict,
    )
    return 1 if errors else 0
