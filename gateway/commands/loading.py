"""Loading shared by the subcommands: xRegistry documents and gateway configurations,
with every problem found on the way printed one a line."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, TextIO

from gateway.definitions import load_catalog
from gateway.definitions.model import Catalog
from gateway.problems import Problem

if TYPE_CHECKING:
    from gateway.config import GatewayConfig


def print_problems(problems: Iterable[Problem], out: TextIO) -> None:
    for problem in problems:
        print(str(problem), file=out)


def load_definitions(docs: Sequence[str], err: TextIO) -> Catalog | None:
    """The catalog of `docs` (files, directories or registry URLs), its warnings printed
    to `err`; None, with its errors and their count printed, when it has errors."""
    catalog = load_catalog(list(docs))
    print_problems(catalog.warnings, err)
    if catalog.errors:
        print_problems(catalog.errors, err)
        print(f"xrgw: {len(catalog.errors)} error(s) in definitions", file=err)
        return None
    return catalog


def load_gateway_config(path: str, out: TextIO) -> tuple[GatewayConfig | None, list[Problem]]:
    """`gateway.config.load_config(path)` with its problems printed to `out`."""
    # Imported here: the config layer (jsonschema, the endpoint specs) is only needed by
    # the subcommands that take -c.
    from gateway.config import load_config

    config, problems = load_config(path)
    print_problems(problems, out)
    return config, problems
