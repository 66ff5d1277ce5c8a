"""A message definition's schema reference -> the schema version it names.

Run in the definitions stage, without the network: what a reference names inside the
loaded documents (`#/schemagroups/g/schemas/s`, `/schemagroups/.../versions/v`, the
2023 `#/schemaGroups/...`, an absolute URL under a loaded registry) and relative file
references are read here; a reference to anywhere else becomes a `remote` resolution that
`gateway.schemas.fetch` fetches when a route enforces it. A resource reference means its
default version (`meta.defaultversionid`, `defaultversionid`, `isdefault`, else the
last declared). A trailing `:Type` (or `#Type` on a URL or file) selects a type inside an
Avro or Protobuf schema.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urljoin, urlsplit

from gateway.definitions.refs import LEGACY_SEGMENTS, is_absolute, to_xid
from gateway.definitions.schema_model import SchemaDocument, SchemaResolution
from gateway.definitions.sources import RawDocument
from gateway.json.values import JSON, JSONObject

# Keys of a schema version holding its document, in the spellings of rc1..rc4.
_INLINE_KEYS = ("schema", "schemaobject")
_URL_KEYS = ("schemaurl", "schemauri")
_BINARY_SUFFIXES = (".desc", ".pb", ".binpb", ".protoset")
# A schema reached through a file or URL: its format by name, when nobody declared one.
_FORMAT_BY_SUFFIX = {".avsc": "Avro", ".json": "JsonSchema", ".proto": "Protobuf/3",
                     **{s: "Protobuf/3" for s in _BINARY_SUFFIXES}}


@dataclass(frozen=True)
class _Version:
    body: JSONObject
    format: str | None  # the version's, else its schema resource's
    document: str  # the file or URL it was loaded from


class SchemaIndex:
    """Every schema version of the loaded documents, by XID (resources name their default)."""

    def __init__(self, documents: Iterable[RawDocument]) -> None:
        self.versions: dict[str, _Version] = {}
        self.bases: list[str] = []
        for doc in documents:
            self.bases.extend(doc.bases)
            if isinstance(doc.data, dict):
                for key, groups in doc.data.items():
                    if LEGACY_SEGMENTS.get(key, key) == "schemagroups" and isinstance(groups,
                                                                                      dict):
                        self._groups(doc.name, groups)

    def _groups(self, file: str, groups: Mapping[str, JSON]) -> None:
        for gid, group in groups.items():
            schemas = group.get("schemas") if isinstance(group, dict) else None
            if not isinstance(schemas, dict):
                continue
            for sid, schema in schemas.items():
                if isinstance(schema, dict):
                    self._schema(file, f"/schemagroups/{gid}/schemas/{sid}", schema)

    def _schema(self, file: str, xid: str, schema: JSONObject) -> None:
        own_format = _text(schema.get("format"))
        versions = schema.get("versions")
        listed = [(vid, v) for vid, v in (versions.items() if isinstance(versions, dict) else ())
                  if isinstance(v, dict)]
        for vid, version in listed:
            fmt = _text(version.get("format")) or own_format
            self.versions[f"{xid}/versions/{vid}"] = _Version(version, fmt, file)
        if _holds_document(schema):  # the default version's attributes on the resource
            self.versions[xid] = _Version(schema, own_format, file)
            return
        default = _default_version(schema, listed)
        if default is not None:
            self.versions[xid] = self.versions[f"{xid}/versions/{default}"]

    def resolve(self, reference: str, declared_format: str | None, origin: str) -> (
            SchemaResolution):
        """What `reference`, written in the document `origin`, names."""
        ref, type_name = split_type(reference)
        xid = to_xid(ref, self.bases)
        if xid is not None and xid.startswith("/schemagroups/"):
            return self._version(xid, type_name, declared_format, reference, set())
        if xid is not None:
            return SchemaResolution(error=f"'{reference}' names {xid}, not a schema",
                                    fix="point dataschemauri at /schemagroups/<g>/schemas/<s>")
        return self._external(ref, type_name, declared_format, origin)

    def _version(self, xid: str, type_name: str | None, declared: str | None, shown: str,
                 seen: set[str]) -> SchemaResolution:
        version = self.versions.get(xid)
        if version is None:
            known = sorted(k for k in self.versions if "/versions/" not in k)
            return SchemaResolution(
                error=f"schema '{shown}' is not in the loaded documents",
                fix=("name one of " + ", ".join(known[:5])) if known else
                "load the document holding its schemagroups, or embed it as dataschema")
        fmt = declared or version.format or ""
        location = xid + (f":{type_name}" if type_name else "")
        for key in _INLINE_KEYS:
            if key in version.body:
                return SchemaResolution(SchemaDocument(fmt, _parsed(version.body[key]),
                                                       location, type_name))
        encoded = version.body.get("schemabase64")
        if isinstance(encoded, str):
            try:
                raw = base64.b64decode(encoded, validate=True)
            except (binascii.Error, ValueError) as exc:
                return SchemaResolution(error=f"schema '{shown}': schemabase64 is not "
                                        f"base64 ({exc})", fix="re-encode the schema")
            return SchemaResolution(SchemaDocument(fmt, raw, location, type_name))
        for key in _URL_KEYS:
            url = version.body.get(key)
            if isinstance(url, str):
                if xid in seen:
                    return SchemaResolution(error=f"schema '{shown}' refers to itself",
                                            fix=f"give {xid} a schema document")
                target = to_xid(url, self.bases)
                if target is not None and target.startswith("/schemagroups/"):
                    return self._version(target, type_name, fmt or None, shown, seen | {xid})
                return self._external(url.strip(), type_name, fmt or None, version.document)
        return SchemaResolution(error=f"schema '{shown}' has no document (schema, "
                                "schemabase64 or schemaurl)", fix=f"add one to {xid}")

    def _external(self, ref: str, type_name: str | None, declared: str | None,
                  origin: str) -> SchemaResolution:
        """A file next to the referring document, or a URL (fetched later)."""
        if is_absolute(ref) or is_absolute(origin):
            url = ref if is_absolute(ref) else urljoin(origin, ref)
            if not url.lower().startswith(("http://", "https://", "file://")):
                return SchemaResolution(error=f"schema '{ref}': unsupported scheme",
                                        fix="use an http(s) URL or a relative file path")
            fmt = declared or _format_by_name(urlsplit(url).path) or ""
            return SchemaResolution(SchemaDocument(fmt, None, url, type_name), remote=url,
                                    referrer=origin if is_absolute(origin) else None)
        path = Path(origin).parent / ref
        try:
            path = path.resolve()
            raw = path.read_bytes()
        except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
            return SchemaResolution(error=f"schema file {str(path)!r} cannot be read: "
                                    f"{getattr(exc, 'strerror', None) or exc}",
                                    fix="fix the relative path (it is resolved against "
                                    f"{Path(origin).parent})")
        fmt = declared or _format_by_name(path.name) or ""
        return SchemaResolution(SchemaDocument(fmt, content_of(raw, path.name),
                                               str(path), type_name))


def split_type(reference: str) -> tuple[str, str | None]:
    """`(reference, type)`: `#/…/versions/v1:pkg.Type` and `file.avsc#pkg.Type` select a
    type; a `#/...` JSON pointer or a URL's scheme colon do not."""
    text = reference.strip()
    if text.startswith(("#", "/")) or not is_absolute(text):
        if not text.startswith(("#", "/")) and "#" in text:
            base, _, fragment = text.partition("#")
            if fragment and not fragment.startswith("/"):
                return base, fragment
        head, sep, tail = text.partition(":")
        return (head, tail or None) if sep else (text, None)
    base, _, fragment = text.partition("#")
    if fragment and not fragment.startswith("/"):
        return base, fragment
    return text, None


def content_of(raw: bytes, name: str) -> JSON | bytes:
    """A fetched or read schema document: JSON when it parses, else text, else bytes."""
    if name.lower().endswith(_BINARY_SUFFIXES):
        return raw
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        return raw
    return _parsed(text)


def _parsed(value: JSON) -> JSON:
    """An inline schema written as a JSON string (Avro's usual form) becomes the JSON."""
    if isinstance(value, str) and value.lstrip()[:1] in ("{", "["):
        try:
            parsed: JSON = json.loads(value)
        except ValueError:
            return value
        return parsed
    return value


def _format_by_name(name: str) -> str | None:
    lower = name.lower()
    return next((f for s, f in _FORMAT_BY_SUFFIX.items() if lower.endswith(s)), None)


def _holds_document(obj: JSONObject) -> bool:
    return any(k in obj for k in (*_INLINE_KEYS, *_URL_KEYS, "schemabase64"))


def _default_version(schema: JSONObject, listed: list[tuple[str, JSONObject]]) -> str | None:
    meta = schema.get("meta")
    for holder in (meta if isinstance(meta, dict) else {}, schema):
        vid = holder.get("defaultversionid")
        if isinstance(vid, str) and any(v == vid for v, _ in listed):
            return vid
    flagged = [vid for vid, v in listed if v.get("isdefault") is True]
    if flagged:
        return flagged[-1]
    return listed[-1][0] if listed else None


def _text(value: JSON) -> str | None:
    return value if isinstance(value, str) and value else None


def resolve_message(index: SchemaIndex, *, dataschema: JSON, dataschemauri: str | None,
                    dataschemaformat: str | None, file: str, path: str) -> (
        SchemaResolution | None):
    """A definition's schema: its inline `dataschema`, else what `dataschemauri` names;
    None when it declares neither."""
    if isinstance(dataschema, (dict, str)):
        return SchemaResolution(SchemaDocument(dataschemaformat or "", _parsed(dataschema),
                                               f"{file}#{path}.dataschema"))
    if dataschemauri:
        return index.resolve(dataschemauri, dataschemaformat, file)
    return None
