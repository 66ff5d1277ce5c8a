"""Binary-mode attributes carried in prefixed headers: `ce-` (HTTP, NATS) and `ce_` (Kafka).

One pass over the header list finds the content type and every prefixed attribute, so
a decoder reads the headers once. `scan` reads the record's list of {name, value}
entries itself: every received message is scanned, most of them carry no CloudEvent,
and `record.pairs()` would build a new list with every value's text first.
"""

from __future__ import annotations

from operator import itemgetter

from gateway.cloudevents.event import CloudEvent
from gateway.cloudevents.headercodec import (
    HeaderValueError,
    decode_header_value,
    encode_header_value,
    needs_no_encoding,
)
from gateway.cloudevents.typesystem import to_canonical
from gateway.json.values import JSON, as_text

# (attribute name, header name as sent, header value)
Entry = tuple[str, str, str]
_SPEC_SIZE = len("specversion")
_CONTENT_TYPE_SIZE = len("content-type")


def scan(raw: JSON, prefix: str, lower_names: bool) -> tuple[str | None, list[Entry]]:
    """(Content type, prefixed entries) of a {name, value} list field (`raw`, as the record
    holds it; entries as `record.pairs()` reads them). Prefix and `content-type` match
    case-insensitively; only the values that matter are made text.

    `lower_names` folds attribute names to lower case, for protocols whose header names
    are case-insensitive (HTTP, NATS); Kafka keeps them, so `ce_MyExt` is reported.
    """
    if not isinstance(raw, list):
        return None, []
    size = len(prefix)
    content_type: str | None = None
    entries: list[Entry] = []
    for entry in raw:
        if not isinstance(entry, dict):
            continue
        key = entry.get("name", "")
        if key.__class__ is not str:
            key = str(key)
        head = key[:size].lower()
        if head == prefix:
            name = key[size:]
            entries.append((name.lower() if lower_names else name, key,
                            as_text(entry.get("value"))))
        elif content_type is None and key.lower() == "content-type":
            content_type = as_text(entry.get("value"))
    return content_type, entries


def peek(raw: JSON, prefix: str, lower_names: bool) -> tuple[str | None, bool]:
    """(Content type, whether a prefixed `specversion` is there): what `detect` needs of
    `scan(raw, ...)`, without collecting the entries (every received message is peeked
    at; few are CloudEvents)."""
    if not isinstance(raw, list):
        return None, False
    size = len(prefix)
    content_type: str | None = None
    specversion = False
    for entry in raw:
        if not isinstance(entry, dict):
            continue
        key = entry.get("name", "")
        if key.__class__ is not str:
            key = str(key)
        # Names that can be neither (the usual application headers) cost a length
        # comparison and one character's case fold, not a lower-cased copy of the name.
        if len(key) == _SPEC_SIZE + size or len(key) == _CONTENT_TYPE_SIZE:
            if key[:size].lower() == prefix:
                name = key[size:]
                if (name.lower() if lower_names else name) == "specversion":
                    specversion = True
            elif content_type is None and key.lower() == "content-type":
                content_type = as_text(entry.get("value"))
    return content_type, specversion


def has_specversion(entries: list[Entry]) -> bool:
    return any(name == "specversion" for name, _, _ in entries)


def collect(entries: list[Entry], problems: list[str], percent_decode: bool) -> dict[str, object]:
    """Attribute values by name; a repeated attribute or an undecodable value is a problem."""
    out: dict[str, object] = {}
    for name, key, value in entries:
        if name in out:
            problems.append(f"{name}: appears more than once ({key})")
            continue
        if not percent_decode:
            out[name] = value
            continue
        try:
            out[name] = decode_header_value(value)
        except HeaderValueError as exc:
            problems.append(f"{name}: header {key}: {exc}")
    return out


# Prefixed header names per prefix, by attribute name: the same few on every event, and a
# concatenation each was a new string per header per message. `datacontenttype` maps to
# "" (never a header of its own: the bindings write the content type themselves).
# Bounded against events with endless extension names.
_NAMES: dict[str, dict[str, str]] = {}
_NAMES_MAX = 4096
_SECOND = itemgetter(1)


def _names(prefix: str) -> dict[str, str]:
    table = _NAMES.get(prefix)
    if table is None:
        table = _NAMES[prefix] = {"datacontenttype": ""}
    return table


def _new_name(table: dict[str, str], prefix: str, name: str) -> str:
    header = prefix + name
    if len(table) < _NAMES_MAX:
        table[name] = header
    return header


def write(event: CloudEvent, prefix: str, percent_encode: bool,
          pairs: list[tuple[str, str]] | None = None,
          utf8: list[tuple[str, bytes]] | None = None) -> list[JSON]:
    """Prefixed headers for every attribute except `datacontenttype`, lower-case names.
    `pairs` and `utf8`, when given, also get each header as (name, value) and as (name,
    UTF-8 value), made in the same pass (`NativeMessage.encoded_headers`)."""
    table = _names(prefix)
    made: list[tuple[str, str]] = []
    append = made.append
    for name, value in event.get_attributes().items():
        header = table.get(name)
        if not header:
            if header is not None:
                continue  # datacontenttype
            header = _new_name(table, prefix, name)
        append((header, value if value.__class__ is str else to_canonical(value)))
    # Nearly every value is safe as it is: one check of them all, not one each (a regular
    # expression call per attribute was half the cost of a NATS binary event's headers).
    if percent_encode and needs_no_encoding("".join(map(_SECOND, made))) is None:
        made = [(header, encode_header_value(text)) for header, text in made]
    if pairs is not None:
        pairs += made
    if utf8 is not None:
        # A validated event's text is UTF-8-encodable (lone surrogates are refused).
        utf8 += [(header, text.encode()) for header, text in made]
    return [{"name": header, "value": text} for header, text in made]
