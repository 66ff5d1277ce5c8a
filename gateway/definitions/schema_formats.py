"""The `format` of schema resources in the loaded documents, by XID.

`dataschemaformat` is "equivalent to the schema 'format' attribute" (rc2): when a message
references a schema of the same registry (`#/schemagroups/g/schemas/s`, a version of it,
or the 2023 `#/schemaGroups/...`) and says no format itself, the schema's own format is
the message's. Only the format is read here; resolving schema documents for validation is
another stage's job.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from gateway.definitions.refs import LEGACY_SEGMENTS, to_xid
from gateway.definitions.sources import RawDocument
from gateway.json.values import JSON


def schema_formats(documents: Iterable[RawDocument]) -> dict[str, str]:
    """XID of each schema (and each of its versions) -> its format."""
    out: dict[str, str] = {}
    for doc in documents:
        if not isinstance(doc.data, dict):
            continue
        for key, groups in doc.data.items():
            if LEGACY_SEGMENTS.get(key, key) != "schemagroups" or not isinstance(groups, dict):
                continue
            for gid, group in groups.items():
                schemas = group.get("schemas") if isinstance(group, dict) else None
                if isinstance(schemas, dict):
                    _schemas(f"/schemagroups/{gid}", schemas, out)
    return out


def _schemas(prefix: str, schemas: Mapping[str, JSON], out: dict[str, str]) -> None:
    for sid, schema in schemas.items():
        if not isinstance(schema, dict):
            continue
        xid = f"{prefix}/schemas/{sid}"
        versions = schema.get("versions")
        version_formats: dict[str, str] = {}
        for vid, version in (versions.items() if isinstance(versions, dict) else ()):
            fmt = version.get("format") if isinstance(version, dict) else None
            if isinstance(fmt, str):
                version_formats[vid] = fmt
        own = schema.get("format")
        default = own if isinstance(own, str) else _only(version_formats.values())
        if default:
            out[xid] = default
        for vid, fmt in version_formats.items():
            out[f"{xid}/versions/{vid}"] = fmt


def _only(values: Iterable[str]) -> str | None:
    distinct = set(values)
    return distinct.pop() if len(distinct) == 1 else None


def format_of(uri: str, formats: Mapping[str, str], bases: Iterable[str] = ()) -> str | None:
    """The format of the schema `uri` references in the loaded documents, if any."""
    # A trailing `:Type` selects a type inside the schema (Protobuf, Avro); not part of
    # the resource's address.
    xid = to_xid(uri.split(":", 1)[0] if uri.startswith("#") else uri, bases)
    return None if xid is None else formats.get(xid)
