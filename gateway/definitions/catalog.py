"""Raw documents -> one validated `Catalog`: the order of the reading stages.

1. layout      find groups, endpoints, messages (all documents; a later group or endpoint
               with the same id replaces the earlier one, with a warning naming both files)
2. reader      normalize message and group attribute spellings (protocol-independent)
3. options     normalize each message's protocoloptions for its effective protocol: its
               own, else inherited through its basemessage chain, else its group's
4. resolve     merge basemessage chains and cross-references on the canonical objects
5. build       apply group envelope/protocol defaults, build the typed model
6. validate    check the typed model
Spellings are normalized before merging so a base and an overlay written in different
spec revisions merge attribute by attribute; the model is built after merging so it only
ever sees flat effective definitions.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import replace

from gateway.definitions.build import apply_group_defaults, build_message
from gateway.definitions.endpoints import read_endpoint
from gateway.definitions.layout import RawGroup, walk_document
from gateway.definitions.located import Located
from gateway.definitions.model import Catalog, Endpoint, MessageDefinition, MessageGroup
from gateway.definitions.options import normalize_protocol_options
from gateway.definitions.reader import check_2023_format, normalize_group, normalize_message
from gateway.definitions.resolve import Resolver
from gateway.definitions.schema_formats import format_of, schema_formats
from gateway.definitions.schema_model import SchemaResolution
from gateway.definitions.schema_refs import SchemaIndex, resolve_message
from gateway.definitions.sources import RawDocument
from gateway.definitions.spelling import SpellingLog
from gateway.definitions.validate import validate_catalog
from gateway.spec.problems import Problem, Problems


def assemble(documents: Sequence[RawDocument], problems: Iterable[Problem] = ()) -> Catalog:
    probs = Problems(list(problems))
    log = SpellingLog()
    order = itertools.count()
    groups: dict[str, RawGroup] = {}
    endpoints: dict[str, RawGroup] = {}
    for doc in documents:
        layout = walk_document(doc, order, probs, log)
        _add_replacing(groups, layout.groups, "message group", probs)
        _add_replacing(endpoints, layout.endpoints, "endpoint", probs)
    bases = tuple(base for doc in documents for base in doc.bases)

    endpoint_models = {eid: read_endpoint(raw, bases, probs, log) for eid, raw in endpoints.items()}
    group_defaults = {gid: normalize_group(raw, probs, log) for gid, raw in groups.items()}
    containers = [(raw, group_defaults[gid]) for gid, raw in groups.items()]
    containers += [(raw, _endpoint_defaults(raw, endpoint_models[eid]))
                   for eid, raw in endpoints.items()]

    index = {m.xid: normalize_message(m, probs, log) for raw, _ in containers for m in raw.messages}
    # Versions other than the default one, for a basemessage that names a version.
    for raw, _ in containers:
        for m in raw.messages:
            for vid, version in m.versions.items():
                as_message = replace(m, xid=f"{m.xid}/versions/{vid}", origin=version.origin,
                                     data=version.data, key_origins=version.key_origins)
                index[as_message.xid] = normalize_message(as_message, probs, log)
    for raw in groups.values():
        for m in raw.messages:
            check_2023_format(raw, m, probs)
    resolver = Resolver(index, bases, probs, versioned={
        m.xid: m.default_version for raw, _ in containers for m in raw.messages
        if m.default_version is not None})
    for raw, defaults in containers:
        group_protocol = defaults.data.get("protocol")
        for m in raw.messages:
            xids = [m.xid] + [f"{m.xid}/versions/{vid}" for vid in m.versions]
            for xid in xids:
                protocol = resolver.own_or_inherited_protocol(xid)
                if protocol is None and isinstance(group_protocol, str):
                    protocol = group_protocol
                normalize_protocol_options(index[xid], protocol, probs, log)

    formats = schema_formats(documents)
    schemas = SchemaIndex(documents)
    built: dict[str, tuple[MessageDefinition, ...]] = {}
    for raw, defaults in containers:
        messages: list[MessageDefinition] = []
        for m in raw.messages:
            resolved = resolver.resolve(m.xid)
            # The resolved object is shared with messages derived from this one; group
            # defaults belong to this group only, so they go onto a copy.
            own = Located(dict(resolved.loc.data), dict(resolved.loc.origins))
            apply_group_defaults(own, defaults)
            message = build_message(m, replace(resolved, loc=own), probs)
            if message.dataschemauri and not message.dataschemaformat:
                fmt = format_of(message.dataschemauri, formats, bases)
                if fmt is not None:
                    message = replace(message, dataschemaformat=fmt)
            schema = _schema_of(message, schemas)
            message = replace(message, schema=schema)
            if not message.dataschemaformat and schema is not None and schema.document \
                    and schema.document.format \
                    and schema.document.location.startswith("/schemagroups/"):
                # The registry's schema says its format (`/…/versions/v:Type` too); a
                # file or URL name is only a guess, not a declaration.
                message = replace(message, dataschemaformat=schema.document.format)
            messages.append(message)
        built[raw.xid] = tuple(messages)

    catalog = Catalog(
        groups={gid: _group(raw, group_defaults[gid], built[raw.xid])
                for gid, raw in groups.items()},
        endpoints={eid: replace(model, messages=built[endpoints[eid].xid])
                   for eid, model in endpoint_models.items()},
        sources=[doc.name for doc in documents],
    )
    found = probs.items + log.problems() + validate_catalog(catalog)
    catalog.problems = list(dict.fromkeys(found))  # merged bases repeat their problems
    return catalog


def _schema_of(message: MessageDefinition, index: SchemaIndex) -> SchemaResolution | None:
    """Where the message's schema was written decides what a relative reference means."""
    key = "$.dataschema" if message.dataschema is not None else "$.dataschemauri"
    origin = message.field_provenance.get(key, message.provenance)
    return resolve_message(index, dataschema=message.dataschema,
                           dataschemauri=message.dataschemauri,
                           dataschemaformat=message.dataschemaformat, file=origin.file,
                           path=origin.path)


def _add_replacing(
    target: dict[str, RawGroup], found: list[RawGroup], kind: str, problems: Problems
) -> None:
    for raw in found:
        previous = target.pop(raw.group_id, None)
        if previous is not None:
            problems.warning(
                raw.file, raw.origin.path,
                f"{kind} '{raw.group_id}' is also defined in {previous.file} "
                f"({previous.origin.path}); this later definition replaces it",
                f"give one of the two {kind}s another id, or load only one of the documents",
            )
        target[raw.group_id] = raw


def _endpoint_defaults(raw: RawGroup, endpoint: Endpoint) -> Located:
    """An endpoint's envelope and protocol are the defaults of its inline messages."""
    loc = Located({}, {(): raw.origin})
    if endpoint.envelope is not None:
        loc.put("envelope", endpoint.envelope, raw.origin.child("envelope"))
    if endpoint.protocol is not None:
        loc.put("protocol", endpoint.protocol, raw.origin.child("protocol"))
    return loc


def _group(
    raw: RawGroup, defaults: Located, messages: tuple[MessageDefinition, ...]
) -> MessageGroup:
    envelope = defaults.data.get("envelope")
    protocol = defaults.data.get("protocol")
    name = defaults.data.get("name")
    description = defaults.data.get("description")
    return MessageGroup(
        group_id=raw.group_id,
        xid=raw.xid,
        provenance=raw.origin.provenance(),
        envelope=envelope if isinstance(envelope, str) else None,
        protocol=protocol if isinstance(protocol, str) else None,
        messages=messages,
        name=name if isinstance(name, str) else None,
        description=description if isinstance(description, str) else None,
    )
