"""Loading shared by the subcommands: xRegistry documents and gateway configurations,
with every problem found on the way reported one a line (or as one JSON array)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Literal, TextIO

from gateway.definitions import load_catalog
from gateway.definitions.model import Catalog
from gateway.definitions.positions import with_document_positions
from gateway.json.text import utf8_json
from gateway.spec.problems import Problem

if TYPE_CHECKING:
    from gateway.config import GatewayConfig
    from gateway.convert import Converter
    from gateway.definitions.model import MessageDefinition
    from gateway.matching.matcher import AmbiguityPolicy
    from gateway.policies.schema import SchemaPolicy

Format = Literal["text", "json"]
FORMATS: tuple[Format, ...] = ("text", "json")


class Report:
    """Where a command's problems go: printed as they come, one a line (`text`), or
    collected and written as one JSON array by `finish` (`json`), so that the output is
    a single document a program can read whole. Either way each problem in a local
    document gets its line and column first."""

    def __init__(self, out: TextIO, form: Format = "text") -> None:
        self.out = out
        self.form = form
        self.entries: list[dict[str, object]] = []

    def add(self, problems: Iterable[Problem]) -> None:
        for problem in self.locate(problems):
            self.add_entry(problem)

    @staticmethod
    def locate(problems: Iterable[Problem]) -> list[Problem]:
        return with_document_positions(problems)

    def add_entry(self, problem: Problem, **extra: object) -> None:
        """One problem, with `extra` keys in the JSON form (the text form is the problem's
        line; a command with more to print prints it itself)."""
        if self.form == "json":
            self.entries.append({**problem.to_json(), **extra})
        else:
            print(str(problem), file=self.out)

    def finish(self) -> None:
        if self.form == "json":
            print(utf8_json(self.entries, indent=2), file=self.out)


def print_problems(problems: Iterable[Problem], out: TextIO) -> None:
    Report(out).add(problems)


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


def make_converter(definitions: Sequence[MessageDefinition], *,
                   ambiguity: AmbiguityPolicy = "first", validate_schema: bool = False,
                   schema: SchemaPolicy | None = None) -> Converter:
    """The converter of `xrgw match` and `xrgw diff` (`gateway.convert.Converter`); with
    `schema: enforce` the definitions' remote schemas are fetched first, as a route with
    that policy fetches them at each load."""
    # Imported here: the matcher and renderer are only needed by the commands converting.
    from gateway.convert import Converter

    listed = list(definitions)
    if schema == "enforce":
        from gateway.schemas.enforce import fetch_remote
        from gateway.schemas.fetch import FETCHER

        listed = list(fetch_remote(listed, FETCHER))
    return Converter(listed, ambiguity=ambiguity, validate_schema=validate_schema,
                     schema=schema)
