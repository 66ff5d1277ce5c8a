"""`xrgw validate DOC...` / `xrgw validate -c CONFIG`: check definitions or a gateway
configuration without running anything; exit 1 with every error.

Problems print as `FILE:LINE:COL: severity: message (JSON path) (fix: ...)`, or without
`:LINE:COL` where the position is not known; `--format json` writes them as one JSON
array on stdout instead, and the verdict line goes to stderr. `--no-env` checks a config
as it is written, away from the machine it is meant for: no environment variables, no
secret or TLS files (see `gateway.config.load_config`). Without it every endpoint's
adapter is also built as `run` builds it (options, TLS, NATS creds / NKey seed files).

`--connect` reaches every endpoint (DNS, TCP, TLS, login, topic or stream) and prints one
result per endpoint at its place in the config; `--strict` makes warnings fail."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, TextIO, cast

from gateway.commands.loading import FORMATS, Report
from gateway.definitions import load_catalog

if TYPE_CHECKING:
    from gateway.commands.preflight import Prober
    from gateway.config import GatewayConfig

NAME = "validate"
HELP = "validate xRegistry documents or a gateway config"
EXAMPLES = """\
  xrgw validate store.xreg.json                 check definitions (files, dirs, registry URLs)
  xrgw validate https://registry.example.com    check a registry's export
  xrgw validate -c /etc/xrgw/config.yaml        check a gateway config without running it
  xrgw validate --no-env -c config.yaml         check it on a workstation: no env, no secrets
  xrgw validate --format json -c config.yaml    problems as a JSON array (editors, CI)
  xrgw validate --observe -c config.yaml        can every route be observed (run --observe)?
  xrgw validate --connect -c config.yaml        preflight: DNS, TCP, TLS, login, topics
  xrgw validate --strict -c config.yaml         warnings fail too (CI)
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
    parser.add_argument("--connect", action="store_true",
                        help="with -c: also reach every endpoint as `run` would: DNS, "
                             "TCP, TLS handshake (days until the certificate expires), "
                             "login (SASL, MQTT CONNACK, NATS auth, AMQP SASL) and the "
                             "topic or stream; one result per endpoint (an init container "
                             "or `helm test` runs this)")
    parser.add_argument("--timeout", type=float, default=5.0,
                        help="with --connect: seconds per network step (default: 5)")
    parser.add_argument("--strict", action="store_true",
                        help="warnings fail too (exit 1): an unused endpoint, a topic that "
                             "does not exist yet, a certificate about to expire")
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
        if config is not None and not args.no_env:
            # Build every adapter as `run` would: what it refuses, validate refuses.
            from gateway.commands.preflight import build_problems
            from gateway.daemon import load_factory

            problems = [*problems, *build_problems(config, load_factory())]
        report.add(problems)
        if args.no_env:
            print(NO_ENV_NOTE, file=sys.stderr)
        errors = sum(1 for p in problems if p.is_error)
        if config is None or errors:
            print(f"invalid: {args.config}: {errors} error(s)", file=verdict)
            return 1
        warnings = len(problems)
        failed = args.strict and warnings > 0
        if args.connect:
            connected = _connect(args, config, report, verdict)
            failed = failed or connected == "error" or (args.strict and connected == "warning")
        print(f"{'invalid' if failed else 'valid'}: {args.config}: {len(config.routes)} "
              f"route(s), {len(config.endpoints)} endpoint(s), "
              f"{sum(1 for _ in config.catalog.messages())} message definition(s), "
              f"{warnings} warning(s){' (--strict)' if failed and args.strict else ''}",
              file=verdict)
        if failed:
            return 1
        if not args.docs:
            return 0
    catalog = load_catalog(list(args.docs))
    report.add(catalog.problems)
    messages = sum(1 for _ in catalog.messages())
    errors, warnings = len(catalog.errors), len(catalog.warnings)
    failed = errors or (args.strict and warnings)
    print(
        f"{'invalid' if failed else 'valid'}: {messages} message definition(s), "
        f"{len(catalog.endpoints)} endpoint(s), {errors} error(s), {warnings} warning(s)",
        file=verdict,
    )
    return 1 if failed else 0


def _connect(args: argparse.Namespace, config: GatewayConfig, report: Report,
             verdict: TextIO) -> str:
    """`--connect`: one result per endpoint, in the report, and a count of them on the
    verdict stream; the worst outcome."""
    from gateway.commands.preflight import connect_checks, connect_line
    from gateway.daemon import load_factory

    factory = load_factory()
    if not hasattr(factory, "preflight"):
        print("xrgw validate: the installed adapters cannot check connections",
              file=sys.stderr)
        return "error"
    results = connect_checks(config, cast("Prober", factory), timeout=args.timeout)
    worst = "ok"
    for checked in results:
        if checked.problem is None:
            if report.form == "json":
                report.entries.append(checked.to_json(config.file))
            else:
                print(connect_line(config.file, checked), file=report.out)
            continue
        if report.form == "json":
            report.entries.append({**checked.problem.to_json(),
                                   **checked.to_json(config.file)})
        else:
            report.add_entry(checked.problem)
        if checked.problem.is_error:
            worst = "error"
        elif worst == "ok":
            worst = "warning"
    outcomes = [c.problem.severity if c.problem else "ok" for c in results]
    print(f"connect: {len(results)} endpoint(s): {outcomes.count('ok')} ok, "
          f"{outcomes.count('warning')} with warnings, {outcomes.count('error')} failed",
          file=verdict)
    return worst
