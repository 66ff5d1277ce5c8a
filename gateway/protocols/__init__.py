"""Protocol knowledge, one profile per protocol (`ProtocolProfile`, `profile.py`).

Names, the spec's field tables ("Message Protocols" of `message-definitions-1.0-rc2`),
record fields, addresses, ordering, identity, metadata places, URI schemes and endpoint
options of each protocol live in its module (`mqtt.py`, `amqp.py`, `kafka.py`,
`nats.py`, `http.py`); `table.py` lists them; everything else reads the profiles
through this package instead of comparing protocol names.
"""

from __future__ import annotations

from gateway.protocols.amqp import AMQP
from gateway.protocols.http import HTTP
from gateway.protocols.kafka import (
    KAFKA,
    KAFKA_CORRELATION_ID,
    KAFKA_REPLY_PARTITION,
    KAFKA_REPLY_TOPIC,
)
from gateway.protocols.mqtt import MQTT5, MQTT311, MQTT_FAMILY
from gateway.protocols.nats import NATS
from gateway.protocols.places import (
    FieldAccess,
    add_metadata,
    field_access,
    percent_decoded,
    set_content_type,
    token_separator,
)
from gateway.protocols.profile import (
    DefinitionRules,
    EndpointRules,
    Exclusion,
    FieldKind,
    FieldRef,
    FieldSpec,
    Identity,
    IdentityPart,
    Metadata,
    Observing,
    Ordering,
    ProtocolProfile,
    RecordFieldType,
    Redelivery,
    RequestReply,
    Spelling,
    UriSchemes,
    ValueFormat,
)
from gateway.protocols.table import (
    DEFINITION_FIELDS,
    PROFILES,
    PROTOCOLS,
    RECORD_FIELDS,
    address_fields,
    definition_field,
    family,
    family_members,
    find_profile,
    is_known_protocol,
    normalize_protocol,
    profile,
    versionless_reading,
    widest_protocol,
)

__all__ = [
    "AMQP", "DEFINITION_FIELDS", "HTTP", "KAFKA", "KAFKA_CORRELATION_ID",
    "KAFKA_REPLY_PARTITION", "KAFKA_REPLY_TOPIC", "MQTT5", "MQTT311", "MQTT_FAMILY", "NATS",
    "PROFILES", "PROTOCOLS", "RECORD_FIELDS", "DefinitionRules", "EndpointRules",
    "Exclusion", "FieldAccess", "FieldKind", "FieldRef", "FieldSpec", "Identity",
    "IdentityPart", "Metadata", "Observing", "Ordering", "ProtocolProfile", "RecordFieldType",
    "Redelivery", "RequestReply", "Spelling",
    "UriSchemes", "ValueFormat", "add_metadata", "address_fields", "definition_field",
    "family", "family_members", "field_access", "find_profile", "is_known_protocol",
    "normalize_protocol", "percent_decoded", "profile", "set_content_type", "token_separator",
    "versionless_reading", "widest_protocol",
]
