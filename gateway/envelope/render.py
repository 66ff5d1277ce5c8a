"""Render a CloudEvent from a matched definition's `envelopemetadata` and the context.

Each definition's envelope is compiled once into an `EnvelopeTemplate`: constants are
validated and coerced at compile time, so rendering a message only expands the templated
attributes, checks those values, and fills `id`, `time` and `datacontenttype`.

Rules (shared/spec/README.md and the spec's CloudEvents section):
- `specversion` is always "1.0".
- `id`: the declared value when given, else derived from the native identity
  (`gateway.envelope.ids`), else a random UUID.
- `time`: the declared value, except the `0000-01-01T00:00:00Z` sentinel or no value,
  which mean the receive time (`received_at` of the record, else now).
- `datacontenttype`: declared value, else the native content type, else the definition's
  `datacontenttype`, else inferred from `dataschemaformat` (JSON Schema and JSON Structure
  mean application/json), else application/json when the body is JSON.
- `dataschema`: declared value, else `dataschemauri` when it is an absolute URI.
- Every attribute is coerced to its declared type; a value that cannot be coerced, or a
  result that is not a valid CloudEvent, is a `RenderError`, never an invalid event.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from gateway.cloudevents.bindings.layouts import Layout
from gateway.cloudevents.bindings.wireform import BinaryForm
from gateway.cloudevents.event import CloudEvent
from gateway.cloudevents.timestamps import format_rfc3339, parse_rfc3339
from gateway.cloudevents.uri import is_uri, is_uri_reference
from gateway.definitions.model import MessageDefinition, Property
from gateway.envelope.fastrender import AttributeShape, Renderer, Shape, renderer
from gateway.envelope.ids import event_id
from gateway.envelope.wirewriter import WireWriter, writer
from gateway.json import knowntypes
from gateway.json.values import JSON, as_text
from gateway.record import NativeMessage
from gateway.templates.template import Template, TemplateError

TIME_SENTINEL = "0000-01-01T00:00:00Z"
_NAME = re.compile(r"[a-z0-9]{1,}\Z")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
_ABSOLUTE_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:[^\s]*\Z")
_URI_REFERENCE = re.compile(r"[^\s\x00-\x1f\x7f]+\Z")
_MEDIA_TYPE = re.compile(r"[\w.+\-!#$&^]+/[\w.+\-!#$&^]+\s*(;.*)?\Z")
_PLAIN_TEXT = frozenset({"string", "uritemplate", "any", ""})
_SYMBOL = re.compile(r"[A-Za-z0-9_]*\Z")
_INTEGER = re.compile(r"-?\d+\Z")
_INT32 = (-(2**31), 2**31 - 1)


@dataclass(frozen=True)
class RenderError:
    """Why no CloudEvent could be rendered. `reason` is a dead-letter reason code."""

    reason: str  # "missing-context" | "invalid-envelope"
    message: str

    def __str__(self) -> str:
        return self.message


class _Attribute:
    __slots__ = ("constant", "name", "template", "type")

    def __init__(self, name: str, typ: str, template: Template | None, constant: Any) -> None:
        self.name = name
        self.type = typ
        self.template = template
        self.constant = constant


# CloudEvents core attributes whose type is String (or URI-reference/URI, text too): a
# definition may constrain one with another type ("subject": {"type": "integer"}), which
# checks the value; the attribute still carries its stringified form.
_STRING_CORE = frozenset({"id", "source", "type", "subject", "datacontenttype"})


def coerce(name: str, typ: str, value: JSON) -> Any:
    """Coerce an attribute value to its declared CloudEvents type; ValueError if it can't.
    Core String attributes get the checked value's canonical text ("3" for 3)."""
    checked = _coerce(name, typ, value)
    if name in _STRING_CORE and not isinstance(checked, str):
        return format_rfc3339(checked) if isinstance(checked, datetime) else as_text(checked)
    return checked


def _coerce(name: str, typ: str, value: JSON) -> Any:
    if typ == "integer":
        number: int | None = None
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        elif isinstance(value, str) and _INTEGER.match(value):
            number = int(value)
        if number is None or not _INT32[0] <= number <= _INT32[1]:
            raise ValueError(f"{name}: {value!r} is not a 32-bit integer")
        return number
    if typ == "boolean":
        if isinstance(value, bool):
            return value
        if value in ("true", "false"):
            return value == "true"
        raise ValueError(f"{name}: {value!r} is not a boolean (true or false)")
    if typ in ("timestamp", "datetime"):
        try:
            return parse_rfc3339(as_text(value))
        except ValueError:
            raise ValueError(f"{name}: {value!r} is not an RFC 3339 timestamp") from None
    text = as_text(value)
    if _CONTROL.search(text):
        raise ValueError(f"{name}: {text!r} contains control characters")
    # The declared types as matching reads them (`gateway.matching.values.conforms`).
    if typ == "uri" and not is_uri(text):
        raise ValueError(f"{name}: {text!r} is not an absolute URI")
    if typ == "urireference" and not is_uri_reference(text):
        raise ValueError(f"{name}: {text!r} is not a URI reference")
    if typ == "symbol" and not _SYMBOL.match(text):
        raise ValueError(f"{name}: {text!r} is not a symbol (letters, digits, underscore)")
    return text


def _check_attribute(name: str, value: Any) -> str | None:
    """The CloudEvents rule for one core attribute, or None when it holds."""
    if name in ("id", "source", "type"):
        if not isinstance(value, str) or not value:
            return f"{name}: required and must be a non-empty string"
        if name == "source" and not _URI_REFERENCE.match(value):
            return f"source: {value!r} is not a URI-reference"
    elif name == "subject":
        if not isinstance(value, str) or not value:
            return "subject: must be a non-empty string when present"
    elif name == "dataschema":
        if not (isinstance(value, str) and _ABSOLUTE_URI.match(value)):
            return f"dataschema: {value!r} is not an absolute URI"
    elif name == "datacontenttype" and not (isinstance(value, str) and _MEDIA_TYPE.match(value)):
        return f"datacontenttype: {value!r} is not a media type (type/subtype)"
    return None


_CORE = ("id", "source", "type", "subject", "dataschema", "datacontenttype")

# The texts a plain-text attribute may render to, per name: no control characters (every
# attribute) and the attribute's own CloudEvents rule (`_check_attribute`) in one regex.
_NO_CONTROL = r"\x00-\x1f\x7f-\x9f"  # what `_CONTROL` finds
_ACCEPTS: dict[str, re.Pattern[str]] = {
    "id": re.compile(rf"[^{_NO_CONTROL}]+\Z"),
    "type": re.compile(rf"[^{_NO_CONTROL}]+\Z"),
    "subject": re.compile(rf"[^{_NO_CONTROL}]+\Z"),
    "source": re.compile(rf"[^\s{_NO_CONTROL}]+\Z"),  # a URI-reference: no whitespace
    "dataschema": re.compile(rf"[A-Za-z][A-Za-z0-9+.\-]*:[^\s{_NO_CONTROL}]*\Z"),
}
_ANY_TEXT = re.compile(rf"[^{_NO_CONTROL}]*\Z")
# What a printable text (`str.isprintable`: no control character, no whitespace but the
# space) needs besides to pass its attribute's regex, per name: 1 nothing, 2 to be
# non-empty, 3 to be non-empty without spaces; 0 (dataschema, datacontenttype): the
# regex decides.
_QUICK = {"id": 2, "type": 2, "subject": 2, "source": 3, "dataschema": 0,
          "datacontenttype": 0}


@lru_cache(maxsize=256)
def _accepts(name: str) -> Callable[[str], object]:
    """A test that is not None exactly when a plain text value of attribute `name` is
    one `render_checked` keeps. `datacontenttype` has a grammar of its own: both checks."""
    if name == "datacontenttype":
        def media_type(text: str) -> object:
            return _ANY_TEXT.match(text) and _MEDIA_TYPE.match(text)

        return media_type
    return _ACCEPTS.get(name, _ANY_TEXT).match


def _check_core(attributes: Mapping[str, Any], names: tuple[str, ...] = _CORE) -> str | None:
    for name in names:
        if name in attributes or name in ("id", "source", "type"):
            problem = _check_attribute(name, attributes.get(name))
            if problem is not None:
                return problem
    return None


def _default_type(name: str) -> str:
    if name == "time":
        return "timestamp"
    if name in ("source", "subject", "dataschema"):
        return "uritemplate"
    return "string"


def _infer_content_type(definition: MessageDefinition) -> str | None:
    if definition.datacontenttype:
        return definition.datacontenttype
    fmt = (definition.dataschemaformat or "").lower()
    if fmt.startswith(("jsonschema", "json")):
        return "application/json"
    if fmt.startswith("avro"):
        return "application/avro"
    if fmt.startswith("protobuf"):
        return "application/protobuf"
    if fmt.startswith("xsd") or fmt.startswith("xml"):
        return "application/xml"
    return None


def _unrendered(record: NativeMessage, context: Mapping[str, str], now: datetime | None,
                consts: tuple[Any, ...]) -> None:
    """No generated renderer: `render_checked` renders."""
    return None


class EnvelopeTemplate:
    """The compiled `envelopemetadata` of one definition."""

    # Slots: rendering reads the plan from the object itself, not from a dict beside it
    # (with thousands of definitions, one memory line less to miss per message).
    __slots__ = ("_by_protocol", "_consts", "_own", "_shape", "attributes", "content_type",
                 "dataschema", "definition", "error", "fixed", "required_unfilled",
                 "runtime_checked", "time_from_receive")

    def __init__(self, definition: MessageDefinition) -> None:
        self.definition = definition
        self.error: RenderError | None = None  # a problem found at compile time
        self.attributes: list[_Attribute] = []
        self.fixed: dict[str, Any] = {"specversion": "1.0"}
        self.time_from_receive = True
        self.required_unfilled: list[str] = []
        self.content_type = _infer_content_type(definition)
        self.dataschema: str | None = None
        uri = definition.dataschemauri
        if uri and _ABSOLUTE_URI.match(uri) and "{" not in uri:
            self.dataschema = uri
        if not definition.is_cloudevent:
            self.error = RenderError(
                "no-envelope",
                f"{definition.xid} declares no CloudEvents/1.0 envelope; there is no "
                "CloudEvent to render (deliver it natively or add an envelope)",
            )
        for name, prop in definition.envelope_metadata.items():
            try:
                self._compile(name, prop)
            except (ValueError, TemplateError) as exc:
                self.error = RenderError(
                    "invalid-envelope",
                    f"{definition.xid}: envelopemetadata.{name}: {exc}",
                )
        # Constants were checked above; only templated core attributes need a look per
        # message (source must stay a URI-reference, dataschema an absolute URI).
        self.runtime_checked = tuple(n for n in _CORE if n in {a.name for a in self.attributes})
        if self.error is None:
            # The constants, and that id (always generated), source and type have a value.
            # Templated attributes are checked per message (`runtime_checked`): a sample
            # value standing in for them broke the rules of dataschema (an absolute URI) and
            # datacontenttype (a media type), so a definition templating either never rendered.
            problem = _check_core({"id": "x", **self.fixed},
                                  tuple(n for n in _CORE if n not in self.runtime_checked))
            if problem is not None:
                self.error = RenderError("invalid-envelope", f"{definition.xid}: {problem}")
        if self.error is None:
            unfilled = [n for n in self.required_unfilled if n not in ("id", "time")]
            if unfilled:
                self.error = RenderError(
                    "invalid-envelope",
                    f"{definition.xid}: envelopemetadata declares {', '.join(unfilled)} "
                    "required but gives no value to render",
                )
        self._plan()

    def _plan(self) -> None:
        """How `render` renders, decided once: the shape of its generated renderer
        (`envelope.fastrender`) and the constants it is called with; None when every
        message goes to `render_checked` (an error, a typed or digit-named template)."""
        self._shape: Shape | None = None
        self._consts: tuple[Any, ...] | None = None
        self._by_protocol: dict[str, Renderer] = {}
        self._own: tuple[str, Renderer] = ("", _unrendered)
        if self.error is not None:
            return
        attributes: list[AttributeShape] = []
        consts: list[Any] = [self.fixed]
        for attribute in self.attributes:
            assert attribute.template is not None
            fmt = attribute.template.format_string
            if attribute.type not in _PLAIN_TEXT or fmt is None:
                return  # typed or digit-named placeholders: `render_checked` only
            parts = attribute.template.parts
            # A lone `{name}` is the captured value itself: a dict lookup, no formatting.
            whole = parts[0].name if len(parts) == 1 else None
            attributes.append((attribute.name, whole, _QUICK.get(attribute.name, 1)))
            consts += [sys.intern(fmt), _accepts(attribute.name)]
        declared = set(self.fixed) | {a.name for a in self.attributes}
        dataschema = self.dataschema if "dataschema" not in declared else None
        self._shape = Shape(tuple(attributes), "id" not in declared, self.time_from_receive,
                            "datacontenttype" not in declared, self.content_type is not None,
                            dataschema is not None, "traceparent" not in declared)
        self._consts = (*consts, self.content_type, dataschema)
        # The renderer for records of the definition's own protocol, at hand in the
        # template itself (other protocols of its family: `_by_protocol`).
        protocol = self.definition.protocol or ""
        self._own = (protocol, self._renderer(protocol))

    @property
    def ids_from_records(self) -> bool:
        """Whether an event's id comes from its record (a name-based id of its identity,
        or a random one without), not from the definition; asked of a template that has
        a fused writer (`wire_writer`)."""
        return self._shape is not None and self._shape.fill_id

    def wire_writer(self, protocol: str, form: BinaryForm, layout: Layout
                    ) -> tuple[WireWriter, tuple[Any, ...]] | None:
        """The fused writer of this definition's records of `protocol` into `form`'s
        binary records, for events of `layout` (`envelope.wirewriter`), and the constants
        to call it with; None where `render_checked` renders every message."""
        if self._shape is None or self._consts is None:
            return None
        made = writer(self._shape, protocol, form, layout, _HELPERS)
        return None if made is None else (made, self._consts)

    def _renderer(self, protocol: str) -> Renderer:
        assert self._shape is not None
        return renderer(self._shape, protocol, _HELPERS)

    def _compile(self, name: str, prop: Property) -> None:
        if not _NAME.match(name) or name == "data":
            raise ValueError(f"{name!r} is not a CloudEvents attribute name ([a-z0-9]+)")
        typ = prop.type or _default_type(name)
        if name == "specversion":
            if prop.has_value and prop.value != "1.0":
                raise ValueError(f"specversion must be \"1.0\", not {prop.value!r}")
            return
        if not prop.has_value or prop.value is None:
            if prop.required:
                self.required_unfilled.append(name)
            return
        if name == "time" and prop.value == TIME_SENTINEL:
            return
        value = prop.value
        if isinstance(value, str) and "{" in value:
            template = Template.parse(value)
            if not template.is_constant:
                self.attributes.append(_Attribute(name, typ, template, None))
                if name == "time":
                    self.time_from_receive = False
                return
        self.fixed[name] = coerce(name, typ, value)
        if name == "time":
            self.time_from_receive = False

    def render(
        self,
        record: NativeMessage,
        context: Mapping[str, str],
        now: datetime | None = None,
    ) -> CloudEvent | RenderError:
        """The CloudEvent of `record`, or why there is none.

        The common case in one pass: every templated attribute plain text whose value
        passes its rule, the native content type (if any) a media type. Anything else
        (a missing placeholder, a value that breaks a rule, a typed attribute) goes to
        `render_checked`, which renders from scratch and phrases the error, so the
        result is always `render_checked`'s."""
        consts = self._consts
        if consts is None:
            return self.render_checked(record, context, now)
        own_protocol, made = self._own
        if record.protocol is not own_protocol and record.protocol != own_protocol:
            other = self._by_protocol.get(record.protocol)
            if other is None:
                other = self._by_protocol[record.protocol] = self._renderer(record.protocol)
            made = other
        event = made(record, context, now, consts)
        return event if event is not None else self.render_checked(record, context, now)

    def render_checked(
        self,
        record: NativeMessage,
        context: Mapping[str, str],
        now: datetime | None = None,
    ) -> CloudEvent | RenderError:
        """`render` one step at a time, checking each: the reference behaviour, and what
        phrases every `RenderError`."""
        if self.error is not None:
            return self.error
        attributes: dict[str, Any] = dict(self.fixed)
        for attribute in self.attributes:
            assert attribute.template is not None
            try:
                text = attribute.template.expand_strings(context)
            except KeyError as missing:
                return RenderError(
                    "missing-context",
                    f"envelopemetadata.{attribute.name}: placeholder {{{missing.args[0]}}} "
                    "has no value (it is not captured from the message)",
                )
            if attribute.type in _PLAIN_TEXT:
                # Hot path: a string needs only the control-character rule.
                if _CONTROL.search(text):
                    return RenderError("invalid-envelope",
                                       f"{attribute.name}: {text!r} contains control characters")
                attributes[attribute.name] = text
                continue
            try:
                attributes[attribute.name] = coerce(attribute.name, attribute.type, text)
            except ValueError as exc:
                return RenderError("invalid-envelope", str(exc))
        if "id" not in attributes:
            attributes["id"] = event_id(record)
        if self.time_from_receive:
            attributes["time"] = _receive_time(record, now)
        if "datacontenttype" not in attributes:
            native = record.content_type
            if native is not None:
                problem = _check_attribute("datacontenttype", native)  # a value from the wire
                if problem is not None:
                    return RenderError("invalid-envelope", problem)
                attributes["datacontenttype"] = native
            elif self.content_type is not None:
                attributes["datacontenttype"] = self.content_type
            elif record.has_json_data:
                attributes["datacontenttype"] = "application/json"
        if "dataschema" not in attributes and self.dataschema is not None:
            attributes["dataschema"] = self.dataschema
        if "traceparent" not in attributes:
            _carry_trace_context(record, attributes)
        for name in self.runtime_checked:
            problem = _check_attribute(name, attributes.get(name))
            if problem is not None:
                return RenderError("invalid-envelope", problem)
        if record.has_json_data:
            return CloudEvent.trusted(attributes, record.data, True)
        return CloudEvent.trusted(attributes, record.payload, record.payload is not None)


# The canonical form adapters write (UTC, optional fraction of at most 6 digits) parses
# with the C `fromisoformat`; anything else goes through the strict RFC 3339 parser.
_CANONICAL_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,6})?Z\Z")


_TRACEPARENT = re.compile(r"[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}\Z")

def _carry_trace_context(record: NativeMessage, attributes: dict[str, Any]) -> None:
    """W3C trace context from the native message into the CloudEvents distributed-tracing
    extension (`traceparent`, `tracestate`), so a trace continues across the gateway."""
    value = trace_header(record, "traceparent")
    if value is None or not _TRACEPARENT.match(value):
        return  # absent, or malformed: never invent or forward a broken trace
    attributes["traceparent"] = value
    state = trace_header(record, "tracestate")
    if state:
        attributes["tracestate"] = state


# Content types read from messages, and whether each is a media type (`_MEDIA_TYPE`): a
# source sends the same one or two on every message, and the expression cost a quarter of
# a microsecond each time. Bounded against a sender of endless new ones, or of long ones
# (a Kafka header may be as long as the record): only short texts are kept.
_MEDIA_TYPES_MAX = 256
_MEDIA_TYPE_KEPT = 128  # characters
_MEDIA_TYPES_SEEN: dict[str, bool] = {}


def media_type_seen(text: str) -> bool:
    """Whether `text` is a media type, remembered (see `_MEDIA_TYPES_SEEN`)."""
    known = _MEDIA_TYPES_SEEN.get(text)
    if known is None:
        known = _MEDIA_TYPE.match(text) is not None
        knowntypes.keep(_MEDIA_TYPES_SEEN, text, known, _MEDIA_TYPES_MAX, _MEDIA_TYPE_KEPT)
    return known


def trace_header(record: NativeMessage, name: str) -> str | None:
    """A trace-context header wherever the protocol keeps application metadata."""
    return record.metadata(name)


# Adapters stamp receive times at a coarse resolution, so bursts share one string: the
# last parsed one is remembered.
# One (text, time) pair, swapped whole, so a reader never sees the text of one and the
# time of another; generated renderers read it too (None at first: an empty
# `received_at` once matched the initial "" and got a naive time).
_LAST_TIME: list[tuple[str | None, datetime]] = [(None, datetime.min)]


def _receive_time(record: NativeMessage, now: datetime | None) -> datetime:
    text = record.received_at
    if text is not None:
        last = _LAST_TIME[0]
        if text == last[0]:
            return last[1]
        parsed = _parse_receive_time(text)
        if parsed is not None:
            _LAST_TIME[0] = (text, parsed)
            return parsed
    return now if now is not None else datetime.now(UTC)


def _parse_receive_time(text: str) -> datetime | None:
    if text is not None:
        if _CANONICAL_TIME.match(text):
            try:
                return datetime.fromisoformat(text)
            except ValueError:
                pass  # e.g. month 13: the strict parser reports it
        try:
            return parse_rfc3339(text)
        except ValueError:
            pass  # a bad received_at falls back to now rather than losing the message
    return None


class EnvelopeRenderer:
    """Caches one `EnvelopeTemplate` per definition."""

    def __init__(self) -> None:
        self._templates: dict[str, EnvelopeTemplate] = {}

    def template(self, definition: MessageDefinition) -> EnvelopeTemplate:
        template = self._templates.get(definition.xid)
        if template is None or template.definition is not definition:
            template = EnvelopeTemplate(definition)
            self._templates[definition.xid] = template
        return template

    def render(
        self,
        definition: MessageDefinition,
        record: NativeMessage,
        context: Mapping[str, str],
        now: datetime | None = None,
    ) -> CloudEvent | RenderError:
        template = self._templates.get(definition.xid)
        if template is None or template.definition is not definition:
            template = self.template(definition)
        return template.render(record, context, now)


# What the generated renderers (`envelope.fastrender`) call besides the protocol readers.
_HELPERS: dict[str, object] = {
    "TRACEPARENT": _TRACEPARENT.match,
    "MEDIA_TYPES": _MEDIA_TYPES_SEEN, "media_type_seen": media_type_seen,
    "LAST_TIME": _LAST_TIME, "receive_time": _receive_time,
}
