"""Normalization of message and group attributes to rc4 spellings (notes 1.10 and 1.12).

The result is a `Located` canonical object per message with these keys only:
`basemessage`, `xref`, `envelope`, `envelopemetadata`, `envelopeoptions`, `protocol`,
`protocoloptions`, `dataschemaformat`, `dataschema`, `dataschemauri`, `dataschemaxid`,
`datacontenttype`, `name`, `description`, `deprecated`. Every envelope attribute is a
declaration object (a plain scalar `x` becomes `{"value": x}`), so that a base's
`{"type": "uritemplate", "value": ...}` and an overlay's `{"required": true}` merge into one
declaration instead of one replacing the other.

`protocoloptions` is only moved here; its contents depend on the protocol, which may be
inherited from a base message, so `options.normalize_protocol_options` runs once the
effective protocol is known. Server-generated attributes are dropped.
"""

from __future__ import annotations

import difflib

from gateway.definitions.layout import RawGroup, RawMessage
from gateway.definitions.located import Located, Origin
from gateway.definitions.model import CLOUDEVENTS
from gateway.definitions.spelling import SpellingLog
from gateway.json.values import JSON, JSONObject
from gateway.protocols import is_known_protocol, normalize_protocol, versionless_reading
from gateway.spec.problems import Problems

# canonical name -> accepted spellings, best first (the canonical one is always best).
# `basemessageuri` is the rc3/rc4 *model* name, so it is not reported as an old spelling.
_ALIASES: dict[str, tuple[str, ...]] = {
    "basemessage": ("basemessageuri", "basemessageurl", "baseDefinitionUrl"),
    "envelopemetadata": ("metadata",),
    "protocol": ("binding",),
    "protocoloptions": ("protocolmetadata",),
    "dataschemaformat": ("schemaformat",),
    "dataschemauri": ("dataschemaurl", "schemaurl"),
    "dataschema": ("schemaobject", "schema"),
}
_QUIET_ALIASES = {"basemessageuri"}
_PLAIN = ("envelopeoptions", "dataschemaformat", "dataschema", "dataschemauri",
          "dataschemaxid", "datacontenttype", "name", "description", "deprecated")
# Attributes servers generate, ids (taken from map keys) and documentation-only ones.
_IGNORED = frozenset({
    "self", "shortself", "xid", "epoch", "createdat", "modifiedat", "messageid", "id",
    "versionid", "metaurl", "versionsurl", "versionscount", "versions", "isdefault",
    "ancestor", "contenttype", "labels", "documentation", "type", "readonly",
    "compatibility", "compatibilityauthority", "defaultversionid", "defaultversionurl",
    "defaultversionsticky", "format", "formatvalidated", "formatvalidatedreason",
    "compatibilityvalidated", "compatibilityvalidatedreason", "meta", "xref", "uri",
    "message",
})
_KNOWN = frozenset(_ALIASES) | {a for names in _ALIASES.values() for a in names} | set(_PLAIN) | {
    "envelope", "envelopeoptions", "protocoloptions"}
DECLARATION_KEYS = frozenset({"type", "value", "required", "description", "specurl", "name"})
LEGACY_TIME_SENTINEL = "01-01-0000T00:00:00Z"
TIME_SENTINEL = "0000-01-01T00:00:00Z"


def format_protocol(value: JSON) -> str | None:
    """The protocol a 2023-format `format` names (`Kafka/0.11`, `MQTT/5.0`, `AMQP/1.0`), or
    None when it names an envelope (CloudEvents) or nothing known."""
    if not isinstance(value, str) or _looks_like_cloudevents(value):
        return None
    protocol = normalize_protocol(value)
    return protocol if is_known_protocol(protocol) else None


def normalize_message(raw: RawMessage, problems: Problems, log: SpellingLog) -> Located:
    src = _Source(raw, problems, log)
    loc = Located({}, {(): raw.origin})
    if _take_format_protocol(src, loc):
        return _finish(src, loc, raw)
    for canonical, aliases in _ALIASES.items():
        picked = src.pick(canonical, aliases)
        if picked is not None:
            loc.put(canonical, picked[0], picked[1])
    _take_xref(src, loc)
    _take_envelope(src, loc)
    _take_protocol(src, loc)
    if "protocoloptions" not in loc.data and "binding" in raw.data:
        message = raw.data.get("message")
        if isinstance(message, dict):  # xRegistry 0.5: `binding` + `message`
            src.log.note(src.origin("message"), "message", "protocoloptions")
            loc.put("protocoloptions", message, src.origin("message"))
    return _finish(src, loc, raw)


def _finish(src: _Source, loc: Located, raw: RawMessage) -> Located:
    for key in _PLAIN:
        if key in raw.data and key not in loc.data:
            loc.put(key, raw.data[key], src.origin(key))
    _normalize_envelope_metadata(loc, src.problems, src.log)
    _move_envelope_option_declarations(loc, src.problems)
    _report_typos(src)
    return loc


def _take_format_protocol(src: _Source, loc: Located) -> bool:
    """A 2023-format protocol definition: `format` names a protocol and `metadata` holds
    its protocol metadata (not CloudEvents attributes). True when read that way."""
    protocol = format_protocol(src.data.get("format"))
    if protocol is None or "envelope" in src.data or "protocol" in src.data:
        return False
    src.log.note(src.origin("format"), "format (a protocol)", "protocol")
    warn_versionless_2023(src.data.get("format"), src.origin("format"), src.problems)
    loc.put("protocol", protocol, src.origin("format"))
    for canonical, aliases in _ALIASES.items():
        if canonical in ("envelopemetadata", "protocol"):
            continue
        names = aliases if canonical != "protocoloptions" else (*aliases, "metadata")
        picked = src.pick(canonical, names)
        if picked is not None:
            loc.put(canonical, picked[0], picked[1])
    _take_xref(src, loc)
    return True


class _Source:
    """The raw message with helpers to pick spellings and cite where they were."""

    def __init__(self, raw: RawMessage, problems: Problems, log: SpellingLog) -> None:
        self.raw = raw
        self.data = raw.data
        self.problems = problems
        self.log = log

    def origin(self, key: str) -> Origin:
        return self.raw.key_origins.get(key) or self.raw.origin.child(key)

    def pick(self, canonical: str, aliases: tuple[str, ...]) -> tuple[JSON, Origin] | None:
        present = [k for k in (canonical, *aliases) if k in self.data]
        if not present:
            return None
        chosen = present[0]
        for other in present[1:]:
            where = self.origin(other)
            self.problems.warning(
                where.file, where.path,
                f"both '{chosen}' and '{other}' are given; '{chosen}' is used",
                f"remove '{other}'",
            )
        if chosen != canonical and chosen not in _QUIET_ALIASES:
            self.log.note(self.origin(chosen), chosen, canonical)
        return self.data[chosen], self.origin(chosen)


def _take_xref(src: _Source, loc: Located) -> None:
    """Cross-references ("borrowed" messages): `meta.xref` (normative), resource-level
    `xref` (xrcg) and `{"uri": "#/..."}` (the spec's own example)."""
    meta = src.data.get("meta")
    if isinstance(meta, dict) and isinstance(meta.get("xref"), str):
        loc.put("xref", meta["xref"], src.origin("meta").child("xref"))
    elif "xref" in src.data:
        loc.put("xref", src.data["xref"], src.origin("xref"))
    elif isinstance(src.data.get("uri"), str):
        loc.put("xref", src.data["uri"], src.origin("uri"))


def _take_envelope(src: _Source, loc: Located) -> None:
    if "envelope" in src.data:
        value, where = src.data["envelope"], src.origin("envelope")
        check_envelope_spelling(value, where, src.problems)
    elif _looks_like_cloudevents(src.data.get("format")):
        value, where = src.data["format"], src.origin("format")
        src.log.note(where, "format", "envelope")
    else:
        return
    envelope = normalize_envelope(value)
    if envelope is None:
        src.problems.error(where.file, where.path, f"envelope must be a string, not {value!r}",
                           'write "envelope": "CloudEvents/1.0"')
        return
    loc.put("envelope", envelope, where)


def _take_protocol(src: _Source, loc: Located) -> None:
    if "protocol" not in loc.data:
        return
    value = loc.data["protocol"]
    where = loc.locate("protocol")
    if value is None or isinstance(value, str):
        check_protocol_spelling(value, where, src.problems)
        protocol = normalize_protocol(value)
        if protocol is None:
            loc.drop("protocol")  # "None" (pre-rc1 default) means no protocol
        else:
            loc.data["protocol"] = protocol
        return
    src.problems.error(where.file, where.path, f"protocol must be a string, not {value!r}",
                       'write e.g. "protocol": "MQTT/5.0"')
    loc.drop("protocol")


def check_protocol_spelling(value: JSON, where: Origin, problems: Problems) -> None:
    """rc2: `protocol` is a non-empty string (`None`, the pre-rc1 default, still reads as
    absent) and names the version where the family's versions are incompatible
    (`MQTT/3.1.1` or `MQTT/5.0`, never a bare `MQTT`)."""
    if not isinstance(value, str):
        return
    if not value.strip():
        problems.error(where.file, where.path, "protocol must be a non-empty string",
                       'name the protocol, e.g. "protocol": "MQTT/5.0", or remove it')
        return
    reading = versionless_reading(value)
    if reading is not None:
        problems.error(where.file, where.path,
                       f"protocol '{value}' names no version, and its versions differ "
                       f"(read as '{reading}')",
                       f'write the version, e.g. "protocol": "{reading}"')


def warn_versionless_2023(value: JSON, where: Origin, problems: Problems) -> None:
    """The 2023 draft (`format`, endpoint `config.protocol`) maps a bare `MQTT` to 5.0:
    read it so, and say so."""
    reading = versionless_reading(value) if isinstance(value, str) else None
    if reading is not None:
        problems.warning(where.file, where.path,
                         f"'{value}' names no version; read as '{reading}' (2023 draft)",
                         f'write "{reading}" (or "MQTT/3.1.1" if that is meant)')


def check_envelope_spelling(value: JSON, where: Origin, problems: Problems) -> None:
    """rc2: `envelope` is `<NAME>/<VERSION>` (`CloudEvents/1.0`)."""
    if isinstance(value, str) and not has_version(value):
        problems.error(where.file, where.path,
                       f"envelope '{value}' names no version (<NAME>/<VERSION>)",
                       'write "envelope": "CloudEvents/1.0"')


def has_version(value: str) -> bool:
    """`<NAME>/<VERSION>` with both parts non-empty."""
    name, _, version = value.strip().partition("/")
    return bool(name.strip()) and bool(version.strip())


def _looks_like_cloudevents(value: JSON) -> bool:
    return isinstance(value, str) and value.strip().lower().startswith("cloudevents")


def normalize_envelope(value: JSON) -> str | None:
    """`CloudEvents/1.0` whatever the case (a bare `CloudEvents` means 1.0); other envelopes
    are kept as written so the validator can name them."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    name, _, version = text.partition("/")
    if name.lower() == "cloudevents" and version in ("", "1.0", "1"):
        return CLOUDEVENTS
    return text


def normalize_group(group: RawGroup, problems: Problems, log: SpellingLog) -> Located:
    """A message group's own attributes: `envelope` (or 2023 `format`) and `protocol`."""
    loc = Located({}, {(): group.origin})
    data = group.data
    for text in ("name", "description"):
        if isinstance(data.get(text), str):
            loc.put(text, data[text], group.origin.child(text))
    key = "envelope" if "envelope" in data else "format" if "format" in data else None
    protocol_format = format_protocol(data.get("format")) if key == "format" else None
    if protocol_format is not None and "protocol" not in data:
        where = group.origin.child("format")
        log.note(where, "format (a protocol)", "protocol")
        warn_versionless_2023(data.get("format"), where, problems)
        loc.put("protocol", protocol_format, where)
        key = None
    if key is not None:
        envelope = normalize_envelope(data[key])
        where = group.origin.child(key)
        if key == "envelope":
            check_envelope_spelling(data[key], where, problems)
        if envelope is None:
            problems.error(where.file, where.path, "envelope must be a string",
                           'write "envelope": "CloudEvents/1.0"')
        else:
            if key == "format":
                log.note(where, "format", "envelope")
            loc.put("envelope", envelope, where)
    value = data.get("protocol")
    check_protocol_spelling(value, group.origin.child("protocol"), problems)
    if isinstance(value, str) and normalize_protocol(value) is not None:
        loc.put("protocol", normalize_protocol(value), group.origin.child("protocol"))
    elif value is not None and not isinstance(value, str):
        where = group.origin.child("protocol")
        problems.error(where.file, where.path, "protocol must be a string",
                       'write e.g. "protocol": "MQTT/5.0"')
    return loc


def check_2023_format(group: RawGroup, message: RawMessage, problems: Problems) -> None:
    """The 2023 draft: a definition's `format` "MUST be the same as the format attribute
    of the definitionGroup" (compared as read: `CloudEvents/1.0` in any case, a protocol
    by its canonical name). Otherwise a protocol definition inside a CloudEvents group
    would silently become a CloudEvent carried over that protocol."""
    mine, theirs = message.data.get("format"), group.data.get("format")
    if not isinstance(mine, str) or not isinstance(theirs, str):
        return
    if any(k in message.data for k in ("envelope", "protocol")):
        return  # rc spelling: `format` is not what the message is read by

    def read(value: str) -> str | None:
        return format_protocol(value) or normalize_envelope(value)

    if read(mine) != read(theirs):
        where = message.key_origins.get("format") or message.origin.child("format")
        problems.error(where.file, where.path,
                       f"definition format '{mine}' differs from its group's '{theirs}' "
                       "(2023 draft: it must be the same)",
                       "move the definition to a group of that format, or give it the "
                       "group's format")


def declaration(value: JSON) -> JSONObject:
    """A constraint as a declaration object: objects are declarations, scalars are values."""
    return dict(value) if isinstance(value, dict) else {"value": value}


def _normalize_envelope_metadata(loc: Located, problems: Problems, log: SpellingLog) -> None:
    if "envelopemetadata" not in loc.data:
        return
    value = loc.data["envelopemetadata"]
    where = loc.locate("envelopemetadata")
    if not isinstance(value, dict):
        problems.error(where.file, where.path, "envelopemetadata must be an object",
                       'declare attributes as "envelopemetadata": {"type": {"value": "..."}}')
        loc.drop("envelopemetadata")
        return
    entries: list[tuple[str, JSON, Origin]] = []
    wrapped = value.get("attributes")
    if isinstance(wrapped, dict) and not _is_declaration(wrapped):
        # The 2023 `metadata.attributes` wrapper, still shown in the rc4 prose.
        log.note(where.child("attributes"), "envelopemetadata.attributes", "envelopemetadata")
        entries += [(k, v, where.child("attributes", k)) for k, v in wrapped.items()]
        entries += [(k, v, where.child(k)) for k, v in value.items() if k != "attributes"]
    else:
        entries += [(k, v, where.child(k)) for k, v in value.items()]
    loc.drop("envelopemetadata")
    canonical: JSONObject = {}
    for name, decl, at in entries:
        canonical[name] = _time_sentinel(name, declaration(decl), at, log)
        loc.origins[("envelopemetadata", name)] = at
    loc.data["envelopemetadata"] = canonical
    loc.origins[("envelopemetadata",)] = where


def _time_sentinel(name: str, decl: JSONObject, at: Origin, log: SpellingLog) -> JSONObject:
    """The 2023 draft wrote the "current time" sentinel as 01-01-0000T00:00:00Z."""
    if name == "time" and decl.get("value") == LEGACY_TIME_SENTINEL:
        log.note(at.child("value"), LEGACY_TIME_SENTINEL, TIME_SENTINEL)
        decl["value"] = TIME_SENTINEL
    return decl


def _is_declaration(value: JSON) -> bool:
    return isinstance(value, dict) and bool(value) and set(value) <= DECLARATION_KEYS


def _move_envelope_option_declarations(loc: Located, problems: Problems) -> None:
    """The rc3/rc4 "Context Attributes" example declares CloudEvents attributes under
    `envelopeoptions`; the model only puts `mode`/`format` there. Read them as metadata."""
    options = loc.data.get("envelopeoptions")
    where = loc.locate("envelopeoptions")
    if options is None:
        return
    if not isinstance(options, dict):
        problems.error(where.file, where.path, "envelopeoptions must be an object",
                       'write e.g. "envelopeoptions": {"mode": "binary"}')
        loc.drop("envelopeoptions")
        return
    moved = [k for k, v in options.items() if k not in ("mode", "format") and _is_declaration(v)]
    if not moved:
        return
    options = dict(options)  # never edit the caller's document
    loc.data["envelopeoptions"] = options
    metadata = loc.data.setdefault("envelopemetadata", {})
    assert isinstance(metadata, dict)
    for name in moved:
        decl = declaration(options.pop(name))
        if name in metadata:  # an explicit envelopemetadata declaration wins
            existing = metadata[name]
            decl.update(existing if isinstance(existing, dict) else {})
        else:
            loc.origins[("envelopemetadata", name)] = where.child(name)
        metadata[name] = decl
    loc.origins.setdefault(("envelopemetadata",), where)
    problems.warning(
        where.file, where.path,
        f"attribute declarations under envelopeoptions ({', '.join(moved)}) "
        "read as envelopemetadata",
        "move them into envelopemetadata; envelopeoptions holds only mode and format",
    )


def _report_typos(src: _Source) -> None:
    """Unknown attributes are allowed (extensions), but a near-miss of a known name is
    almost always a typo that silently drops a constraint."""
    for key in src.data:
        if key in _KNOWN or key in _IGNORED:
            continue
        close = difflib.get_close_matches(key, sorted(_KNOWN), n=1, cutoff=0.8)
        if close:
            where = src.origin(key)
            src.problems.warning(
                where.file, where.path,
                f"unknown message attribute '{key}' is ignored; did you mean '{close[0]}'?",
                f"rename '{key}' to '{close[0]}'",
            )
