"""Large index buckets split once more, by a second constant constraint.

The index finds candidates by address. A catalog may put thousands of definitions on
one address (every message type of a system on one Kafka topic, told apart by a header
or the key): the address bucket then holds them all, and every message would run every
test. Such a bucket is split by the constraint most of its definitions give a constant
value (the header, the key...), or by the literal first segment most of them give one
templated field (`shop7/{storeid}/...` on the key): a message is tested only against the
definitions whose constant (or first segment) it carries, plus those without that
constraint.

Exact: a constant check passes only for a value whose text (`as_text`, or its
percent-decoded text on a percent-encoded field) is the constant's text (`same_value` of
a scalar constant is text equality), so no definition a message can match is left out;
the definitions found still run every test of their own.
"""

from __future__ import annotations

from collections.abc import Hashable
from urllib.parse import unquote

from gateway.json.values import as_text
from gateway.matching.compiled import Check, CompiledDefinition
from gateway.matching.values import Reader
from gateway.record import NativeMessage

# Buckets up to this size are tested as they are: a split costs a field read.
SMALL = 8
_DEPTH = 3  # splits of splits, for catalogs told apart by two or three constants


class Narrowed(list[CompiledDefinition]):
    """A bucket (all its definitions, as the list it was) that can keep only the
    definitions a record may match by one constant constraint."""

    __slots__ = ("by_text", "decode", "others", "reader", "segment")

    def __init__(self, bucket: list[CompiledDefinition], reader: Reader, decode: bool,
                 by_text: dict[str, list[CompiledDefinition]],
                 others: list[CompiledDefinition], segment: str | None = None) -> None:
        super().__init__(bucket)
        self.reader = reader
        self.decode = decode
        self.by_text = by_text
        self.others = others  # definitions without the constraint: always candidates
        # Split by the first segment (up to this separator) of templated values, not by
        # the whole value: `by_text` then maps a literal first segment to its templates.
        self.segment = segment

    def narrow(self, record: NativeMessage) -> list[CompiledDefinition]:
        """The definitions of the bucket `record` may match. Read it, do not change it."""
        values = self.reader(record)
        others = self.others
        segment = self.segment
        if len(values) == 1 and not others and not self.decode:  # the common case
            value = values[0]
            text = value if value.__class__ is str else as_text(value)
            hit = self.by_text.get(text if segment is None else text.partition(segment)[0])
            if hit is None:
                return _NONE
            return hit.narrow(record) if hit.__class__ is Narrowed else hit
        texts: list[str] = []  # each text once: a repeated header must not repeat a hit
        for value in values:
            text = value if value.__class__ is str else as_text(value)
            if segment is not None:
                text = text.partition(segment)[0]
            if text not in texts:
                texts.append(text)
            if self.decode and isinstance(value, str):
                plain = unquote(value)
                if plain not in texts:
                    texts.append(plain)
        found: list[CompiledDefinition] = _NONE
        for text in texts:
            hit = self.by_text.get(text)
            if hit:  # the sub-buckets of distinct texts hold distinct definitions
                hit = hit.narrow(record) if isinstance(hit, Narrowed) else hit
                found = found + hit if found else hit
        if others:
            others = others.narrow(record) if isinstance(others, Narrowed) else others
            found = found + others if found else others
        return found


_NONE: list[CompiledDefinition] = []  # never changed


def narrowed(bucket: list[CompiledDefinition], depth: int = _DEPTH,
             used: frozenset[Hashable] = frozenset()) -> list[CompiledDefinition]:
    """`bucket`, split when it is large and a constant constraint shared by most of its
    definitions tells them apart (the split keeps the bucket's order)."""
    if len(bucket) <= SMALL or depth == 0:
        return bucket
    # Per key (a field, and whether the whole value or its first segment is split on):
    # the definitions with such a constraint, and the text each is found by.
    groups: dict[Hashable, list[tuple[CompiledDefinition, Check, str]]] = {}
    for compiled in bucket:
        for check in compiled.protocol_checks:
            key = _constant_key(check)
            if key is not None and key not in used:
                groups.setdefault(key, []).append((compiled, check, as_text(check.constant)))
            key = _segment_key(check)
            if key is not None and key not in used:
                assert check.template is not None
                first = check.template.literal_prefix.partition(check.template.separator)[0]
                groups.setdefault(key, []).append((compiled, check, first))
    best: tuple[int, Hashable] | None = None
    for key, members in groups.items():
        sizes: dict[str, int] = {}
        for _, _, text in members:
            sizes[text] = sizes.get(text, 0) + 1
        # What a message then tests at worst: the bucket's other definitions, and the
        # largest share of one constant value.
        cost = len(bucket) - len(members) + max(sizes.values())
        if best is None or cost < best[0]:
            best = (cost, key)
    if best is None or best[0] * 2 > len(bucket):
        return bucket
    key = best[1]
    members = groups[key]
    by_text: dict[str, list[CompiledDefinition]] = {}
    for compiled, _, text in members:
        by_text.setdefault(text, []).append(compiled)
    split = {id(compiled) for compiled, _, _ in members}
    others = [compiled for compiled in bucket if id(compiled) not in split]
    used = used | {key}
    check = members[0][1]
    segment = check.template.separator if check.template is not None else None
    for compiled, member_check, _ in members:
        if segment is None and not member_check.check_type:
            # Found only by a value whose text is the constant's: the check holds (no type
            # to check besides), and the definition's own test can leave it out.
            compiled.narrowed_checks = (*compiled.narrowed_checks, member_check)
    assert check.reader is not None
    return Narrowed(bucket, check.reader, check.decode,
                    {text: narrowed(sub, depth - 1, used) for text, sub in by_text.items()},
                    narrowed(others, depth - 1, used), segment)


def _constant_key(check: Check) -> Hashable | None:
    """Where a constant check reads (one key per field or entry), or None when it is no
    constant a value's text decides (a template, an object or array, a CloudEvents
    attribute)."""
    if (not check.has_constant or check.template is not None or check.attribute is not None
            or check.access is None or isinstance(check.constant, (dict, list))):
        return None
    return (check.access, check.decode)


def _segment_key(check: Check) -> Hashable | None:
    """Where a templated check reads, when its template starts with a literal segment
    (`shop7/{storeid}/...`, separator included): a value it matches starts with that
    segment and the separator, so the value's first segment finds it exactly. None
    otherwise (a placeholder in the first segment; a percent-encoded field, whose raw and
    decoded segments may differ)."""
    template = check.template
    if (template is None or check.attribute is not None or check.access is None
            or check.decode or template.separator not in template.literal_prefix):
        return None
    return (check.access, "segment", template.separator)
