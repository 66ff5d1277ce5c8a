"""Envelope templates rendered by generated Python: one function per shape of template and
protocol of the record.

`EnvelopeTemplate.render` fills the same few attributes for every message of a
definition. Interpreting its plan (a loop over the templated attributes, then asking
the protocol's readers for the identity, content type and trace context) costs as much
as the work itself, so the plan is turned into straight-line code once: the attributes
unrolled, their checks inlined, the protocol's fields read where the profile says they
are. What differs between definitions of one shape (the constant attributes, format
strings, content type, dataschema) is passed in as `consts`, so a catalog of 10,000
definitions has a handful of these functions, compiled once each.

A generated function returns the CloudEvent, or None wherever `render_checked` must
decide (a missing placeholder, a value that breaks its rule, a native content type
that is not a media type): the caller then renders with `render_checked`, so the result
is always that of the reference. `tests/unit/core/test_render_fast.py` compares both.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from gateway.cloudevents.event import CloudEvent
from gateway.envelope.ids import name_uuid, random_uuid
from gateway.json.values import as_text
from gateway.protocols import find_profile
from gateway.protocols.accessors import ACCESSORS, scalar_identity_code
from gateway.record import _NO_DATA, NativeMessage

# (record, context, now, consts) -> the event, or None: `render_checked` decides.
Renderer = Callable[[NativeMessage, Mapping[str, str], "datetime | None", tuple[Any, ...]],
                    "CloudEvent | None"]
# One templated attribute: its name, the placeholder when the template is that alone,
# its `_QUICK` rule (see `envelope.render`).
AttributeShape = tuple[str, "str | None", int]


class Shape:
    """What the code of a generated renderer depends on (the constants are not part of
    it): its attributes, which of id, time, datacontenttype and trace context it adds,
    whether the definition has a content type and a dataschema to add."""

    __slots__ = ("attributes", "fill_content_type", "fill_id", "fill_time", "fill_trace",
                 "has_content_type", "has_dataschema")

    def __init__(self, attributes: tuple[AttributeShape, ...], fill_id: bool, fill_time: bool,
                 fill_content_type: bool, has_content_type: bool, has_dataschema: bool,
                 fill_trace: bool) -> None:
        self.attributes = attributes
        self.fill_id = fill_id
        self.fill_time = fill_time
        self.fill_content_type = fill_content_type
        self.has_content_type = has_content_type
        self.has_dataschema = has_dataschema
        self.fill_trace = fill_trace

    def key(self) -> tuple[object, ...]:
        return (self.attributes, self.fill_id, self.fill_time, self.fill_content_type,
                self.has_content_type, self.has_dataschema, self.fill_trace)


_COMPILED: dict[tuple[object, ...], Renderer] = {}


def renderer(shape: Shape, protocol: str, helpers: Mapping[str, object]) -> Renderer:
    """The generated renderer of `shape` for records of `protocol`. `helpers` are the
    names the code calls besides the readers (regexes, the receive-time cache)."""
    key = (shape.key(), protocol)
    made = _COMPILED.get(key)
    if made is None:
        namespace = namespace_of(protocol, helpers)
        # Built from definitions' attribute names ([a-z0-9]+, checked when compiled) and
        # placeholder names ([A-Za-z0-9_]+), written with repr(); never from a message.
        exec("\n".join(source(shape, protocol)), namespace)
        made = _COMPILED[key] = namespace["render"]
    return made


def namespace_of(protocol: str, helpers: Mapping[str, object]) -> dict[str, Any]:
    """What the code of a renderer for records of `protocol` calls."""
    readers = ACCESSORS[protocol]
    return {**helpers, "NO_DATA": _NO_DATA, "trusted": CloudEvent.trusted,
            "random_uuid": random_uuid, "name_uuid": name_uuid, "as_text": as_text,
            "identity_of": readers.identity, "content_type_of": readers.content_type,
            "metadata_of": readers.metadata}


#: How the renderer ends: the event of the attributes rendered and the record's body.
EVENT_TAIL = ("data = record.data",
              "if data is not NO_DATA:",
              "    return trusted(attributes, data, True, record.raw)",
              "payload = record.payload",
              "return trusted(attributes, payload, payload is not None)")


def in_dict(name: str) -> str:
    """Where the renderer keeps attribute `name`: in its `attributes` dict."""
    return f"attributes[{name!r}]"


def source(shape: Shape, protocol: str, tail: tuple[str, ...] = EVENT_TAIL,
           *, remakeable: bool = False, into: Callable[[str], str] = in_dict) -> list[str]:
    """The lines of the renderer (see the module docstring); `consts` holds the fixed
    attributes, then a format string and an exact test per templated attribute, then
    the definition's content type and dataschema.

    `tail`: the lines that end it, given `attributes` and `record` (the fused writer,
    `envelope/wirewriter.py`, writes an output's record there instead of an event).
    `remakeable`: return None, too, where the event would carry a trace context (which
    the output also writes as a header of its own), and give a record without an
    identity the id `id_in` (the caller's random one, which it keeps to render the event
    again the same), or None when there is none: a fused writer leaves those to the
    renderer and the binding.

    `into(name)`: the target each attribute is assigned to (`in_dict`: the `attributes`
    dict, made as a copy of the constants; otherwise no dict is made, and the fused
    writer keeps each attribute in a local of its own: `wirewriter._as_locals`)."""
    # The trace context's lines (`_trace`) write into the dict; only a remakeable
    # renderer, which leaves trace contexts alone, may do without it.
    assert into is in_dict or remakeable
    names = ["fixed"]
    for n in range(len(shape.attributes)):
        names += [f"fmt{n}", f"accepts{n}"]
    names += ["content_type", "dataschema"]
    lines = ["def render(record, context, now, consts):",
             f"    {', '.join(names)}, = consts"]
    if into is in_dict:
        lines.append("    attributes = fixed.copy()")
    if shape.attributes:
        lines.append("    try:")
        for n, (name, whole, quick) in enumerate(shape.attributes):
            lines += ["        " + line for line in _attribute(n, into(name), whole, quick)]
        lines += ["    except KeyError:", "        return None"]
    # The scalar fields (identity, a content type field): where reading them makes no
    # header entries (`NativeMessage.head`); what reads the entries reads `record.fields`.
    lines.append("    fields = record.head")
    body: list[str] = []
    if shape.fill_id:
        body += _identity(protocol)
        if remakeable:
            body += ["if identity is not None:",
                     f"    {into('id')} = name_uuid(identity)",
                     "elif id_in is not None:",
                     f"    {into('id')} = id_in",
                     "else:",
                     "    return None"]
        else:
            body.append(f"{into('id')} = random_uuid() if identity is None "
                        "else name_uuid(identity)")
    if shape.fill_time:
        body += ["received = record.received_at",
                 "last = LAST_TIME[0]  # (text, time) of the last receive time parsed",
                 "if received is not None and received == last[0]:",
                 f"    {into('time')} = last[1]",
                 "else:",
                 f"    {into('time')} = receive_time(record, now)"]
    # Header entries read in one pass: the content type and the trace context.
    wanted = {}
    if shape.fill_content_type and _content_type_in_metadata(protocol):
        wanted["native"] = "content-type"
    if shape.fill_trace and _metadata_pairs(protocol):
        wanted["parent"] = "traceparent"
    body += _pairs_lookup(protocol, wanted)
    if shape.fill_content_type:
        body += _content_type(protocol, shape.has_content_type, "native" in wanted,
                              into("datacontenttype"))
    if shape.has_dataschema:
        body.append(f"{into('dataschema')} = dataschema")
    if shape.fill_trace:
        body += _trace(protocol, "parent" in wanted, remakeable)
    body += tail
    return lines + ["    " + line for line in body]


def _attribute(n: int, target: str, whole: str | None, quick: int) -> list[str]:
    """Fill one templated attribute; a text the printable shortcut cannot vouch for goes
    to the attribute's exact test (`render._QUICK`: 1 any printable text, 2 non-empty,
    3 non-empty without spaces, 0 the exact test only)."""
    if whole is None:
        lines = [f"text = fmt{n}.format_map(context)"]
    else:
        lines = [f"text = context[{whole!r}]",
                 "if text.__class__ is not str:  # a caller's context of other values",
                 f"    text = fmt{n}.format_map(context)"]
    shortcut = {1: "text.isprintable()", 2: "text and text.isprintable()",
                3: "text and text.isprintable() and ' ' not in text"}.get(quick)
    if shortcut is None:
        lines += [f"if accepts{n}(text) is None:", "    return None"]
    else:
        lines += [f"if not ({shortcut}) and accepts{n}(text) is None:", "    return None"]
    return [*lines, f"{target} = text"]


def _identity(protocol: str) -> list[str]:
    prof = find_profile(protocol)
    if prof is None or prof.identity is None:
        return ["identity = None"]
    if ACCESSORS[protocol].scalar_identity:
        return scalar_identity_code(prof.identity.prefix, prof.identity.parts)
    return ["identity = identity_of(record.fields)"]


def _metadata_pairs(protocol: str) -> bool:
    prof = find_profile(protocol)
    return prof is not None and prof.metadata is not None and prof.metadata.shape == "pairs"


def _content_type_in_metadata(protocol: str) -> bool:
    """Whether the content type is a {name, value} metadata entry (a header)."""
    prof = find_profile(protocol)
    ref = None if prof is None else prof.content_type
    return (prof is not None and ref is not None and ref.name is not None
            and prof.metadata is not None and ref.field == prof.metadata.field
            and _metadata_pairs(protocol))


def _pairs_lookup(protocol: str, wanted: dict[str, str]) -> list[str]:
    """Set each variable of `wanted` to the first metadata entry of its name, read as
    `NativeMessage.metadata` reads it (names compared ignoring case where the protocol
    does, values as text or only string values), in one pass over the entries."""
    if not wanted:
        return []
    prof = find_profile(protocol)
    assert prof is not None and prof.metadata is not None
    place = prof.metadata
    key = "key.lower()" if place.ignore_case else "key"
    # A str value (nearly every one) is its own text: no call for it.
    value = ("(found if isinstance(found := entry.get('value'), str) else as_text(found))"
             if place.text_values
             else "(found if isinstance(found := entry.get('value'), str) else None)")
    # What the adapter saw of them already, when it says (`NativeMessage.header_facts`):
    # then no pass over the entries here.
    facts = {"native": 0, "parent": 1}
    known = ["facts = record.header_facts", "if facts is not None:"]
    known += [f"    {var} = facts[{facts[var]}]" for var in wanted]
    lines = [f"{var} = None" for var in wanted]
    lines += [f"{var}_seen = False" for var in wanted]
    lines += [f"entries = record.fields.get({place.field!r})",
              "if isinstance(entries, list):",
              "    for entry in entries:",
              "        if not isinstance(entry, dict):",
              "            continue",
              "        key = entry.get('name')",
              "        if not isinstance(key, str):",
              "            continue"]
    for var, name in wanted.items():
        # Lengths first: most names differ in length, so few are lower-cased.
        lines += [f"        if not {var}_seen and len(key) == {len(name)}"
                  f" and {key} == {name.lower() if place.ignore_case else name!r}:",
                  f"            {var} = {value}",
                  f"            {var}_seen = True"]
    return [*known, "else:", *("    " + line for line in lines)]


def _content_type(protocol: str, has_content_type: bool, looked_up: bool,
                  target: str) -> list[str]:
    prof = find_profile(protocol)
    ref = None if prof is None else prof.content_type
    if looked_up:
        lines = []  # `native` is set by the lookup of the header entries
    elif ref is None:
        lines = ["native = None"]
    elif ref.name is None:  # a field of its own (MQTT 5): read it here
        lines = [f"native = fields.get({ref.field!r})",
                 "if native.__class__ is not str and not isinstance(native, str):",
                 "    native = None"]
    else:
        lines = ["native = content_type_of(record.fields)"]
    lines += ["if native is not None:",
              # The same one or two types come with every message: each text checked
              # once (`render.media_type_seen`).
              "    if not (MEDIA_TYPES.get(native) or media_type_seen(native)):",
              "        return None",
              f"    {target} = native"]
    if has_content_type:
        lines += ["else:", f"    {target} = content_type"]
    else:
        lines += ["elif record.data is not NO_DATA:",
                  f"    {target} = 'application/json'"]
    return lines


def _trace(protocol: str, looked_up: bool, remakeable: bool = False) -> list[str]:
    """The W3C trace context (`render._carry_trace_context`); `parent` is set by the
    lookup of the header entries when the metadata is a {name, value} list."""
    prof = find_profile(protocol)
    if prof is None or prof.metadata is None:
        return []
    lines = [] if looked_up else ["parent = metadata_of(record.fields, 'traceparent')"]
    if remakeable:
        return [*lines, "if parent is not None and TRACEPARENT(parent):", "    return None"]
    return [*lines,
            "if parent is not None and TRACEPARENT(parent):",
            "    attributes['traceparent'] = parent",
            "    state = metadata_of(record.fields, 'tracestate')",
            "    if state:",
            "        attributes['tracestate'] = state"]
