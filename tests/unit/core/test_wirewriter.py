"""The fused writer (`envelope/wirewriter.py`) writes what rendering an event and encoding
it for the output (`OutputFormat.render`) write, and writes only records whose event is
rendered the same again (a dead letter, the tap and a reply render it later).

Hypothesis draws the envelopes, records and contexts of `test_render_fast` (every rule
the renderer checks, trace contexts, native content types, identities present or not),
for each output binding with a wire form, with output defaults (some of them fields the
binding writes itself) and partition keys.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.nats.record import publish_frame, to_publish
from gateway.cloudevents.bindings import wire_form
from gateway.cloudevents.event import CloudEvent
from gateway.definitions.model import MessageDefinition
from gateway.envelope.outgoing import OutputFormat
from gateway.envelope.render import EnvelopeTemplate
from gateway.envelope.wirewriter import own_defaults
from gateway.protocols.accessors import ACCESSORS
from gateway.record import NativeMessage
from tests.unit.test_record import BODIES, CONTENT_TYPES

from .defs import define, opt, prop
from .test_render_fast import NOW, VALUES, definitions, records, same_event

OUTPUTS = ["KAFKA", "NATS", "HTTP"]
DEFAULTS = st.sampled_from([{}, {"topic": "out"}, {"subject": "ce", "x": 1},
                            {"method": "PUT", "path": "/p"}, {"key": "dflt"}])
WRITTEN = {"count": 0}
ANONYMOUS_WRITTEN = {"count": 0}
# The random id a caller gives a record without an identity.
MADE_ID = "5a1f0c9e-3b2d-4e8f-9a7b-6c5d4e3f2a1b"
UNPARSED_WRITTEN = {"count": 0}
# Records a writer made for another layout was given (and declined).
OTHER_LAYOUT = {"count": 0}


def wire_state(record: NativeMessage) -> tuple[Any, ...]:
    """Everything a producer or a reader sees of a record: protocol, every field in
    order, the body and its bytes, and the producer's form of the headers."""
    encoded = record.current_encoded_headers()
    return (record.protocol, list(record.fields.items()), record.data, record.payload,
            record.raw, record.received_at,
            None if encoded is None else (encoded.text, encoded.utf8, encoded.lines,
                                          encoded.typed))


def nats_frame(record: NativeMessage) -> bytes | str:
    """The frame the NATS producer publishes for `record`, or why it refuses it."""
    try:
        return publish_frame(to_publish(record))
    except ValueError as exc:
        return str(exc)


def check(template: EnvelopeTemplate, record: NativeMessage, context: dict[str, str],
          output: str, defaults: dict[str, Any], key: str | None,
          received: NativeMessage | None = None,
          learned: tuple[str, ...] | None = None) -> None:
    """`received`: the record the writer is given instead, as an adapter made it (its
    body not parsed yet); `record` is the same record, read by the renderer. `learned`:
    the layout the writer was made for, learned from another record of the definition
    (the record's own event's by default): a writer writes only records whose event has
    its layout."""
    event = template.render(record, context, NOW)
    if not isinstance(event, CloudEvent):
        return
    if output == "NATS":  # a subject always, so that every draw reaches the frame
        defaults = {"subject": "ce", **defaults}
    form = wire_form(output)
    assert form is not None
    layout = tuple(event.get_attributes())
    if learned is not None and learned != layout:
        made_for = template.wire_writer(record.protocol, form, learned)
        if made_for is not None:
            assert made_for[0](record if received is None else received, context, NOW,
                               made_for[1], own_defaults(form, learned, defaults), key,
                               MADE_ID) is None
            OTHER_LAYOUT["count"] += 1
        return
    made = template.wire_writer(record.protocol, form, layout)
    if made is None:  # no generated renderer: every message is `render_checked`'s
        return
    writer, consts = made
    source = record if received is None else received
    # A record without an identity, whose event gets a random id, is written with the
    # caller's id, or not at all.
    anonymous = (template.ids_from_records
                 and ACCESSORS[record.protocol].identity(record.fields) is None)
    if anonymous:
        assert writer(source, context, NOW, consts, own_defaults(form, layout, defaults),
                      key, None) is None
        event = event.with_id(MADE_ID)
    written = writer(source, context, NOW, consts, own_defaults(form, layout, defaults), key,
                     MADE_ID)
    if written is None:
        return
    WRITTEN["count"] += 1
    ANONYMOUS_WRITTEN["count"] += anonymous
    expected = OutputFormat(output, "binary", defaults=defaults).render(
        event, context, None if key is None or output != "KAFKA" else ("key", key))
    # What the NATS producer writes, read first: it must not parse a body sent on
    # unparsed, and must write what it writes for the rendered record.
    frame = nats_frame(written) if output == "NATS" else None
    body = source.unparsed_body()
    if received is not None and output != "HTTP" and body is not None \
            and body[:1] != b"\x00" and 0 < body[0] < 0x80 and body[1:2] != b"\x00":
        # A JSON body in plain UTF-8 went on unparsed: nothing read its value.
        UNPARSED_WRITTEN["count"] += 1
        assert written.unparsed_body() is body
    assert frame == (nats_frame(expected) if output == "NATS" else None)
    assert wire_state(written) == wire_state(expected)
    # What a dead letter, the tap or a reply renders again is the event that was sent
    # (with the id it was sent with: `WrittenMember`).
    again = template.render(record, context, NOW)
    assert isinstance(again, CloudEvent)
    if anonymous:
        again = again.with_id(MADE_ID)
    same_event(again, event)
    assert again.get("id") == event.get("id")
    assert "traceparent" not in layout


@settings(max_examples=500, deadline=None)
@given(st.data(), definitions())
def test_the_writer_writes_what_render_and_encode_write(
        data: st.DataObject, definition: MessageDefinition) -> None:
    template = EnvelopeTemplate(definition)
    assert definition.protocol is not None
    learned: tuple[str, ...] | None = None
    for _ in range(4):
        record = data.draw(records(definition.protocol))
        context = data.draw(st.dictionaries(st.sampled_from(["a", "b"]), VALUES))
        output, defaults = data.draw(st.sampled_from(OUTPUTS)), data.draw(DEFAULTS)
        key = data.draw(st.sampled_from([None, "k1"]))
        check(template, record, context, output, defaults, key)
        # The same record given to the writer of the layout the previous one had.
        if learned is not None:
            check(template, record, context, output, defaults, key, learned=learned)
        event = template.render(record, context, NOW)
        if isinstance(event, CloudEvent):
            learned = tuple(event.get_attributes())


def test_a_record_of_another_layout_is_given_to_the_writer_and_declined() -> None:
    """`check(learned=...)`, as the property above calls it, reaches the writer of the
    other layout (and the writer declines the record: `check` asserts it)."""
    definition = define("d", "KAFKA", [opt("topic", "t")],
                        {"type": prop("t"), "source": prop("/s/{a}", type="uritemplate")})
    template = EnvelopeTemplate(definition)
    typed = NativeMessage("KAFKA", {"topic": "t", "partition": 0, "offset": 7, "headers": [
        {"name": "content-type", "value": "application/json"}]},
        data={"v": 1}, raw=b'{"v": 1}')
    untyped = NativeMessage("KAFKA", {"topic": "t", "partition": 0, "offset": 8},
                            payload=b"\x01")
    layouts = []
    for record in (typed, untyped):
        event = template.render(record, {"a": "x"}, NOW)
        assert isinstance(event, CloudEvent)
        layouts.append(tuple(event.get_attributes()))
    assert layouts[0] != layouts[1]
    before = OTHER_LAYOUT["count"]
    for output in OUTPUTS:
        check(template, untyped, {"a": "x"}, output, {}, None, learned=layouts[0])
        check(template, typed, {"a": "x"}, output, {}, None, learned=layouts[1])
    assert OTHER_LAYOUT["count"] == before + 2 * len(OUTPUTS)


def test_the_usual_records_are_written() -> None:
    """A plain JSON record with an identity is written for every output (the property
    above then compares real records), and one without an identity (a random id, which
    could not be rendered again the same) or with a trace context is not."""
    definition = define("d", "KAFKA", [opt("topic", "t")],
                        {"type": prop("t"), "source": prop("/s/{a}", type="uritemplate")})
    template = EnvelopeTemplate(definition)
    fields = {"topic": "t", "partition": 0, "offset": 7, "key": "k",
              "headers": [{"name": "content-type", "value": "application/json"}]}
    record = NativeMessage("KAFKA", fields, data={"v": 1}, raw=b'{"v": 1}',
                           received_at="2026-11-21T09:00:00Z")
    before = WRITTEN["count"]
    for output in OUTPUTS:
        check(template, record, {"a": "x"}, output, {"topic": "out"}, "k1")
    assert WRITTEN["count"] == before + 3
    form = wire_form("NATS")
    assert form is not None
    event = template.render(record, {"a": "x"}, NOW)
    assert isinstance(event, CloudEvent)
    made = template.wire_writer("KAFKA", form, tuple(event.get_attributes()))
    assert made is not None
    writer, consts = made
    anonymous = NativeMessage("KAFKA", {"topic": "t"}, data={"v": 1}, raw=b'{"v": 1}')
    assert writer(anonymous, {"a": "x"}, NOW, consts, {}, None, None) is None
    with_id = writer(anonymous, {"a": "x"}, NOW, consts, {}, None, MADE_ID)
    assert with_id is not None and ("ce-id", MADE_ID) in with_id.header_pairs().text
    before = ANONYMOUS_WRITTEN["count"]
    check(template, anonymous, {"a": "x"}, "NATS", {}, None)
    assert ANONYMOUS_WRITTEN["count"] == before + 1
    traced = NativeMessage("KAFKA", {**fields, "headers": [
        *fields["headers"],
        {"name": "traceparent", "value": "00-" + "a" * 32 + "-" + "b" * 16 + "-01"}]},
        data={"v": 1}, raw=b'{"v": 1}')
    assert writer(traced, {"a": "x"}, NOW, consts, {}, None, MADE_ID) is None
    # The layout it was made for only: a body with no content type has one fewer.
    bytes_body = NativeMessage("KAFKA", {"topic": "t", "partition": 0, "offset": 8},
                               payload=b"\x01")
    assert writer(bytes_body, {"a": "x"}, NOW, consts, {}, None, MADE_ID) is None
    # And one made for that shorter layout does not write a record that has a content
    # type (it would leave the content type out).
    shorter = template.render(bytes_body, {"a": "x"}, NOW)
    assert isinstance(shorter, CloudEvent) and "datacontenttype" not in shorter.get_attributes()
    made = template.wire_writer("KAFKA", form, tuple(shorter.get_attributes()))
    assert made is not None
    assert made[0](bytes_body, {"a": "x"}, NOW, made[1], {}, None, MADE_ID) is not None
    assert made[0](record, {"a": "x"}, NOW, made[1], {}, None, MADE_ID) is None
    # Constants of another count than the layout's (no definition learns such a layout:
    # the writer declines rather than misplace them).
    fixed = {**consts[0], "x1": "extra"}
    assert writer(record, {"a": "x"}, NOW, (fixed, *consts[1:]), {}, None, MADE_ID) is None


def as_kafka(definition: MessageDefinition) -> EnvelopeTemplate:
    """The template of `definition`'s envelope on a Kafka definition."""
    return EnvelopeTemplate(define("k", "KAFKA", [opt("topic", "t")],
                                   definition.envelope_metadata,
                                   datacontenttype=definition.datacontenttype,
                                   dataschemauri=definition.dataschemauri,
                                   dataschemaformat=definition.dataschemaformat))


@st.composite
def identified(draw: st.DrawFn) -> NativeMessage:
    """A Kafka record as the adapter makes it (an identity always), with the drawn
    headers, content type, receive time and body of `records`."""
    record = draw(records("KAFKA"))
    fields = {**record.fields, "topic": "t", "partition": 1,
              "offset": draw(st.integers(0, 9))}
    return NativeMessage("KAFKA", fields, data=record.data, payload=record.payload,
                         received_at=record.received_at, raw=record.raw)


@settings(max_examples=300, deadline=None)
@given(st.data(), definitions())
def test_records_with_an_identity_are_written_as_render_and_encode_write(
        data: st.DataObject, definition: MessageDefinition) -> None:
    """As above, for records that have an identity (the Kafka adapter's always do), so
    that most draws are written rather than declined."""
    template = as_kafka(definition)
    for _ in range(4):
        record = data.draw(identified())
        context = data.draw(st.dictionaries(st.sampled_from(["a", "b"]), VALUES))
        check(template, record, context, data.draw(st.sampled_from(OUTPUTS)),
              data.draw(DEFAULTS), data.draw(st.sampled_from([None, "k1"])))


@st.composite
def received(draw: st.DrawFn) -> tuple[NativeMessage, NativeMessage]:
    """A Kafka record as the adapter makes it from the wire (`from_wire`: its body parsed
    when first read), twice: one for the renderer, one for the writer. The body is any a
    sender may send (`test_record.BODIES`) under any content type or none."""
    ctype = draw(CONTENT_TYPES)
    headers = [] if ctype is None else [{"name": "content-type", "value": ctype}]
    if draw(st.booleans()):
        headers.append({"name": "x-other", "value": "v"})
    fields = {"topic": "t", "partition": 1, "offset": draw(st.integers(0, 9)),
              "headers": headers}
    body = draw(BODIES)
    at = draw(st.sampled_from([None, "2026-11-21T09:00:00Z"]))
    return (NativeMessage.from_wire("KAFKA", fields, body, ctype, at, parse=False),
            NativeMessage.from_wire("KAFKA", fields, body, ctype, at, parse=False))


@settings(max_examples=300, deadline=None)
@given(st.data(), definitions())
def test_records_from_the_wire_are_written_as_render_and_encode_write(
        data: st.DataObject, definition: MessageDefinition) -> None:
    """As above, for records as the adapters make them, whose bodies are parsed only
    when read: a body the writer sends on unparsed is the body rendering and encoding
    the parsed record sends, and its record reads as that record does."""
    template = as_kafka(definition)
    for _ in range(4):
        record, fresh = data.draw(received())
        context = data.draw(st.dictionaries(st.sampled_from(["a", "b"]), VALUES))
        check(template, record, context, data.draw(st.sampled_from(OUTPUTS)),
              data.draw(DEFAULTS), data.draw(st.sampled_from([None, "k1"])), fresh)


def test_a_declared_json_body_goes_on_unparsed() -> None:
    """The usual received record (JSON declared) is written without parsing its body,
    for the outputs whose records are `WireRecord`s, and its record reads as the
    rendered one does."""
    definition = define("d", "KAFKA", [opt("topic", "t")],
                        {"type": prop("t"), "source": prop("/s/{a}", type="uritemplate")})
    template = EnvelopeTemplate(definition)
    fields = {"topic": "t", "partition": 0, "offset": 7,
              "headers": [{"name": "content-type", "value": "application/json"}]}
    before = UNPARSED_WRITTEN["count"]
    for output in ("KAFKA", "KAFKA"):
        check(template, NativeMessage.from_wire("KAFKA", fields, b'{"v": 1}', "application/json",
                                      parse=False),
              {"a": "x"}, output, {}, None,
              NativeMessage.from_wire("KAFKA", fields, b'{"v": 1}', "application/json",
                                      parse=False))
    assert UNPARSED_WRITTEN["count"] == before + 2
