"""Binary-mode records written whole by generated code, one function per binding and
attribute layout.

A binding's `encode` in binary mode takes six steps per event: the content type and body
(`binary_body`), the prefixed headers (`unrolled`), the content-type header, the body's
record fields (`body_fields`), the record, and the producer's pairs
(`set_encoded_headers`). Each is a call that looks at the event again; together they
were measured at 4.3 µs per NATS event, against 2.7 µs for the same work written out in
one function. The events of one definition share their layout (the tuple of attribute
names, in order), so for each layout a function is generated once per binding that does
the usual case in straight lines: every value text without percent-encoding, and a JSON
body (the record it was rendered from keeps its bytes as `raw`) or a non-empty bytes
body. It returns None for anything else -- a value to percent-encode, no data, empty
bytes, text under a content type that is not JSON -- and the binding then encodes as
before.
`tests/unit/cloudevents/test_wireform.py` holds both to the same records.

It makes only what the producer sends: the (name, UTF-8) pairs for Kafka -- reusing the
last pair made where a value is the same text object as last time (the definition's
constants) -- and the header block's lines for NATS. The record (`WireRecord`) keeps the
header values as one tuple beside the layout's names; its `headers` field of {name,
value} objects and the (name, text) pairs (`EncodedHeaders.text`) are made only if
someone asks (a dead letter, the tap, a trace header). Per message that is 15 to 24
objects fewer to make and to free than the binding's own steps make (HTTP's producer
reads the field: its records keep their entries).

As in `unrolled`, only indexes are written into the generated source: header names, the
binding's protocol and fixed fields are passed in as values, so no attribute name (an
incoming event's too) becomes code.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from gateway.cloudevents.bindings.common import plain_utf8_code
from gateway.cloudevents.bindings.layouts import ByLayout
from gateway.cloudevents.event import CloudEvent
from gateway.cloudevents.headercodec import needs_no_encoding
from gateway.cloudevents.mediatype import JSON_CONTENT_TYPE, is_json
from gateway.cloudevents.typesystem import LAST_TIME_TEXT, to_canonical
from gateway.json.values import JSON
from gateway.record import _NO_DATA, EncodedHeaders, NativeMessage, WireRecord

__all__ = ["BinaryForm", "encode"]

# A header name as NATS (nats-py) takes it: an RFC 7230 token.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")

# event -> its binary record, or None: the binding's own steps decide.
Encoder = Callable[[CloudEvent], "NativeMessage | None"]


class BinaryForm:
    """How one binding writes a binary-mode record, and its generated encoders.

    - `prefix`, `percent_encode`: the attribute headers (`ce-` percent-encoded for HTTP
      and NATS, `ce_` as raw UTF-8 for Kafka);
    - `content_type_header`: the header the content type goes in (`content-type`, or
      NATS's `ce-datacontenttype`), last, after the attribute headers;
    - `fixed`: fields every record starts with (HTTP's method), before its headers;
    - `key_field`: where the `partitionkey` attribute also goes (Kafka's record key);
    - `pairs`, `utf8`: whether the record keeps its headers for its producer
      (`NativeMessage.encoded_headers`: the (name, text) pairs, read from the entries
      when first asked for), and as (name, UTF-8) pairs too;
      `typed_pairs`: whether those pairs count the content-type header as one;
    - `lines`: whether it also keeps them as `name: value` CRLF lines (NATS's header
      block): only with `percent_encode`, whose values have no space or line break to
      trim or replace, and for header names that are tokens.
    """

    __slots__ = ("_encoders", "content_type_header", "fixed", "key_field", "lines", "pairs",
                 "percent_encode", "prefix", "protocol", "typed_pairs", "utf8")

    def __init__(self, protocol: str, prefix: str, percent_encode: bool,
                 content_type_header: str, *, fixed: Mapping[str, JSON] | None = None,
                 key_field: str | None = None, pairs: bool = False, utf8: bool = False,
                 typed_pairs: bool = False, lines: bool = False) -> None:
        if lines and not (pairs and percent_encode):
            raise ValueError("header lines are made with the pairs of a percent-encoding "
                             "binding")
        self.protocol = protocol
        self.prefix = prefix
        self.percent_encode = percent_encode
        self.content_type_header = content_type_header
        self.fixed = dict(fixed or {})
        self.key_field = key_field
        self.pairs = pairs
        self.utf8 = utf8
        self.typed_pairs = typed_pairs
        self.lines = lines
        self._encoders: ByLayout[Encoder] = ByLayout(lambda layout: _generate(self, layout))

    def encoder(self, layout: tuple[str, ...]) -> Encoder | None:
        """The encoder of `layout`, generated on first use (None once `layouts` has as
        many as it keeps: the binding's own steps encode those events)."""
        return self._encoders.get(layout)


def encode(form: BinaryForm, event: CloudEvent) -> NativeMessage | None:
    """The binary record of `event` as the binding writes it, or None where the
    binding's own steps must write it (see the module docstring)."""
    encoder = form.encoder(tuple(event.get_attributes()))
    return None if encoder is None else encoder(event)


#: Where the encoder's code reads the event: its attributes (in layout order), its data,
#: whether it has data, and the bytes the data was parsed from.
EVENT_SOURCE = ("event._attributes", "event._data", "event._has_data", "event._raw")


def _generate(form: BinaryForm, layout: tuple[str, ...]) -> Encoder:
    """The encoder of one layout (see the module docstring)."""
    body, namespace = write_lines(form, layout, EVENT_SOURCE)
    exec("\n".join(["def encode(event):", *("    " + line for line in body)]), namespace)
    encoder: Encoder = namespace["encode"]
    return encoder


def write_lines(form: BinaryForm, layout: tuple[str, ...],
                source: tuple[str, str, str, str],
                texts: frozenset[int] | None = None,
                safe: frozenset[int] = frozenset()) -> tuple[list[str], dict[str, Any]]:
    """The encoder's body (unindented lines, ending in `return`), reading the event from
    the expressions of `source` (see `EVENT_SOURCE`), and the names it needs. The fused
    writer (`envelope/wirewriter.py`) runs the same lines on the attributes it has just
    rendered, with no event made.

    `texts`: the caller has set each attribute's value as `v{n}` (its place in `layout`)
    itself, and those at these places are text already (`source`'s attributes are not
    read then). `safe`: the places whose values the caller made itself of characters
    that need no percent-encoding (an id it generated, a time it formatted): not
    checked again."""
    attributes, data_of, has_data_of, raw_of = source
    typed_index = layout.index("datacontenttype") if "datacontenttype" in layout else None
    written = [n for n, name in enumerate(layout) if name != "datacontenttype"]
    # The header of each written attribute (`h{n}` in the code), and all of them with the
    # content-type header after them.
    header = {n: form.prefix + layout[n] for n in written}
    with_type = (*header.values(), form.content_type_header)
    values = ", ".join(f"v{n}" for n in range(len(layout)))
    code = ([] if texts is not None
            else [f"    {values}{',' if len(layout) == 1 else ''} = {attributes}.values()"])
    for n in written:
        if texts is not None and n in texts:
            continue
        # Not text: nearly always the time, the burst's one receive time, whose text
        # `to_canonical` remembers; read here first.
        code += [f"    if v{n}.__class__ is not str:",
                 f"        v{n} = (time_text[1] if v{n} is (time_text := TIME_TEXT[0])[0]"
                 f" else to_canonical(v{n}))"]
    # The content type sent, `ct`, and the body: the data as JSON (with its bytes as
    # received, when it has them) or non-empty bytes; anything else is the binding's.
    code += [f"    data = {data_of}",
              f"    if not {has_data_of}:",
              "        return None"]
    if typed_index is None:
        code += ["    if data.__class__ is bytes:",
                  "        if not data:",
                  "            return None",
                  "        ct = None",
                  "    elif isinstance(data, bytes):  # a subclass of bytes: the binding's",
                  "        return None",
                  "    else:",
                  "        ct = JSON_CONTENT_TYPE"]
    else:
        code += [f"    ct = v{typed_index}",
                  "    if ct.__class__ is not str:",
                  "        return None",
                  "    if data.__class__ is bytes:",
                  "        if not data:",
                  "            return None",
                  "    elif isinstance(data, bytes) or (ct != JSON_CONTENT_TYPE"
                  " and not is_json(ct)):  # text data: the binding's",
                  "        return None"]
    checked = [f"v{n}" for n in written if n not in safe]
    if form.percent_encode and form.content_type_header.startswith(form.prefix):
        # NATS writes the content type as an attribute header: percent-encoded too.
        checked.append("ct or ''")
    if form.percent_encode and checked:
        # One check of every value, as `headers.write` makes it, over one string built
        # at once (an f-string: a chain of `+` made a string per value).
        joined = "".join(f"{{{value}}}" for value in checked)
        code += [f"    if needs_no_encoding(f{joined!r}) is None:",
                  "        return None"]
    if form.pairs:
        # The headers as one tuple of values beside the layout's names: their {name,
        # value} objects are made only if someone reads the record's fields (`WireRecord`).
        values = "".join(f"v{n}, " for n in written)
        code += ["    if ct is not None:",
                  "        names = NAMES_CT",
                  f"        values = ({values}ct)",
                  "    else:",
                  "        names = NAMES",
                  f"        values = ({values})"]
    else:
        entries = [f"{{'name': h{n}, 'value': v{n}}}" for n in written]
        code.append(f"    entries = [{', '.join(entries)}]")
        code += ["    if ct is not None:",
                  "        entries.append({'name': CT_HEADER, 'value': ct})"]
    if form.utf8:
        # Most values are the same text object as in the last event (the definition's
        # constants, a time stamp's cached text): their (name, UTF-8) pair, a tuple, is
        # the last one made. `LAST[n]` is (text, pair), replaced whole (thread-safe).
        for n in written:
            code += [f"    last = LAST[{n}]",
                      f"    if v{n} is last[0]:",
                      f"        u{n} = last[1]",
                      "    else:",
                      f"        u{n} = (h{n}, v{n}.encode())",
                      f"        LAST[{n}] = (v{n}, u{n})"]
        utf8 = ", ".join(f"u{n}" for n in written)
        slot = len(layout)  # the content type's
        code += [f"    utf8 = [{utf8}]",
                  "    if ct is not None:",
                  f"        last = LAST[{slot}]",
                  # A content type passed on from the source's header is a new text
                  # per message, of the same few values: compared by value (the same
                  # object compares equal at once).
                  "        if ct == last[0]:",
                  "            utf8.append(last[1])",
                  "        else:",
                  "            made = (CT_HEADER, ct.encode())",
                  f"            LAST[{slot}] = (ct, made)",
                  "            utf8.append(made)"]
    fields = [f"{name!r}: FIXED[{name!r}]" for name in form.fixed]
    if form.key_field is not None and "partitionkey" in layout:
        fields.append(f"KEY_FIELD: v{layout.index('partitionkey')}")
    if not form.pairs:
        fields.append("'headers': entries")
    code.append(f"    fields = {{{', '.join(fields)}}}")
    code += ["    if data.__class__ is bytes:",
              "        payload = data",
              "        data = NO_DATA",
              "        raw = None",
              "    else:",
              "        payload = None",
              f"        raw = {raw_of}",
              f"        if raw is not None and not {plain_utf8_code('raw')}:",
              "            raw = None"]
    block = "None"
    if form.lines and all(_TOKEN.fullmatch(name) for name in with_type):
        block = "block"
        made = "".join(f"{{h{n}}}: {{v{n}}}\r\n" for n in written)
        code += [f"    block = f{made!r}",
                  "    if ct is not None:",
                  "        block = f'{block}{CT_HEADER}: {ct}\\r\\n'",
                  "    block = block.encode()"]
    if form.pairs:
        typed = "ct is not None" if form.typed_pairs else "False"
        utf8_value = "utf8" if form.utf8 else "None"
        code.append("    return Wire(PROTOCOL, fields, data, payload, raw, Encoded(None, None,"
                     f" {utf8_value}, {typed}, {block}, names, values))")
    else:
        code.append("    return Record(PROTOCOL, fields, data, payload, None, raw)")
    namespace: dict[str, Any] = {
        "to_canonical": to_canonical, "TIME_TEXT": LAST_TIME_TEXT,
        "needs_no_encoding": needs_no_encoding,
        "is_json": is_json, "JSON_CONTENT_TYPE": JSON_CONTENT_TYPE,
        "Record": NativeMessage, "Encoded": EncodedHeaders,
        "Wire": WireRecord,
        "NAMES": with_type[:-1], "NAMES_CT": with_type,
        "NO_DATA": _NO_DATA,
        "PROTOCOL": form.protocol, "CT_HEADER": form.content_type_header,
        "FIXED": form.fixed, "KEY_FIELD": form.key_field,
        "LAST": [(None, None)] * (len(layout) + 1),
    }
    namespace.update({f"h{n}": name for n, name in header.items()})
    return [line[4:] for line in code], namespace
