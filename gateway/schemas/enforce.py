"""The route's `schema` policy over its definitions.

    off        schemas are ignored
    tiebreak   (default) a tie between equally specific definitions goes to those whose
               schema the body satisfies; nothing is dead-lettered for its schema
    enforce    tiebreak, and a matched body its definition's schema rejects is
               dead-lettered with reason `invalid-data` and the validator's error path

`schema_findings` is what `validate` and `run` both check before a route with `enforce`
starts: an unresolved reference or a broken schema is an error, a format that cannot be
enforced a warning.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from gateway.definitions.model import MessageDefinition
from gateway.policies.schema import SchemaPolicy
from gateway.schemas.compile import PayloadValidator, SchemaCompileError, Unsupported, compiled
from gateway.schemas.fetch import SchemaFetcher
from gateway.spec.problems import Severity


@dataclass(frozen=True)
class Finding:
    definition: MessageDefinition
    severity: Severity
    message: str
    fix: str


def validator_of(definition: MessageDefinition) -> PayloadValidator | None:
    """The compiled validator of the definition's schema; None when it has none that can
    be enforced (no schema, unresolved, unsupported format or broken)."""
    resolution = definition.schema
    if resolution is None or not resolution.resolved or resolution.document is None:
        return None
    try:
        found = compiled(resolution.document)
    except SchemaCompileError:
        return None
    return None if isinstance(found, Unsupported) else found


def enforced_validators(definitions: Iterable[MessageDefinition], policy: SchemaPolicy
                        ) -> dict[int, PayloadValidator]:
    """Per definition (by identity, as the matcher returns them), what `enforce` checks."""
    if policy != "enforce":
        return {}
    out: dict[int, PayloadValidator] = {}
    for definition in definitions:
        validator = validator_of(definition)
        if validator is not None:
            out[id(definition)] = validator
    return out


def fetch_remote(definitions: Iterable[MessageDefinition], fetcher: SchemaFetcher
                 ) -> tuple[MessageDefinition, ...]:
    """The definitions with the schema documents at URLs fetched (once per URL)."""
    from dataclasses import replace

    out = []
    for definition in definitions:
        resolution = definition.schema
        if resolution is not None and resolution.remote is not None:
            definition = replace(definition, schema=fetcher.materialize(resolution))
        out.append(definition)
    return tuple(out)


def schema_findings(definitions: Iterable[MessageDefinition]) -> Iterator[Finding]:
    for definition in definitions:
        resolution = definition.schema
        if resolution is None:
            continue
        if resolution.error is not None:
            yield Finding(definition, "error", resolution.error, resolution.fix)
            continue
        if resolution.document is None or resolution.remote is not None:
            continue
        try:
            found = compiled(resolution.document)
        except SchemaCompileError as exc:
            yield Finding(definition, "error",
                          f"schema {resolution.document.location}: {exc}",
                          "fix the schema document, or set the route's schema: tiebreak")
            continue
        if isinstance(found, Unsupported):
            yield Finding(definition, "warning", found.reason,
                          "messages of this definition pass unchecked; use a JsonSchema, "
                          "Avro or Protobuf schema to enforce it")
