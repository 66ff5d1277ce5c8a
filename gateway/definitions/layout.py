"""Finding the groups, endpoints and messages inside one raw document.

Handles the container spellings (`definitionGroups`/`definitions` of 2023 documents) and
the xRegistry *document view* (`?doc`, `GET /export`), where a message's attributes are
not inline but under `versions/<defaultversionid>`. Attributes are not normalized here;
each message keeps the origin of every top-level key so later stages can cite it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

from gateway.definitions.located import Origin
from gateway.definitions.refs import LEGACY_SEGMENTS
from gateway.definitions.sources import RawDocument
from gateway.definitions.spelling import SpellingLog
from gateway.json.values import JSON, JSONObject
from gateway.spec.problems import Problems

Collection = Literal["messagegroups", "endpoints"]

_ID_KEYS: dict[Collection, str] = {"messagegroups": "messagegroupid", "endpoints": "endpointid"}


@dataclass
class RawMessage:
    xid: str  # /messagegroups/<gid>/messages/<mid> or /endpoints/<eid>/messages/<mid>
    message_id: str
    group_id: str
    collection: Collection
    origin: Origin  # the message object itself
    data: JSONObject  # attributes as written (default version dug out in document view)
    key_origins: dict[str, Origin]  # where each top-level key of `data` was written
    order: int
    # The message's other versions (document view), by version id: what a basemessage
    # naming `/versions/<id>` inherits. The default version is `data` itself.
    versions: dict[str, RawVersion] = field(default_factory=dict)
    default_version: str | None = None


@dataclass
class RawVersion:
    origin: Origin
    data: JSONObject
    key_origins: dict[str, Origin]


@dataclass
class RawGroup:
    """A message group or an endpoint (endpoints are groups that may inline messages)."""

    group_id: str
    collection: Collection
    origin: Origin
    data: JSONObject  # attributes without the messages collection
    messages: list[RawMessage] = field(default_factory=list)

    @property
    def xid(self) -> str:
        return f"/{self.collection}/{self.group_id}"

    @property
    def file(self) -> str:
        return self.origin.file


@dataclass
class Layout:
    groups: list[RawGroup] = field(default_factory=list)
    endpoints: list[RawGroup] = field(default_factory=list)


def walk_document(
    doc: RawDocument, order: Iterator[int], problems: Problems, log: SpellingLog
) -> Layout:
    layout = Layout()
    root = Origin(doc.name)
    if not isinstance(doc.data, dict):
        problems.error(doc.name, "$", "a catalog document must be a JSON object",
                       'wrap the definitions in {"messagegroups": {...}, "endpoints": {...}}')
        return layout
    found = False
    for key, value in doc.data.items():
        canonical = LEGACY_SEGMENTS.get(key, key)
        if canonical not in ("messagegroups", "endpoints"):
            continue
        collection: Collection = "messagegroups" if canonical == "messagegroups" else "endpoints"
        found = True
        where = root.child(key)
        if key != collection:
            log.note(where, key, collection)
        if not isinstance(value, dict):
            problems.error(where.file, where.path, f"'{key}' must be an object keyed by id",
                           f'write "{collection}": {{"<id>": {{...}}}}')
            continue
        target = layout.groups if collection == "messagegroups" else layout.endpoints
        for group_id, group in value.items():
            raw = _walk_group(group_id, group, collection, where.child(group_id), order,
                              problems, log)
            if raw is not None:
                target.append(raw)
    if not found:
        _report_missing_collections(doc, problems)
    return layout


def _report_missing_collections(doc: RawDocument, problems: Problems) -> None:
    assert isinstance(doc.data, dict)
    if any(k in doc.data for k in ("messagegroupsurl", "endpointsurl")):
        problems.warning(doc.name, "$",
                         "the document links its collections (…url) instead of inlining them",
                         "load the registry with GET /export or ?inline=*")
    elif not any(k in doc.data for k in ("schemagroups", "schemaGroups")):
        problems.warning(doc.name, "$", "no messagegroups or endpoints in this document",
                         "check that this is an xRegistry catalog document")


def _walk_group(
    group_id: str, group: JSON, collection: Collection, where: Origin,
    order: Iterator[int], problems: Problems, log: SpellingLog,
) -> RawGroup | None:
    if not isinstance(group, dict):
        problems.error(where.file, where.path, f"'{group_id}' must be an object",
                       "give the group's attributes as a JSON object")
        return None
    _check_id(group, group_id, (_ID_KEYS[collection], "id"), where, problems)
    attributes = {k: v for k, v in group.items() if k not in ("messages", "definitions")}
    raw = RawGroup(group_id, collection, where, attributes)
    for key in ("messages", "definitions"):
        if key not in group:
            continue
        messages = group[key]
        at = where.child(key)
        if key == "definitions":
            log.note(at, key, "messages")
        if not isinstance(messages, dict):
            problems.error(at.file, at.path, f"'{key}' must be an object keyed by message id",
                           'write "messages": {"<messageid>": {...}}')
            continue
        for message_id, message in messages.items():
            if not isinstance(message, dict):
                problems.error(at.file, at.child(message_id).path,
                               f"message '{message_id}' must be an object",
                               "give the message definition as a JSON object")
                continue
            raw.messages.append(_message(raw, message_id, message, at.child(message_id),
                                         next(order), problems))
    return raw


def _message(
    group: RawGroup, message_id: str, message: JSONObject, where: Origin, order: int,
    problems: Problems,
) -> RawMessage:
    _check_id(message, message_id, ("messageid", "id"), where, problems)
    data, key_origins = dig_default_version(message, where)
    xid = f"{group.xid}/messages/{message_id}"
    raw = RawMessage(xid, message_id, group.group_id, group.collection, where, data,
                     key_origins, order)
    versions = message.get("versions")
    if isinstance(versions, dict) and versions:
        raw.default_version = _default_version_id(message, versions)
        for vid, version in versions.items():
            if vid != raw.default_version and isinstance(version, dict):
                at = where.child("versions", vid)
                raw.versions[vid] = RawVersion(at, dict(version),
                                               {key: at.child(key) for key in version})
    return raw


def dig_default_version(
    resource: JSONObject, where: Origin
) -> tuple[JSONObject, dict[str, Origin]]:
    """The resource's attributes with its default version's attributes filled in.

    In document view the default version's attributes exist only under
    `versions/<meta.defaultversionid>`; in API view they are inline (and equal), so inline
    attributes win and the version only fills the gaps.
    """
    origins = {key: where.child(key) for key in resource}
    versions = resource.get("versions")
    if not isinstance(versions, dict) or not versions:
        return dict(resource), origins
    chosen = _default_version_id(resource, versions)
    version = versions.get(chosen) if chosen is not None else None
    data = {k: v for k, v in resource.items() if k not in ("versions", "versionsurl",
                                                          "versionscount")}
    if isinstance(version, dict):
        for key, value in version.items():
            if key not in data:
                data[key] = value
                origins[key] = where.child("versions", chosen or "", key)
    return data, {k: o for k, o in origins.items() if k in data}


def _default_version_id(resource: JSONObject, versions: JSONObject) -> str | None:
    meta = resource.get("meta")
    for holder in (meta, resource):
        if isinstance(holder, dict):
            default = holder.get("defaultversionid")
            if isinstance(default, str) and default in versions:
                return default
    # No (valid) pointer: xRegistry's default is the newest version; by creation time,
    # then by id, which is what a sticky-less registry would pick.
    def newest(vid: str) -> tuple[str, str]:
        version = versions[vid]
        created = version.get("createdat") if isinstance(version, dict) else None
        return (created if isinstance(created, str) else "", vid)

    return max(versions, key=newest)


def _check_id(
    entity: JSONObject, key: str, id_keys: tuple[str, ...], where: Origin, problems: Problems
) -> None:
    for id_key in id_keys:
        value = entity.get(id_key)
        if value is not None and value != key:
            problems.warning(
                where.file, where.child(id_key).path,
                f"'{id_key}' is {value!r} but the entry is keyed '{key}'; the key is used",
                f"make '{id_key}' equal to the map key '{key}' (or remove it)",
            )
            return
