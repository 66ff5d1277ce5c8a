"""xRegistry definitions: load, normalize, resolve and validate.

    load_catalog(sources)          files, directories, registry URLs -> Catalog (never raises
                                   on bad input; everything found is in catalog.problems)
    load_catalog_strict(sources)   the same, raising DefinitionsError when there are errors
    read_document(obj, file)       one in-memory document -> Catalog

Several documents merge into one catalog; a later message group or endpoint with the
same id replaces the earlier one (with a warning naming both files).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from gateway.definitions.catalog import assemble
from gateway.definitions.model import Catalog
from gateway.definitions.sources import (
    DEFAULT_TIMEOUT,
    RawDocument,
    RegistryAccess,
    as_json,
    load_sources,
)
from gateway.spec.problems import DefinitionsError

__all__ = ["load_catalog", "load_catalog_strict", "read_document"]


def load_catalog(
    sources: Sequence[str | Path] | str | Path, *, timeout: float = DEFAULT_TIMEOUT,
    headers: Mapping[str, str] | None = None, ca_file: str | None = None,
    access: Mapping[str, RegistryAccess] | None = None,
) -> Catalog:
    """Load and merge every source: a file (.json, .xreg.json, .cereg, .yaml, .yml), a
    directory (its catalog files, not recursive) or an http(s) registry URL.

    Registry URLs are requested with `headers` and verified with `ca_file` (both for
    every URL), or per URL with `access` (URL -> RegistryAccess), which wins."""
    items = [sources] if isinstance(sources, (str, Path)) else list(sources)
    common = RegistryAccess(headers, ca_file)
    per_url = {str(item): (access or {}).get(str(item), common) for item in items}
    documents, problems = load_sources(items, timeout, per_url)
    return assemble(documents, problems)


def load_catalog_strict(
    sources: Sequence[str | Path] | str | Path, *, timeout: float = DEFAULT_TIMEOUT
) -> Catalog:
    catalog = load_catalog(sources, timeout=timeout)
    if catalog.errors:
        raise DefinitionsError(catalog.errors)
    return catalog


def read_document(obj: object, file: str = "<memory>") -> Catalog:
    """Read one already-parsed document (any JSON-like value; never raises on bad input)."""
    return assemble([RawDocument(file, as_json(obj), (file,))])
