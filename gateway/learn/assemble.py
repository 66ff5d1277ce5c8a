"""A proposal's definition parts: the address template, the protocoloptions in their
canonical shape, the placeholder names, the CloudEvents type and the message id.

Placeholder names: the payload field that carries the same value (`{storeid}`), else the
entry's own name (`headers.deviceid` -> `{deviceid}`), else the position
(`topic_name[3]` -> `{segment3}`); a name taken twice in one definition gets `_2`.
Varying places off the address become templates only when a payload field names them
(they then fill the CloudEvent's context); other varying places are left out.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence

from gateway.json.values import JSON, JSONObject, as_text
from gateway.learn.model import LearnOptions, PlaceholderInfo, Proposal, ReplyProposal
from gateway.learn.slots import PART_SEPARATOR, Slot, address_ref
from gateway.protocols import FieldRef, find_profile
from gateway.templates.template import Template

_NOT_NAME = re.compile(r"[^A-Za-z0-9_]+")
_NOT_TYPE_WORD = re.compile(r"[^A-Za-z0-9_-]+")


def assemble(proposals: Sequence[Proposal], options: LearnOptions) -> None:
    for proposal in proposals:
        _templates(proposal)
    _types(proposals, options)


def _placeholder_name(slot: Slot, named_after: str | None) -> str:
    if named_after is not None:
        base = named_after
    elif slot.is_segment:
        base = f"segment{slot.segment}"
    else:
        base = slot.member or slot.field
    name = _NOT_NAME.sub("_", base).strip("_")
    return name or "value"


def _templates(proposal: Proposal) -> None:
    ref, separator = address_ref(proposal.protocol)
    taken: set[str] = set()
    for slot, value in list(proposal.constants.items()):
        if slot.is_segment and ("{" in as_text(value) or "}" in as_text(value)):
            # a literal brace cannot be written in a template: generalise the segment
            del proposal.constants[slot]
            proposal.placeholders[slot] = PlaceholderInfo(slot.path, None, 1, False)
    values: dict[Slot, JSON] = dict(proposal.constants)
    # address placeholders first, in order, so they get the plain names
    # With nothing else to constrain, an unnamed varying place (a Kafka key) is kept as a
    # template: it at least requires the place, where no constraint would match anything.
    keep_unnamed = not proposal.constants and not any(
        s.is_segment or i.named_after or i.composed for s, i in proposal.placeholders.items())
    for slot in sorted(proposal.placeholders, key=lambda s: (not s.is_segment, s)):
        info = proposal.placeholders[slot]
        is_named = info.named_after is not None or info.composed is not None
        if not slot.is_segment and not is_named and not keep_unnamed:
            proposal.left_out.append(slot)
            continue
        if info.composed is not None:
            info.template = _composed_template(info.composed, taken)
            info.name = "+".join(Template.parse(info.template).names)
        else:
            info.name = _unique(_placeholder_name(slot, info.named_after), taken)
            info.template = "{" + info.name + "}"
        values[slot] = info.template
    for slot in proposal.left_out:
        proposal.placeholders.pop(slot, None)
    segments = sorted((s for s in values if s.is_segment), key=lambda s: s.segment)
    if ref is not None and segments:
        proposal.address_field = ref.field if ref.name is None else f"{ref.field}.{ref.name}"
        proposal.address = separator.join(_literal(values[s]) for s in segments)
        values = {s: v for s, v in values.items() if not s.is_segment}
        values[Slot(ref.field, ref.name or "")] = proposal.address
        address_names = [proposal.placeholders[s].template for s in segments
                         if s in proposal.placeholders]
        if address_names:
            proposal.subject = address_names[-1]
        proposal.type_parts = [_type_word(as_text(proposal.constants[s])) for s in segments
                               if s in proposal.constants and as_text(proposal.constants[s])]
    if proposal.subject is None:
        named = [i.template for s, i in proposal.placeholders.items() if not s.is_segment]
        if named:
            proposal.subject = named[-1]
    proposal.options = _options(proposal.protocol, values)


def assemble_reply(reply: ReplyProposal) -> None:
    """A reply definition's protocoloptions: its constants, and its correlation as a
    template where the protocol's definitions can hold one (`{correlationid}`)."""
    values: dict[Slot, JSON] = dict(reply.constants)
    ref = reply.correlation
    if ref is not None and _holds_template(reply.protocol, ref.field, ref.name):
        values[Slot(ref.field, ref.name or "")] = "{correlationid}"
    reply.options = _options(reply.protocol, values)


def required_reply_address(proposal: Proposal) -> str | None:
    """The place (`reply-to`, `headers.kafka_replytopic`) of the reply address a request
    definition requires: when every one of its messages was answered (so every one
    carried it) and the protocol's definitions can hold it; else None."""
    reply = proposal.reply
    ref = None if reply is None else reply.reply_to
    if reply is None or ref is None or not reply.every_request_answered:
        return None
    if not _holds_template(proposal.protocol, ref.field, ref.name):
        return None
    return Slot(ref.field, _member(proposal.protocol, ref)).path


def _member(protocol: str, ref: FieldRef) -> str:
    """The entry name as the learner's places spell it (lower case where the protocol
    compares names ignoring case)."""
    prof = find_profile(protocol)
    spec = None if prof is None else prof.definition_field(ref.field)
    name = ref.name or ""
    return name.lower() if spec is not None and spec.case_insensitive_names else name


def request_options(proposal: Proposal) -> JSONObject:
    """The protocoloptions of a request definition: its own, plus its reply address as a
    template (`reply-to: {replyto}`) where `required_reply_address` says so."""
    reply = proposal.reply
    ref = None if reply is None else reply.reply_to
    if ref is None or required_reply_address(proposal) is None:
        return proposal.options
    extra = _options(proposal.protocol, {Slot(ref.field, ref.name or ""): "{replyto}"})
    merged: JSONObject = dict(proposal.options)
    for name, value in extra.items():
        known = merged.get(name)
        if isinstance(known, list) and isinstance(value, list):
            merged[name] = [*known, *value]
        elif isinstance(known, dict) and isinstance(value, dict):
            merged[name] = {**known, **value}
        else:
            merged[name] = value
    return merged


def _holds_template(protocol: str, field: str, name: str | None) -> bool:
    """Whether a definition of `protocol` can hold a text template at `field` (`name`)."""
    prof = find_profile(protocol)
    spec = None if prof is None else prof.definition_field(field)
    if spec is None:
        return False
    kind = spec.member_type(name) if spec.kind == "section" and name else spec.type
    return kind in ("string", "uritemplate")


def _unique(name: str, taken: set[str]) -> str:
    unique, n = name, 1
    while unique in taken:
        n += 1
        unique = f"{name}_{n}"
    taken.add(unique)
    return unique


def _composed_template(composed: str, taken: set[str]) -> str:
    out: list[str] = []
    for part in composed.split(PART_SEPARATOR):
        if part[0] == "F":
            name = _NOT_NAME.sub("_", part[1:]).strip("_") or "value"
            out.append("{" + _unique(name, taken) + "}")
        else:
            out.append(part[1:])
    return "".join(out)


def _literal(value: JSON) -> str:
    return as_text(value)


def _options(protocol: str, values: dict[Slot, JSON]) -> JSONObject:
    """protocoloptions in the canonical shape of each field's kind."""
    prof = find_profile(protocol)
    out: JSONObject = {}
    if prof is None:
        return out
    for slot in sorted(values):
        spec = prof.definition_field(slot.field)
        value = values[slot]
        if spec is None:
            continue
        if spec.kind == "scalar" or not slot.member:
            out[slot.field] = value
        elif spec.kind == "list":
            entries = out.setdefault(slot.field, [])
            assert isinstance(entries, list)
            entries.append({"name": slot.member, "value": as_text(value)})
        else:  # map, section
            section = out.setdefault(slot.field, {})
            assert isinstance(section, dict)
            section[slot.member] = {"value": value if spec.kind == "section"
                                    else as_text(value)}
    return out


def _type_word(text: str) -> str:
    return _NOT_TYPE_WORD.sub("_", text).strip("_")


def _types(proposals: Sequence[Proposal], options: LearnOptions) -> None:
    """Type from the constant words of the address; proposals that share one are told
    apart by their other word-like constants (an `action` header), then by a number."""
    by_base: dict[str, list[Proposal]] = defaultdict(list)
    for proposal in proposals:
        base = ".".join(p for p in proposal.type_parts if p)
        by_base[base or _family_word(proposal.protocol)].append(proposal)
    taken: set[str] = set()
    for base, group in by_base.items():
        for proposal in group:
            words = [base]
            if len(group) > 1:
                words += _distinguishing_words(proposal, group)
            name = ".".join(w for w in words if w)
            unique, n = name, 1
            while unique in taken:
                n += 1
                unique = f"{name}_{n}"
            taken.add(unique)
            proposal.message_id = unique
            proposal.type = options.type_prefix + unique


def _distinguishing_words(proposal: Proposal, group: Sequence[Proposal]) -> list[str]:
    words: list[str] = []
    for slot, value in sorted(proposal.constants.items()):
        if slot.is_segment or not isinstance(value, str):
            continue
        if any(other.constants.get(slot) != value for other in group):
            word = _type_word(value)
            if word:
                words.append(word)
    return words


def _family_word(protocol: str) -> str:
    prof = find_profile(protocol)
    word = prof.spelling.families[0] if prof is not None else protocol
    return _type_word(word.lower())
