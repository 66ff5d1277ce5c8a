"""`xrgw schema`: the JSON Schema of the gateway config file, generated from the config
spec, for editors (a YAML language server then checks and completes config files)."""

from __future__ import annotations

import argparse
import sys

NAME = "schema"
HELP = "print the JSON Schema of the config file (for editors)"
EXAMPLES = """\
  xrgw schema > xrgw.schema.json
  # then, first line of a config file, for editors with a YAML language server:
  # yaml-language-server: $schema=./xrgw.schema.json
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", metavar="FILE",
                        help="write to FILE instead of stdout")


def execute(args: argparse.Namespace) -> int:
    from gateway.config import config_json_text

    text = config_json_text()
    if args.output:
        with open(args.output, "w", encoding="utf-8") as out:
            out.write(text)
    else:
        sys.stdout.write(text)
    return 0
