"""References between definitions: `basemessage`, cross-references, endpoint groups.

Catalogs spell the same local reference several ways: an XID (`/messagegroups/g`), a JSON
pointer into the same document (`#/messagegroups/g`, the form xrcg writes everywhere), the
2023 names (`#/definitionGroups/g/definitions/m`), or an absolute URI. An absolute URI
points into another registry; it resolves only when that registry (or file) was loaded,
in which case it is turned back into an XID.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:")
# 2023 "cereg" collection names -> rc4 names, used in pointers as well as in documents.
LEGACY_SEGMENTS = {
    "definitionGroups": "messagegroups",
    "definitiongroups": "messagegroups",
    "definitions": "messages",
    "schemaGroups": "schemagroups",
}
COLLECTIONS = ("messagegroups", "endpoints", "schemagroups")


def is_absolute(ref: str) -> bool:
    return bool(_SCHEME.match(ref))


def to_xid(ref: str, bases: Iterable[str] = ()) -> str | None:
    """The registry-relative XID a reference names, or None when it points elsewhere.

    `bases` are the addresses of loaded documents (registry URLs, file paths or URIs); an
    absolute reference under one of them is local to what we loaded.
    """
    text = ref.strip()
    if is_absolute(text) or (text and not text.startswith(("/", "#"))):
        for base in bases:
            stem = base.rstrip("/")
            if text.startswith(stem + "#"):
                return _normalize_path(text[len(stem) + 1 :])
            if text.startswith(stem + "/"):
                return _normalize_path(text[len(stem) :])
        if not is_absolute(text) and text.split("/", 1)[0] in (*COLLECTIONS, *LEGACY_SEGMENTS):
            return _normalize_path("/" + text)  # a bare XID missing its leading slash
        return None
    return _normalize_path(text.lstrip("#"))


def _normalize_path(path: str) -> str:
    segments = [s for s in path.split("/") if s]
    return "/" + "/".join(LEGACY_SEGMENTS.get(s, s) for s in segments)


def is_message_xid(xid: str) -> bool:
    """`/<messagegroups|endpoints>/<g>/messages/<m>`, optionally `/versions/<v>`."""
    parts = xid.split("/")
    if len(parts) not in (5, 7) or parts[0] or parts[1] not in ("messagegroups", "endpoints"):
        return False
    if parts[3] != "messages" or not all(parts[2:]):
        return False
    return len(parts) == 5 or parts[5] == "versions"


def message_xid(xid: str) -> str:
    """A message Version XID names the message (its default version's attributes)."""
    parts = xid.split("/")
    if len(parts) >= 7 and parts[5] == "versions":
        return "/".join(parts[:5])
    return xid


def group_id_of(xid: str) -> str | None:
    """`g` for `/messagegroups/g`, None for anything else."""
    parts = xid.split("/")
    if len(parts) == 3 and parts[1] == "messagegroups" and parts[2]:
        return parts[2]
    return None
