"""What a schema reference resolves to.

A `SchemaDocument` is one schema version as loaded: its format (`JsonSchema/draft-07`,
`Avro/1.11`, `Protobuf/3` ...), its content (a JSON value, text, or bytes for a
`schemabase64` or a binary descriptor set) and the type selected inside it (`:Type`).
`location` says where it came from; it is also the cache key of compiled validators, so
two definitions naming the same version share one validator.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gateway.json.values import JSON


@dataclass(frozen=True)
class SchemaDocument:
    format: str  # as declared, e.g. "JSONSchema/draft-07"; "" when nobody said
    content: JSON | bytes = field(compare=False, hash=False)
    location: str  # XID, file path or URL, plus `:Type` when a type is selected
    type_name: str | None = None

    @property
    def family(self) -> str:
        """`jsonschema`, `avro`, `protobuf` or the lowercased name of another format."""
        return self.format.split("/", 1)[0].strip().lower().replace(" ", "")


@dataclass(frozen=True)
class SchemaResolution:
    """A definition's schema, or why its reference did not resolve (never both)."""

    document: SchemaDocument | None = None
    error: str | None = None
    fix: str = ""
    # A URL still to fetch (`gateway.schemas.fetch`); `document.content` is None until then.
    remote: str | None = None
    # The URL of the registry-served document that named `remote` (None: a document read
    # from a local file): what the fetch policy allows depends on it.
    referrer: str | None = None

    @property
    def resolved(self) -> bool:
        return self.document is not None and self.remote is None
