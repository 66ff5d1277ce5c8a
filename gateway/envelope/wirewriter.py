"""A native record straight to an output's binary record: render and encode fused into
one generated function per definition shape, output binding and attribute layout, with
no CloudEvent in between.

The daemon's hot path renders an event from each matched record (`fastrender`) only to
have the output's binding write it out again (`cloudevents/bindings/wireform.py`): a
CloudEvent, its conversion, and a dispatch through the binding per message, all made
and freed unread when nothing fails. A writer runs the renderer's lines, then, where the
renderer would make the event, the wire form's lines on the attributes it has just
rendered, each attribute kept as a local of its place in the layout rather than in a
dict (`_as_locals`). It returns what the two would give together, or None wherever either would
decline or the event could not be made again the same later (a trace context, or a
record without an identity when the caller gave no id for it:
`fastrender.source(remakeable=True)`), and the route then renders and encodes as
before. A record without an identity gets the caller's random id, which the caller
keeps: rendered again, the event is given that id back (`runtime/ledger.py`,
`WrittenMember`). So a record it writes is the record the two would write, and the event of a
message it wrote can be rendered again, the same, when something needs it (a dead
letter, the tap, a reply): `tests/unit/core/test_wirewriter.py` holds all three
together.

Only a layout the definition was seen to render is written: the caller learns it from
an event the renderer made (`EnvelopeTemplate.wire_writer`); a record of another layout
(a message without a content type, say) goes the general way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from gateway.cloudevents.bindings.common import plain_utf8_code
from gateway.cloudevents.bindings.layouts import MAX_LAYOUTS, Layout
from gateway.cloudevents.bindings.wireform import BinaryForm, write_lines
from gateway.envelope.fastrender import Shape, namespace_of, source
from gateway.json.values import JSON
from gateway.protocols import find_profile
from gateway.record import NativeMessage, UnparsedWireRecord

__all__ = ["WireWriter", "own_defaults", "sends_unparsed", "writer"]

# (record, context, now, consts, defaults, key, id) -> the output's record, or None: the
# general path's. `defaults`: the output's fields to add (those the binding does not
# write); `key`: the partition key, added where the record has none (or None); `id`: the
# event id of a record without an identity (None: such a record is the general path's).
WireWriter = Callable[[NativeMessage, Mapping[str, str], "datetime | None", tuple[Any, ...],
                       "Mapping[str, JSON]", "str | None", "str | None"],
                      "NativeMessage | None"]

# The renderer's end, fused: the body as the event would hold it (data, whether there
# is any, the bytes it was parsed from), then the wire form's lines on `attributes`.
_BODY = ("data = record.data",
         "if data is not NO_DATA:",
         "    has_data = True",
         "    raw_in = record.raw",
         "else:",
         "    data = record.payload",
         "    has_data = data is not None",
         "    raw_in = None")
# A received body declared as JSON and not parsed yet goes on as its bytes, unparsed:
# the event's data would be its value, written back as those same bytes (`raw`, plain
# UTF-8), and the record the value of nothing else when no definition reads it (the
# renderer's lines above have not: a record they read is parsed). Parsed or not, the
# output's record then holds the same body (`NativeMessage.from_wire`'s rule).
_UNPARSED_BODY = ("unparsed_in = record.unparsed_body()",
                  f"if unparsed_in is not None and {plain_utf8_code('unparsed_in')}:",
                  "    data = UNREAD",
                  "    has_data = True",
                  "    raw_in = unparsed_in",
                  "else:",
                  *(f"    {line}" for line in _BODY))
_SOURCE = ("attributes", "data", "has_data", "raw_in")
# The `data` of a body sent on unparsed (the wire form's lines only test its class).
_UNREAD = object()


def sends_unparsed(form: BinaryForm) -> bool:
    """Whether `form`'s writers send a received JSON body on unparsed: those whose records
    are `WireRecord`s (Kafka's, NATS's), whose producers need not read a declared JSON
    body's value. Kafka's asks whether a body is JSON only for a record without a
    content-type pair (`typed_pairs`), and such a body always has one; NATS's takes a
    body its record declares JSON (`ce-datacontenttype`) as JSON (`adapters/nats/
    record.py`). HTTP's records are plain records."""
    return form.pairs


def made_by(expression: str, form: BinaryForm) -> str:
    """The wire form's record `expression`, made an `UnparsedWireRecord` (the same
    arguments) where the body went on unparsed."""
    if not sends_unparsed(form):
        return expression
    assert expression.startswith("Wire(")
    return "(Unparsed if data is UNREAD else Wire)(" + expression[len("Wire("):]

_MADE: dict[tuple[object, ...], WireWriter] = {}
# The names the fused part itself binds (checked against the other parts' lines).
_OWN = ("record_out", "defaults_out", "key_out", "unparsed_in")


def writer(shape: Shape, protocol: str, form: BinaryForm, layout: Layout,
           helpers: Mapping[str, object]) -> WireWriter | None:
    """The writer of records of `protocol` rendered by `shape` with `layout`, into
    `form`'s binary records; None for a layout with a trace context, and once as many
    are kept as `MAX_LAYOUTS` allows per binding: the general path writes those."""
    if "traceparent" in layout:
        # An event with a trace context also gets the protocol's own `traceparent`
        # header (`outgoing.with_trace`), which a writer does not write.
        return None
    key = (shape.key(), protocol, form.protocol, layout)
    made = _MADE.get(key)
    if made is None:
        if len(_MADE) >= MAX_LAYOUTS * 4:
            return None
        renderer = _as_locals(shape, protocol, layout)
        if renderer is None:
            return None
        lines, guard, texts = renderer
        known = frozenset(texts | {layout.index(name) for name, _, _ in shape.attributes
                                   if name in layout})
        # The id the lines make (a UUID's text) and the receive time (formatted by the
        # wire form's lines as RFC 3339) need no percent-encoding.
        safe = frozenset(layout.index(name) for name, made in
                         (("id", shape.fill_id), ("time", shape.fill_time))
                         if made and name in layout)
        wire, wire_names = write_lines(form, layout, _SOURCE, known, safe)
        namespace = namespace_of(protocol, helpers)
        clash = (set(namespace) & set(wire_names)) - {"NO_DATA"}
        if clash:  # a name both mean differently: a bug here, not in a message
            raise RuntimeError(f"fused writer: both parts name {sorted(clash)}")
        namespace.update(wire_names)
        # The attributes are in render order; only their count differs between layouts
        # of one definition (a content type or not), and a writer knows its layout's.
        # The record made, the output's defaults and key go into the fields it was made
        # with (after it: the record counts the fields the binding wrote), as
        # `OutputFormat.render` adds them. The names of this part are its own: the
        # other parts' locals (`key`, `made` ...) must not overwrite them.
        assert wire[-1].startswith("return ")
        body = _UNPARSED_BODY if sends_unparsed(form) else _BODY
        namespace["UNREAD"] = _UNREAD
        namespace["Unparsed"] = UnparsedWireRecord
        tail = [*guard, *body,
                *wire[:-1], "record_out = " + made_by(wire[-1][len("return "):], form),
                "if defaults_out:", "    fields.update(defaults_out)"]
        place = _key_place(form.protocol)
        if place is not None:
            namespace["KEY_PLACE"] = place
            tail += ["if key_out is not None and fields.get(KEY_PLACE) is None:",
                     "    fields[KEY_PLACE] = key_out"]
        if any(name in line for line in (*lines, *wire) for name in _OWN):
            raise RuntimeError("fused writer: a part uses a name of this one")
        code = [*lines, *("    " + line for line in (*tail, "return record_out"))]
        code[0] = "def write(record, context, now, consts, defaults_out, key_out, id_in):"
        # As in `fastrender` and `wireform`: names from definitions (checked when
        # compiled) and indexes, written with repr(); never anything of a message.
        exec("\n".join(code), namespace)
        made = _MADE[key] = namespace["write"]
    return made


def _as_locals(shape: Shape, protocol: str, layout: Layout
               ) -> tuple[list[str], list[str], set[int]] | None:
    """The renderer's lines (`fastrender.source`) with each attribute assigned to the
    local `v{n}` of its place `n` in `layout`, not into a copy of the constants' dict (a
    dict, its copy and a store per attribute fewer per message, and the wire form's lines
    read the locals: `write_lines(texts=...)`); the lines that check the record's event
    has `layout` and read the constants into their places; and the places set to an id
    (text). None where the layout is not the constants then what the lines set, in that
    order (the renderer's dict's order, which `layout` was learned from)."""
    own: list[str] = []  # the attributes the lines set, in the order they set them

    def into(name: str) -> str:
        if name not in own:
            own.append(name)
        return f"v{layout.index(name)}" if name in layout else f"unset_{name}"

    out = source(shape, protocol, (), remakeable=True, into=into)
    fixed = [name for name in layout if name not in own]
    count = len(fixed)
    if (tuple(fixed) != layout[:count]
            or tuple(name for name in own if name in layout) != layout[count:]
            or any(name not in layout and name != "datacontenttype" for name in own)):
        return None
    guard = []
    if "datacontenttype" in own:  # the one attribute set only where there is one
        present = "datacontenttype" in layout
        local = into("datacontenttype")
        assert out[1].endswith("= consts")  # `source`'s second line
        out.insert(2, f"    {local} = None")  # after the constants are read
        guard += [f"if {local} is {'' if present else 'not '}None:", "    return None"]
    if count:
        # The definition's constants are the layout's first (`learn` takes the layout
        # of the definition's own event, whose dict began as a copy of them).
        values = "".join(f"v{n}, " for n in range(count))
        guard += [f"if len(fixed) != {count}:", "    return None",
                  f"{values}= fixed.values()"]
    ids = {layout.index("id")} if "id" in own else set()
    return out, guard, ids


def own_defaults(form: BinaryForm, layout: Layout,
                 defaults: Mapping[str, JSON]) -> dict[str, JSON]:
    """Of an output's `defaults`, those a writer of `form` and `layout` adds: a default
    fills only a field the record lacks, and the binding writes some itself (HTTP's
    method, Kafka's key from `partitionkey`, the headers where it writes them as a
    field) before any default is added (`OutputFormat.render`)."""
    own = set(form.fixed)
    if form.key_field is not None and "partitionkey" in layout:
        own.add(form.key_field)
    if not form.pairs:
        own.add("headers")
    return {name: value for name, value in defaults.items() if name not in own}


def _key_place(protocol: str) -> str | None:
    """The field a record of `protocol` keeps its partition key in, if it has one."""
    prof = find_profile(protocol)
    return None if prof is None or prof.partition_key is None else prof.partition_key.field
