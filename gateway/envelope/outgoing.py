"""Outgoing records: a converted CloudEvent rendered for one output of a route.

    event ──► CloudEvent binding (binary | structured)  ─┐
          └─► native message of a target definition  ────┴─► + defaults ─► + trace ─► record

- `OutputFormat.render` is what one output writes for an event: the event in the output
  protocol's CloudEvents binding, or (`deliver: native`) a native message rendered from
  the producer endpoint's definition for the event's type; then the output's defaults
  (address fields such as topic or subject, which may hold placeholders filled from the
  event's attributes and the match context) for fields the record lacks; then the event's
  W3C trace context as the protocol's own `traceparent`/`tracestate` header.
- `with_defaults` is also how the dead letter gets its address fields.
- `member_record` is what to dead-letter for one event of a source message: for HTTP,
  where one request may carry a batch, that event alone.

Pure functions of their arguments (no I/O, no asyncio): the route calls them between
convert and send. A record that cannot be rendered is a `RenderFailed`; the route
dead-letters the message as undeliverable.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal

from gateway.cloudevents import encode
from gateway.cloudevents.event import CloudEvent
from gateway.definitions.model import MessageDefinition
from gateway.envelope.native import render_native
from gateway.envelope.render import RenderError
from gateway.json.values import JSON
from gateway.protocols import add_metadata, find_profile
from gateway.record import NativeMessage
from gateway.templates.template import Template, TemplateError

__all__ = ["Deliver", "Mode", "OutputFormat", "RenderFailed", "member_record", "with_defaults",
           "with_trace"]

Mode = Literal["binary", "structured"]
Deliver = Literal["cloudevent", "native"]


class RenderFailed(Exception):
    """The event cannot become this output's record: no definition of the producer fits,
    a value does not render, the binding does not exist, or a default's template has no
    value. Sending again would not help."""


@dataclass(frozen=True)
class OutputFormat:
    """How one output writes events: its protocol and CloudEvents mode, whether it
    delivers the CloudEvent or a native message rendered from its endpoint's
    `definitions`, and the fields every record gets unless it has them (`defaults`)."""

    protocol: str
    mode: Mode = "binary"
    deliver: Deliver = "cloudevent"
    defaults: Mapping[str, JSON] = field(default_factory=dict)
    definitions: Sequence[MessageDefinition] = ()
    # `deliver: native`: the target definition found per event type (a scan of
    # `definitions`, once per type rather than per event; bounded in count and length:
    # passed-through events bring types of their own).
    _targets: dict[str, MessageDefinition | None] = field(
        default_factory=dict, init=False, compare=False, repr=False)

    def render(self, event: CloudEvent, context: Mapping[str, str],
               key: tuple[str, str] | None = None) -> NativeMessage:
        """The record for `event`; `context` holds the placeholders the match captured.
        `key` (field, value): a partitioning key the record gets unless it has one there
        already (the event's `partitionkey` wins). Raises RenderFailed."""
        if self.deliver == "native":
            record = self._native(event, context)
            record = with_trace(with_defaults(record, self.defaults, event, context), event)
            if key is not None and record.fields.get(key[0]) is None:
                record = record.replace_fields({**record.fields, key[0]: key[1]})
            return record
        record = self._binding(event)
        # The binding built these fields just now, for this record alone: the defaults
        # and the key go into them, not into a copy under a second record. Into those a
        # producer reads (a `WireRecord` makes its headers only if someone asks), unless
        # a default is for the headers themselves.
        fields = record.fields if "headers" in self.defaults else record.wire_fields()
        assert isinstance(fields, dict)
        _add_defaults(fields, self.defaults, event, context)
        if key is not None and fields.get(key[0]) is None:
            fields[key[0]] = key[1]
        return with_trace(record, event)

    def _binding(self, event: CloudEvent) -> NativeMessage:
        try:
            return encode(event, self.protocol, self.mode)
        except ValueError as exc:
            raise RenderFailed(str(exc)) from exc

    def _native(self, event: CloudEvent, context: Mapping[str, str]) -> NativeMessage:
        kind = event.get_type()
        targets = self._targets
        if kind in targets:
            target = targets[kind]
        else:
            target = _target_definition(self.definitions, event)
            if len(targets) < _TARGETS_MAX and len(kind) <= _TYPE_KEPT:
                targets[kind] = target
        if target is None:
            raise RenderFailed("no message definition of the producer endpoint fits "
                               f"CloudEvent type {event.get_type()!r}")
        rendered = render_native(target, event, context)
        if isinstance(rendered, RenderError):
            raise RenderFailed(rendered.message)
        return rendered


_TARGETS_MAX = 4096
_TYPE_KEPT = 256  # characters: a sender's long types are not kept


def _target_definition(definitions: Sequence[MessageDefinition],
                       event: CloudEvent) -> MessageDefinition | None:
    """The definition declaring the event's type, else the only one with a protocol."""
    typed = [d for d in definitions
             if (p := d.envelope_metadata.get("type")) is not None and p.value == event.get_type()]
    if len(typed) >= 1:
        return typed[0]
    native = [d for d in definitions if d.protocol is not None]
    return native[0] if len(native) == 1 else None


def with_defaults(record: NativeMessage, defaults: Mapping[str, JSON],
                  event: CloudEvent | None = None,
                  context: Mapping[str, str] | None = None) -> NativeMessage:
    """`record` with every default it lacks; a string default may hold placeholders,
    filled from the event's attributes and then the match `context` (which wins).
    Raises RenderFailed naming a placeholder without a value."""
    if not defaults or all(name in record.fields for name in defaults):
        return record
    fields = dict(record.fields)
    _add_defaults(fields, defaults, event, context)
    return record.replace_fields(fields)


def _add_defaults(fields: dict[str, JSON], defaults: Mapping[str, JSON],
                  event: CloudEvent | None, context: Mapping[str, str] | None) -> None:
    """`with_defaults`, into `fields` themselves."""
    for name, value in defaults.items():
        if name in fields:
            continue
        if isinstance(value, str) and "{" in value:
            value = _fill_default(name, value, event, context)
        fields[name] = value


def _fill_default(name: str, text: str, event: CloudEvent | None,
                  context: Mapping[str, str] | None) -> str:
    """A templated default filled with the values of the names it uses: the match
    context's, else the event attribute's (`str` of it)."""
    template = _default_template(text)
    if isinstance(template, TemplateError):
        raise RenderFailed(f"{name} template {text!r}: no value for {template}") from template
    attributes = event.get_attributes() if event is not None else {}
    values: dict[str, object] = {}
    for placeholder in template.names:
        if context is not None and placeholder in context:
            values[placeholder] = context[placeholder]
        elif placeholder in attributes:
            values[placeholder] = str(attributes[placeholder])
    try:
        return template.expand(values)
    except KeyError as exc:
        raise RenderFailed(f"{name} template {text!r}: no value for {exc}") from exc


@lru_cache(maxsize=1024)
def _default_template(text: str) -> Template | TemplateError:
    """A default's template, parsed once (outputs have few defaults; every event fills
    them), or why it does not parse (reported for each event, as before)."""
    try:
        return Template.parse(text)
    except TemplateError as exc:
        return exc


def with_trace(record: NativeMessage, event: CloudEvent) -> NativeMessage:
    """Also carry the CloudEvent's W3C trace context as the protocol's own `traceparent`
    header, so tracers that know nothing of CloudEvents continue the trace. A header the
    record already has is kept."""
    parent = event.get("traceparent")
    if not isinstance(parent, str):
        return record  # the common case, decided without copying the attributes
    trace = {"traceparent": parent}
    state = event.get("tracestate")
    if isinstance(state, str):
        trace["tracestate"] = state
    prof = find_profile(record.protocol)
    if prof is None or prof.metadata is None:
        return record  # MQTT 3.1.1 has no headers
    fields = dict(record.fields)
    add_metadata(fields, prof.metadata, trace)
    return record.replace_fields(fields)


def member_record(source: NativeMessage, event: CloudEvent | None) -> NativeMessage:
    """What to dead-letter for one event of `source` (the one it carried, else the one
    it was converted to): the source itself, or, for HTTP, where one request may carry a
    batch, that event alone as a structured CloudEvent under the request's metadata
    (nothing of the batch lost, nothing delivered twice)."""
    prof = find_profile(source.protocol)
    if event is None or prof is None or not prof.batches:
        return source
    member = encode(event, prof.name, "structured")
    fields = dict(source.fields)
    fields["headers"] = [*member.fields.get("headers", [])]  # type: ignore[misc]
    return NativeMessage(prof.name, fields, data=member.data, payload=member.payload,
                         received_at=source.received_at)
