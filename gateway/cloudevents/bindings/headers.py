"""Binary-mode attributes carried in prefixed headers: `ce-` (HTTP, NATS) and `ce_` (Kafka).

One pass over the header list finds the content type and every prefixed attribute, so
a decoder reads the headers once. `scan` reads the record's list of {name, value}
entries itself: every received message is scanned, most of them carry no CloudEvent,
and `record.pairs()` would build a new list with every value's text first.
"""

from __future__ import annotations

from gateway.cloudevents.event import CloudEvent
from gateway.cloudevents.headercodec import (
    HeaderValueError,
    decode_header_value,
    encode_header_value,
    needs_no_encoding,
)
from gateway.cloudevents.typesystem import to_canonical
from gateway.jsontypes import JSON
from gateway.record import as_text

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


# Prefixed header names by (prefix, attribute name): the same few on every event, and a
# concatenation each was a new string per header per message. Bounded against events
# with endless extension names.
_NAMES: dict[tuple[str, str], str] = {}
_NAMES_MAX = 4096


def _header_name(prefix: str, name: str) -> str:
    header = _NAMES.get((prefix, name))
    if header is None:
        header = prefix + name
        if len(_NAMES) < _NAMES_MAX:
            _NAMES[prefix, name] = header
    return header


def write(event: CloudEvent, prefix: str, percent_encode: bool,
          pairs: list[tuple[str, str]] | None = None,
          utf8: list[tuple[str, bytes]] | None = None) -> list[JSON]:
    """Prefixed headers for every attribute except `datacontenttype`, lower-case names.
    `pairs` and `utf8`, when given, also get each header as (name, value) and as (name,
    UTF-8 value), made in the same pass (`NativeMessage.encoded_headers`)."""
    headers: list[JSON] = []
    names: list[str] = []
    texts: list[str] = []
    for name, value in event.get_attributes().items():
        if name == "datacontenttype":
            continue
        text = value if value.__class__ is str else to_canonical(value)
        header = _header_name(prefix, name)
        names.append(header)
        texts.append(text)
        headers.append({"name": header, "value": text})
    # Nearly every value is safe as it is: one check of them all, not one each (a regular
    # expression call per attribute was half the cost of a NATS binary event's headers).
    if percent_encode and needs_no_encoding("".join(texts)) is None:
        texts = [encode_header_value(text) for text in texts]
        for entry, text in zip(headers, texts, strict=True):
            assert isinstance(entry, dict)
            entry["value"] = text
    if pairs is not None:
        pairs += zip(names, texts, strict=True)
    if utf8 is not None:
        # A validated event's text is UTF-8-encodable (lone surrogates are refused).
        utf8 += [(name, text.encode()) for name, text in zip(names, texts, strict=True)]
    return headers
