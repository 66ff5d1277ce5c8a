"""The typed, normalized definitions model.

Whatever spelling a document used (rc1-rc4, legacy `definitionGroups`/`format`/`metadata`,
`protocolmetadata`, AMQP underscores ...), the reader produces these objects with rc4
names, `basemessage` chains and cross-references already resolved. Every element keeps
its provenance (file and JSON path) so problems and `explain` can point at the source.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

from gateway.definitions.schema_model import SchemaResolution
from gateway.json.values import JSON, JSONObject
from gateway.spec.problems import Problem

CLOUDEVENTS = "CloudEvents/1.0"

Usage = Literal["consumer", "producer", "subscriber"]


@dataclass(frozen=True)
class Provenance:
    file: str
    path: str  # JSON path inside the file, e.g. $.messagegroups.store.messages.sale

    def __str__(self) -> str:
        return f"{self.file}: {self.path}"


_MISSING: JSON = object()  # type: ignore[assignment]


@dataclass(frozen=True)
class Property:
    """A property declaration: `{type, value, required}` (a scalar `x` means `{value: x}`).

    `has_value` distinguishes "no value" (presence/type constraint only) from `value: null`.
    """

    type: str = "string"
    value: JSON = None
    has_value: bool = False
    required: bool = False
    description: str | None = None
    provenance: Provenance | None = None


@dataclass(frozen=True)
class OptionConstraint:
    """One constraint of a message definition's protocoloptions.

    `field` is the protocol field (`topic_name`, `headers`, `properties` ...); `name` is
    the entry inside a collection or section (`headers` entry name, AMQP property name),
    None for scalar fields. See `gateway.protocols.DEFINITION_FIELDS` for the kinds.
    """

    field: str
    name: str | None
    prop: Property


@dataclass(frozen=True)
class MessageDefinition:
    xid: str  # /messagegroups/<gid>/messages/<mid> or /endpoints/<eid>/messages/<mid>
    message_id: str
    group_id: str
    provenance: Provenance
    envelope: str | None = None  # canonical "CloudEvents/1.0" or None
    envelope_metadata: dict[str, Property] = field(default_factory=dict)
    envelope_options: JSONObject = field(default_factory=dict)  # mode, format, ...
    protocol: str | None = None  # canonical name from gateway.protocols, or None
    protocol_options: tuple[OptionConstraint, ...] = ()
    raw_protocol_options: JSONObject = field(default_factory=dict)  # normalized names
    dataschemaformat: str | None = None
    dataschema: JSON = None  # inline schema
    dataschemauri: str | None = None
    dataschemaxid: str | None = None
    datacontenttype: str | None = None
    name: str | None = None
    description: str | None = None
    deprecated: bool = False
    incomplete: bool = False  # a basemessage could not be resolved
    order: int = 0  # declaration order across all loaded documents (for tie policy)
    # Canonical `envelopemetadata` declarations as merged (rc4 names, every entry a
    # declaration object), so rules about what was *declared* (e.g. `required: false` on
    # `type`) can be checked after implicit defaults were applied to `envelope_metadata`.
    raw_envelope_metadata: JSONObject = field(default_factory=dict)
    # Where each canonical attribute came from, keyed by its canonical JSON path relative
    # to the message (`$.protocoloptions.topic_name`, `$.envelopemetadata.type`). After a
    # basemessage merge the entries point into whichever document declared the value.
    field_provenance: dict[str, Provenance] = field(default_factory=dict)
    # XIDs merged into this definition, nearest first (basemessage / cross-reference chain).
    base_chain: tuple[str, ...] = ()
    # The schema document `dataschema`/`dataschemauri` name, or why it did not resolve;
    # None when the definition declares no schema.
    schema: SchemaResolution | None = field(default=None, compare=False)

    @property
    def is_cloudevent(self) -> bool:
        return self.envelope == CLOUDEVENTS


@dataclass(frozen=True)
class MessageGroup:
    group_id: str
    xid: str
    provenance: Provenance
    envelope: str | None = None
    protocol: str | None = None
    messages: tuple[MessageDefinition, ...] = ()
    name: str | None = None
    description: str | None = None


@dataclass(frozen=True)
class Endpoint:
    endpoint_id: str
    xid: str
    provenance: Provenance
    usage: tuple[Usage, ...] = ()
    channel: str | None = None
    protocol: str | None = None
    # Normalized endpoint options (rc4 names). `endpoints` is always a list of address
    # objects: {"uri": ...} or {"bootstrap.servers": [...], ...} for Kafka.
    protocol_options: JSONObject = field(default_factory=dict)
    envelope: str | None = None
    envelope_options: JSONObject = field(default_factory=dict)
    messagegroups: tuple[str, ...] = ()  # XIDs (`/messagegroups/x`) or absolute URIs
    messages: tuple[MessageDefinition, ...] = ()  # inline definitions
    deployed: bool = True
    name: str | None = None
    description: str | None = None
    # Where each canonical option came from, keyed like `$.protocoloptions.topic`.
    field_provenance: dict[str, Provenance] = field(default_factory=dict)


@dataclass
class Catalog:
    """Everything loaded from one or more documents, merged."""

    groups: dict[str, MessageGroup] = field(default_factory=dict)
    endpoints: dict[str, Endpoint] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)

    def messages(self) -> Iterator[MessageDefinition]:
        """Every message definition, groups first then endpoint-inline ones, in order."""
        for group in self.groups.values():
            yield from group.messages
        for endpoint in self.endpoints.values():
            yield from endpoint.messages

    def message(self, xid: str) -> MessageDefinition | None:
        for msg in self.messages():
            if msg.xid == xid:
                return msg
        return None

    def messages_for_endpoint(self, endpoint_id: str) -> list[MessageDefinition]:
        """The definitions an endpoint's contract covers: its groups' and its inline ones."""
        endpoint = self.endpoints[endpoint_id]
        out: list[MessageDefinition] = list(endpoint.messages)
        for ref in endpoint.messagegroups:
            gid = ref.rstrip("/").rsplit("/", 1)[-1]
            group = self.groups.get(gid)
            if group is not None:
                out.extend(group.messages)
        return out

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.is_error]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.problems if not p.is_error]
