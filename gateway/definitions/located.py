"""Canonical JSON objects that remember where each part was written, and their deep merge.

Normalization renames keys (`protocolmetadata.topic` becomes `protocoloptions.topic_name`)
and `basemessage` merging mixes parts of several documents into one object. Problems and
`explain` must still point at what the author wrote, so every canonical path that was
moved or merged keeps an `Origin`: the file and the JSON path as written there.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gateway.definitions.model import Provenance
from gateway.json.values import JSON, JSONObject
from gateway.spec.problems import json_path

Parts = tuple[str | int, ...]


@dataclass(frozen=True)
class Origin:
    """A place in a source document: the file and the JSON path parts as written."""

    file: str
    parts: Parts = ()

    def child(self, *more: str | int) -> Origin:
        return Origin(self.file, self.parts + more)

    @property
    def path(self) -> str:
        return json_path(*self.parts)

    def provenance(self) -> Provenance:
        return Provenance(self.file, self.path)


@dataclass
class Located:
    """A canonical JSON object plus the origin of each recorded canonical path.

    `origins[()]` is the object itself. Paths that were not recorded are located through
    their longest recorded prefix, with the remaining parts appended unchanged (below the
    recorded level normalization does not rename anything).
    """

    data: JSONObject
    origins: dict[Parts, Origin] = field(default_factory=dict)

    def locate(self, *canonical: str | int) -> Origin:
        for cut in range(len(canonical), -1, -1):
            origin = self.origins.get(canonical[:cut])
            if origin is not None:
                return origin.child(*canonical[cut:])
        return Origin("<unknown>", canonical)

    def put(self, key: str, value: JSON, origin: Origin) -> None:
        self.data[key] = value
        self.origins[(key,)] = origin

    def drop(self, key: str) -> None:
        """Remove a top-level key and every origin recorded below it."""
        self.data.pop(key, None)
        for parts in [p for p in self.origins if p[:1] == (key,)]:
            del self.origins[parts]


def deep_merge(base: JSON, overlay: JSON) -> JSON:
    """The basemessage merge: objects merge key by key, anything else in the overlay
    (scalars, arrays, null) replaces what was inherited."""
    if isinstance(base, dict) and isinstance(overlay, dict):
        merged = dict(base)
        for key, value in overlay.items():
            merged[key] = deep_merge(base[key], value) if key in base else value
        return merged
    return overlay


def merge_located(base: Located, overlay: Located) -> Located:
    """Deep-merge `overlay` over `base`, keeping the origin of whichever side won."""
    data = deep_merge(base.data, overlay.data)
    assert isinstance(data, dict)  # both sides are objects
    origins = {
        parts: origin
        for parts, origin in base.origins.items()
        if parts and not _replaced(overlay.data, parts)
    }
    origins.update(overlay.origins)
    return Located(data, origins)


def _replaced(overlay: JSONObject, parts: Parts) -> bool:
    """Whether the overlay replaces the value at `parts` (or one of its parents) whole."""
    node: JSON = overlay
    for part in parts:
        if not isinstance(node, dict) or not isinstance(part, str) or part not in node:
            return False
        node = node[part]
        if not isinstance(node, dict):
            return True
    return False
