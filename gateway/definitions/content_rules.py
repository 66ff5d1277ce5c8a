"""Content rules of a message definition (rc2 "datacontenttype", "dataschemaformat"):
one media type wherever the definition states it, and schema formats with a version."""

from __future__ import annotations

from gateway.cloudevents.mediatype import comparable, is_cloudevents
from gateway.definitions.checks import where
from gateway.definitions.model import MessageDefinition, Provenance
from gateway.definitions.reader import has_version
from gateway.definitions.typecheck import has_placeholder
from gateway.protocols import find_profile
from gateway.spec.problems import Problems


def check_schema_format(m: MessageDefinition, problems: Problems) -> None:
    """rc2: `dataschemaformat` is `<NAME>/<VERSION>` (only where the message writes it: a
    format taken from the referenced schema is the registry's)."""
    if "$.dataschemaformat" not in m.field_provenance or m.dataschemaformat is None:
        return
    if not has_version(m.dataschemaformat):
        at = _at(m, "dataschemaformat")
        problems.error(at.file, at.path,
                       f"dataschemaformat '{m.dataschemaformat}' names no version "
                       "(<NAME>/<VERSION>)",
                       'write e.g. "JsonSchema/draft-07", "Avro/1.11.1" or "Protobuf/3"')


def check_content_types(m: MessageDefinition, problems: Problems) -> None:
    """rc2: where the content type appears in more than one place of a definition (the
    message's `datacontenttype`, the CloudEvents `datacontenttype` attribute, the
    protocol's content type: AMQP `content-type`, MQTT `content_type`, a `content-type`
    header) "they MUST all have the same values", media types compared
    case-insensitively. One exception, also rc2's: in structured mode the message's
    content type is the envelope's (`application/cloudevents+json`), so the CloudEvents
    attribute (the data's type) is not compared with a CloudEvents media type."""
    message = m.datacontenttype
    declared = _content_type_constant(m)
    protocol, protocol_at = declared if declared is not None else (None, None)
    if message is not None and protocol is not None and protocol_at is not None \
            and not _same_media_type(message, protocol):
        problems.error(protocol_at.file, protocol_at.path,
                       f"{m.protocol} content type '{protocol}' differs from the message's "
                       f"datacontenttype '{message}'",
                       "give both the same media type, or drop one of them")
    prop = m.envelope_metadata.get("datacontenttype") if m.is_cloudevent else None
    if prop is None or not prop.has_value or not isinstance(prop.value, str) \
            or has_placeholder(prop.value):
        return
    attribute = prop.value
    for what, other in (("the message's datacontenttype", message),
                        (f"the {m.protocol} content type", protocol)):
        if other is None or is_cloudevents(other) or _same_media_type(attribute, other):
            continue
        at = _at(m, "envelopemetadata", "datacontenttype")
        problems.error(at.file, at.path,
                       f"CloudEvents attribute 'datacontenttype' '{attribute}' differs from "
                       f"{what} '{other}'",
                       "give both the same media type, or drop one of them")
        return


def _same_media_type(first: str, second: str) -> bool:
    if has_placeholder(first) or has_placeholder(second):
        return True  # a template: the message decides
    return comparable(first) == comparable(second)


def _content_type_constant(m: MessageDefinition) -> tuple[str, Provenance] | None:
    """The constant the definition gives the protocol's content type, and where."""
    prof = find_profile(m.protocol)
    ref = None if prof is None else prof.content_type
    if ref is None:
        return None
    for c in m.protocol_options:
        if c.field != ref.field or (c.name or "").lower() != (ref.name or "").lower():
            continue
        if c.prop.has_value and isinstance(c.prop.value, str):
            label = ("protocoloptions", c.field) if c.name is None else (
                "protocoloptions", c.field, c.name)
            at = c.prop.provenance or _at(m, *label)
            return c.prop.value, at
    return None


def _at(m: MessageDefinition, *parts: str | int) -> Provenance:
    return where(m.field_provenance, m.provenance, *parts)
