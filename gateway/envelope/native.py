"""The template aspect: render a native message from a target definition.

Given a CloudEvent (or a plain context), fill the target definition's `protocoloptions`
(topic, key, headers, properties, path ...) and produce a `NativeMessage` of that
protocol. The context is built from:
1. an explicit context mapping, if given;
2. placeholders captured by matching the target definition's `envelopemetadata`
   templates against the event's attributes (source `/stores/{storeid}` yields storeid);
3. the event's attributes by name (`{subject}`, `{type}`, extensions).
A placeholder that none of these fills is an error naming it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.cloudevents.event import CloudEvent
from gateway.cloudevents.timestamps import format_rfc3339
from gateway.definitions.model import MessageDefinition
from gateway.envelope.render import RenderError
from gateway.json.values import JSON, as_text
from gateway.protocols import (
    definition_field,
    field_access,
    find_profile,
    percent_decoded,
    set_content_type,
)
from gateway.record import NativeMessage
from gateway.templates.template import Template, TemplateError

_NUMERIC = {"integer"}


def _event_context(definition: MessageDefinition, event: CloudEvent) -> dict[str, str]:
    context: dict[str, str] = {}
    attrs = event.get_attributes()
    for name, prop in definition.envelope_metadata.items():
        value = attrs.get(name)
        if value is None or not (isinstance(prop.value, str) and "{" in prop.value):
            continue
        try:
            captures = Template.parse(prop.value).match(_text(value))
        except TemplateError:
            continue
        if captures:
            for key, captured in captures.items():
                context.setdefault(key, captured)
    for name, value in attrs.items():
        context.setdefault(name, _text(value))
    return context


def _text(value: Any) -> str:
    if hasattr(value, "isoformat"):
        return format_rfc3339(value)
    return as_text(value)


def _coerce(typ: str, value: str) -> JSON:
    if typ in _NUMERIC:
        try:
            return int(value)
        except ValueError:
            return value
    if typ == "boolean" and value in ("true", "false"):
        return value == "true"
    return value


def context_names(definition: MessageDefinition) -> set[str]:
    """The context variables `definition`'s protocol options name: what `render_native`
    needs to fill every placeholder (templates that do not parse name none)."""
    names: set[str] = set()
    for constraint in definition.protocol_options:
        value = constraint.prop.value
        if isinstance(value, str) and "{" in value:
            try:
                names.update(Template.parse(value).names)
            except TemplateError:
                continue
    return names


def render_native(
    definition: MessageDefinition,
    event: CloudEvent | None = None,
    context: Mapping[str, str] | None = None,
) -> NativeMessage | RenderError:
    """A native message of `definition.protocol` carrying `event`'s data (if any)."""
    protocol = definition.protocol
    if protocol is None:
        return RenderError(
            "no-protocol",
            f"{definition.xid} declares no protocol; it cannot be rendered as a native message",
        )
    ctx: dict[str, str] = {}
    if event is not None:
        ctx.update(_event_context(definition, event))
    if context:
        ctx.update(context)
    fields: dict[str, JSON] = {}
    for constraint in definition.protocol_options:
        prop = constraint.prop
        if not prop.has_value or prop.value is None:
            continue
        raw = prop.value
        value: JSON
        if isinstance(raw, str) and "{" in raw:
            try:
                # HTTP path and query go on the wire percent-encoded (RFC 6570 simple
                # expansion): a value `a/b` is one segment, `a%2Fb`.
                text = Template.parse(raw).expand(
                    ctx, encode=percent_decoded(protocol, constraint.field))
            except TemplateError as exc:
                return RenderError("invalid-definition", f"{definition.xid}: {exc}")
            except KeyError as missing:
                where = constraint.field + (f"[{constraint.name}]" if constraint.name else "")
                return RenderError(
                    "missing-context",
                    f"{definition.xid}: protocoloptions.{where}: placeholder "
                    f"{{{missing.args[0]}}} has no value in the event or context",
                )
            value = _coerce(prop.type, text)
        else:
            value = raw
        _place(protocol, fields, constraint.field, constraint.name, value)
    prof = find_profile(protocol)
    data: JSON = None
    payload: bytes | None = None
    has_data = False
    if event is not None:
        body = event.get_data()
        if isinstance(body, (bytes, bytearray)):
            payload = bytes(body)
        elif isinstance(body, str) and not _is_json(event):
            payload = body.encode()
        elif body is not None or event.has_data:  # JSON null is data too
            data, has_data = body, True
        ctype = event.get_attributes().get("datacontenttype")
        if ctype is None and has_data:
            ctype = "application/json"
        if isinstance(ctype, str) and prof is not None:
            set_content_type(fields, prof, ctype)
    for name, default in prof.rendered_defaults.items() if prof is not None else ():
        fields.setdefault(name, default)  # HTTP: POST, the spec's default method
    if has_data:
        return NativeMessage(protocol, fields, data=data)
    return NativeMessage(protocol, fields, payload=payload)


def _is_json(event: CloudEvent) -> bool:
    ctype = event.get_attributes().get("datacontenttype")
    if not isinstance(ctype, str):
        return True
    media = ctype.split(";")[0].strip().lower()
    return media.endswith("/json") or media.endswith("+json")


def _place(protocol: str, fields: dict[str, JSON], field: str, name: str | None,
           value: JSON) -> None:
    access = field_access(protocol, field, name)
    if access.kind == "scalar" or access.name is None:
        fields[field] = value
    elif access.kind == "section":
        section = fields.setdefault(field, {})
        assert isinstance(section, dict)
        spec = definition_field(protocol, field)
        # AMQP section members keep their type; HTTP query values are text.
        typed = spec is None or spec.kind == "section"
        section[access.name] = value if typed else as_text(value)
    else:  # list fields and Kafka's header map become {name, value} pairs in the record
        pairs = fields.setdefault(field, [])
        assert isinstance(pairs, list)
        pairs.append({"name": access.name, "value": as_text(value)})
