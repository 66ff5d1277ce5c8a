"""Request-reply: reply definitions (`routes[].reply_definitions`), the shapes a reply
route's answers must have, and how an answer is rendered for its sender.

- `ReplyDefinitions.judge`: the answer matched by the core's matcher (a `Converter` of the
  reply definitions, with the route's schema policy); a match conforms.
- `ReplyDefinitions.paired`: the definition of the sender's protocol that renders an
  answer a definition accepted (the matched one, an overlay of it through `basemessage`,
  one of the same CloudEvents type, one that shares a base).
- `ReplyDefinitions.render`: the answer as the matched definition's CloudEvent in the
  sender's protocol, plus the protocol options of the paired definition (HTTP status
  and headers, MQTT 5 properties, NATS headers), filled like a native rendering.

Pure: no event loop, no I/O; `gateway.runtime.reply` dead-letters what does not conform.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from gateway.cloudevents.bindings import encode
from gateway.convert import Conversion, Converter
from gateway.deadletter import reasons
from gateway.definitions.model import MessageDefinition
from gateway.envelope.native import render_native
from gateway.envelope.render import RenderError
from gateway.json.values import JSON, as_text
from gateway.matching.matcher import Explanation
from gateway.policies.schema import SchemaPolicy
from gateway.protocols import find_profile
from gateway.record import NativeMessage
from gateway.runtime.replyrecords import reply_record, without_status

#: What a sender is told when the service's answer conforms to no reply definition.
NONCONFORMING = "the service's answer conforms to no reply definition"

class Judged(NamedTuple):
    """An answer judged by the reply definitions: the conversion that accepted it, or
    why none did (the dead letter's detail and explanation)."""

    conversion: Conversion | None
    detail: str = ""
    explain: Sequence[Explanation] = ()


class ReplyDefinitions:
    """The definitions a reply route's answers must conform to (`reply_definitions`):
    matched by the core's matcher, rendered for the sender by the definition of the
    sender's protocol paired with the one that matched (`paired`)."""

    def __init__(self, definitions: Sequence[MessageDefinition],
                 schema: SchemaPolicy = "tiebreak") -> None:
        self.definitions = tuple(definitions)
        self._converter = Converter(self.definitions, schema=schema)
        # `paired`'s answers, by the matched definition's identity and the protocol.
        self._pairs: dict[tuple[int, str], MessageDefinition | None] = {}

    def judge(self, answer: NativeMessage) -> Judged:
        """Whether a definition accepts `answer` (and its schema, with `schema: enforce`)."""
        conversion = self._converter.convert(answer)
        if conversion.match.definition is not None and conversion.reason != \
                reasons.INVALID_DATA:
            return Judged(conversion)
        detail = f"{NONCONFORMING}: {conversion.reason}"
        if conversion.detail:
            detail += f" ({conversion.detail})"
        return Judged(None, detail, conversion.explain)

    def paired(self, matched: MessageDefinition, protocol: str) -> MessageDefinition | None:
        """The reply definition of `protocol`'s family that renders the answer `matched`
        accepted: `matched` itself when it is of that family, else the first declared one
        that derives from it (or it from that one, `basemessage`), else the first that
        declares the same literal CloudEvents `type`, else the first that shares a base
        message with it; None: the answer is rendered without one."""
        key = (id(matched), protocol)
        if key not in self._pairs:
            self._pairs[key] = self._pair(matched, protocol)
        return self._pairs[key]

    def _pair(self, matched: MessageDefinition, protocol: str) -> MessageDefinition | None:
        prof = find_profile(protocol)
        if prof is None:
            return None
        family = prof.family
        candidates = [d for d in self.definitions
                      if (p := find_profile(d.protocol)) is not None and p.family == family]
        if matched in candidates:
            return matched
        lineage = _lineage(matched)
        kind = _literal_type(matched)
        # Nearest first: an overlay of the matched definition (or its own base), then one
        # of the same CloudEvents type, then one that shares any base (a catalog-wide
        # base shared by every definition must not pick an unrelated reply first).
        def derived(c: MessageDefinition) -> bool:
            return matched.xid in c.base_chain or c.xid in matched.base_chain

        def same_type(c: MessageDefinition) -> bool:
            return kind is not None and _literal_type(c) == kind

        def shares_base(c: MessageDefinition) -> bool:
            return bool(lineage & _lineage(c))

        for related in (derived, same_type, shares_base):
            found = next((c for c in candidates if related(c)), None)
            if found is not None:
                return found
        return None

    def render(self, answer: NativeMessage, conversion: Conversion,
               protocol: str) -> NativeMessage | str:
        """The conforming `answer` as a record of `protocol` for its sender, or why it
        cannot be (a placeholder of the sender's definition without a value)."""
        event = conversion.event
        base = (encode(event, protocol, "binary") if event is not None
                else reply_record(answer, protocol))
        matched = conversion.match.definition
        sender = None if matched is None else self.paired(matched, protocol)
        if sender is None or matched is None:
            return without_status(base)
        # The context as `render_native` would build it from the event, without matching
        # its templates again when the matcher captured them already (the sender's
        # envelope templates are the matched one's, as with a `basemessage` overlay).
        if event is None or _templates(sender).items() <= _templates(matched).items():
            context = ({} if event is None else
                       {k: as_text(v) for k, v in event.canonical_attributes().items()})
            context.update(conversion.match.context)
            rendered = render_native(sender, None, context)
        else:  # templates of its own may capture other names
            rendered = render_native(sender, event, conversion.match.context)
        if isinstance(rendered, RenderError):
            return f"{NONCONFORMING} for the sender ({rendered.message})"
        return _overlay(without_status(base), rendered, sender)


def _lineage(definition: MessageDefinition) -> set[str]:
    """The definition and the base messages merged into it."""
    return {definition.xid, *definition.base_chain}


def _templates(definition: MessageDefinition) -> dict[str, str]:
    """The definition's `envelopemetadata` values that hold placeholders."""
    return {name: prop.value for name, prop in definition.envelope_metadata.items()
            if isinstance(prop.value, str) and "{" in prop.value}


def _literal_type(definition: MessageDefinition) -> str | None:
    prop = definition.envelope_metadata.get("type")
    value = None if prop is None else prop.value
    return value if isinstance(value, str) and "{" not in value else None


def _overlay(base: NativeMessage, rendered: NativeMessage,
             definition: MessageDefinition) -> NativeMessage:
    """`base` with the fields `definition` declares, as `rendered` has them: scalars
    replaced, named entries (headers, user properties, sections) replaced by name and
    added. The address is not taken: the answer hook addresses the answer."""
    prof = find_profile(base.protocol)
    address = None if prof is None else prof.address
    # The address is a field (a topic, a subject) or a member of a section (AMQP's
    # properties.subject): only that member is left out, the section's others apply.
    whole = address.field if address is not None and address.name is None else None
    # In declaration order, so that the answer's fields come out the same every time.
    declared = [f for f in dict.fromkeys(c.field for c in definition.protocol_options)
                if f != whole]
    fields: dict[str, JSON] = dict(base.fields)
    for name in declared:
        value = rendered.fields.get(name)
        if value is None:
            continue
        old = fields.get(name)
        if isinstance(value, list) and isinstance(old, list):
            names = {str(e.get("name", "")).lower() for e in value if isinstance(e, dict)}
            kept = [e for e in old if not (isinstance(e, dict)
                                           and str(e.get("name", "")).lower() in names)]
            fields[name] = [*kept, *value]
        elif isinstance(value, dict):  # a section: by name
            if address is not None and address.field == name:
                value = {k: v for k, v in value.items() if k != address.name}
            fields[name] = {**old, **value} if isinstance(old, dict) else value
        else:
            fields[name] = value
    return base.replace_fields(fields)


__all__ = ["NONCONFORMING", "Judged", "ReplyDefinitions"]
