"""Each compiled definition as one test function of a native record, built once.

`Check.apply` handles every kind of constraint in one general loop and phrases a
`Failure`; matching a message needs neither. Here each check becomes a small function
chosen for its kind when the matcher is built (constant, template, a template that is one
whole-value placeholder, presence or type only; on a scalar field, a {name, value} list or
anything else), and the checks of a definition become one function that returns the
captured context or None. Matching a message then costs a few function calls per
candidate, whatever the number of definitions (the index finds the candidates).

The rules are `Check.apply`'s, value for value (`tests/unit/core/test_matcher_fast.py`
compares both on generated definitions and records); `explain` keeps using `apply` for
its failures.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import cast
from urllib.parse import unquote

from gateway.cloudevents.mediatype import comparable
from gateway.json.values import JSON, as_text
from gateway.matching.compiled import Check, CompiledDefinition, Failure, NativeTest, search
from gateway.matching.values import conforms, same_value
from gateway.record import ENTRY_FIELDS, NativeMessage

# The verdict on one value of a field: accept the check, or try the field's next value
# (also when a placeholder captured a different value before: another entry of a
# repeated field may agree with it).
PASS, NEXT = 1, 0
# The tests one matcher has made, by what they are made of: definitions with the same
# constraints (a large catalog has thousands that differ only in their literal address
# segments) share one test, so matching touches a few hot functions, not one per
# definition.
Made = dict[Hashable, object]
ValueTest = Callable[[JSON, dict[str, str]], int]
# One check of a record: True when it holds (captures merged into the context).
CheckTest = Callable[[NativeMessage, dict[str, str]], bool]


def _merge(context: dict[str, str], captures: dict[str, str]) -> int:
    """A placeholder has one value: captures that disagree with the context leave it
    unchanged and send the check to the field's next value (a repeated user property
    or header passes when any entry agrees)."""
    if not context:  # the first capture of a message: nothing to disagree with
        context.update(captures)
        return PASS
    for name, value in captures.items():
        seen = context.get(name)
        if seen is not None and seen != value:
            return NEXT
    context.update(captures)
    return PASS


def value_test(check: Check) -> ValueTest:
    """`Check.apply`'s verdict on one value."""
    if check.has_constant:
        return _constant_test(check)
    if check.template is not None:
        if check.template.whole_value and not check.decode and not check.check_type:
            return _whole_value_test(check.template.names[0])
        return _template_test(check)
    return _presence_test(check)


def _constant_test(check: Check) -> ValueTest:
    decode, check_type, declared = check.decode, check.check_type, check.declared
    constant = check.constant
    text = as_text(constant)
    media_type = (comparable(constant) if check.attribute == "datacontenttype"
                  and isinstance(constant, str) else None)

    def test(value: JSON, context: dict[str, str]) -> int:
        plain = unquote(value) if decode and value.__class__ is str else value
        if check_type and not conforms(plain, declared):
            return NEXT
        if plain.__class__ is str and value.__class__ is str:
            # `same_value` of text: equal text (as_text of a str is the str itself).
            if plain == text or value == text:
                return PASS
        elif same_value(plain, constant) or same_value(value, constant):
            return PASS
        if media_type is not None and isinstance(value, str) and comparable(value) == media_type:
            return PASS  # media types compare case-insensitively
        return NEXT

    return test


def _whole_value_test(name: str) -> ValueTest:
    """`{name}` alone: it captures any non-empty text (the regex is `(?s).+`)."""

    def test(value: JSON, context: dict[str, str]) -> int:
        text = value if value.__class__ is str else as_text(value)
        if not text:
            return NEXT
        seen = context.get(name)
        if seen is None:
            context[name] = text
            return PASS
        return PASS if seen == text else NEXT

    return test


def _template_test(check: Check) -> ValueTest:
    decode, check_type, declared = check.decode, check.check_type, check.declared
    # The matcher is built when the first value reaches it, not here: of a catalog of
    # 10,000 definitions with their own key templates most never see a message, and
    # compiling them all was most of the start-up.
    match_fn: Callable[[str], dict[str, str] | None] | None = None

    def test(value: JSON, context: dict[str, str]) -> int:
        nonlocal match_fn
        if check_type:
            plain = unquote(value) if decode and value.__class__ is str else value
            if not conforms(plain, declared):
                return NEXT
        text = value if isinstance(value, str) else as_text(value)
        if match_fn is None:
            match_fn = check.matcher()
        captures = match_fn(text)
        if captures is None:
            return NEXT
        if decode:
            captures = {k: unquote(v) for k, v in captures.items()}
        return _merge(context, captures)

    return test


def _presence_test(check: Check) -> ValueTest:
    decode, check_type, declared = check.decode, check.check_type, check.declared

    def test(value: JSON, context: dict[str, str]) -> int:
        plain = unquote(value) if decode and value.__class__ is str else value
        if check_type and not conforms(plain, declared):
            return NEXT
        return PASS

    return test


def check_test(check: Check, made: Made | None = None) -> CheckTest:
    """`Check.apply(check.reader(record), context) is None`, specialised for where the
    check reads (one scalar field, the entries of a {name, value} list, else its reader).

    With `made`, checks with the same constraint share one test (see `Made`)."""
    key = None if made is None else _check_key(check)
    if made is None or key is None:
        return _check_test(check)
    found = made.get(key)
    if found is None:
        found = made[key] = _check_test(check)
    return cast(CheckTest, found)


def _check_key(check: Check) -> Hashable | None:
    """Everything `_check_test` builds a test from, or None when a constant is not
    hashable (an object or array: such a check gets a test of its own)."""
    constant: Hashable = None
    if check.has_constant:
        try:
            hash(check.constant)
        except TypeError:
            return None
        # The type too: True, 1 and 1.0 are equal keys but different constants.
        constant = (type(check.constant), check.constant)
    return ("check", check.access, check.decode, check.check_type, check.declared,
            check.required, check.has_constant, constant, check.template, check.attribute)


def _check_test(check: Check) -> CheckTest:
    per_value = value_test(check)
    # No value at all passes only a check that neither requires nor constrains one.
    absent_ok = not (check.required or check.has_constant or check.template is not None)
    access = check.access
    template = check.template
    if (access is not None and template is not None and template.whole_value
            and not check.decode and not check.check_type):
        # The commonest capture (`{name}` of a header or a key): one function, no
        # per-value call.
        if access.kind == "scalar":
            return _scalar_capture(access.field, template.names[0])
        if access.kind == "pairs" and access.name is not None:
            return _pairs_capture(access.field, access.name, access.case_insensitive,
                                  template.names[0])
    if (access is not None and access.kind == "scalar" and template is not None
            and not check.decode and not check.check_type):
        return _scalar_template(access.field, check, absent_ok)
    if access is not None and access.kind == "scalar":
        field = access.field
        in_head = field not in ENTRY_FIELDS

        def scalar(record: NativeMessage, context: dict[str, str]) -> bool:
            fields = record.head if in_head else record.fields
            if field not in fields:
                return absent_ok
            return per_value(fields[field], context) == PASS

        return scalar
    if access is not None and access.kind == "pairs" and access.name is not None:
        return _pairs_test(access.field, access.name, access.case_insensitive, per_value,
                           absent_ok)
    reader = check.reader
    assert reader is not None

    def general(record: NativeMessage, context: dict[str, str]) -> bool:
        values = reader(record)
        if not values:
            return absent_ok
        return any(per_value(value, context) == PASS for value in values)

    return general


def _scalar_capture(field: str, name: str) -> CheckTest:
    """`check_test` of `{name}` on a scalar field (`_whole_value_test` of its value)."""
    in_head = field not in ENTRY_FIELDS  # read where no entries are made for it

    def test(record: NativeMessage, context: dict[str, str]) -> bool:
        fields = record.head if in_head else record.fields
        if field not in fields:
            return False
        value = fields[field]
        text = value if value.__class__ is str else as_text(value)
        if not text:
            return False
        seen = context.get(name)
        if seen is None:
            context[name] = text
            return True
        return seen == text

    return test


def _scalar_template(field: str, check: Check, absent_ok: bool) -> CheckTest:
    """`check_test` of a template on a scalar field (`_template_test` of its value) in
    one function (a Kafka key with its captures, say, checked for every message), without
    a call per value."""
    match_fn: Callable[[str], dict[str, str] | None] | None = None
    in_head = field not in ENTRY_FIELDS  # read where no entries are made for it

    def test(record: NativeMessage, context: dict[str, str]) -> bool:
        nonlocal match_fn
        fields = record.head if in_head else record.fields
        if field not in fields:
            return absent_ok
        value = fields[field]
        text = value if isinstance(value, str) else as_text(value)
        if match_fn is None:  # built when first needed, as `_template_test` does
            match_fn = check.matcher()
        captures = match_fn(text)
        return captures is not None and _merge(context, captures) == PASS

    return test


def _pairs_capture(field: str, entry_name: str, case_insensitive: bool, name: str
                   ) -> CheckTest:
    """`check_test` of `{name}` on the entries called `entry_name` (`_pairs_test` with
    `_whole_value_test`)."""
    wanted = entry_name.lower() if case_insensitive else entry_name

    def test(record: NativeMessage, context: dict[str, str]) -> bool:
        raw = record.fields.get(field)
        if not isinstance(raw, list):
            return False
        for entry in raw:
            if not isinstance(entry, dict):
                continue
            key = entry.get("name")
            if not isinstance(key, str) or (key.lower() if case_insensitive else key) != wanted:
                continue
            value = entry.get("value")
            text = value if value.__class__ is str else as_text(value)
            if not text:
                continue  # `.+` needs a character: the next entry may have one
            seen = context.get(name)
            if seen is None:
                context[name] = text
                return True
            if seen == text:
                return True
            # another entry of that name may carry the captured value
        return False

    return test


def _pairs_test(field: str, name: str, case_insensitive: bool, per_value: ValueTest,
                absent_ok: bool) -> CheckTest:
    """The values of the entries called `name`, in order (`values._pairs_reader`), tried
    as they are found instead of collected first."""
    wanted = name.lower() if case_insensitive else name

    def test(record: NativeMessage, context: dict[str, str]) -> bool:
        raw = record.fields.get(field)
        if not isinstance(raw, list):
            return absent_ok
        seen_one = False
        for entry in raw:
            if not isinstance(entry, dict):
                continue
            key = entry.get("name")
            if not isinstance(key, str) or (key.lower() if case_insensitive else key) != wanted:
                continue
            seen_one = True
            if per_value(entry.get("value"), context) == PASS:
                return True
        return absent_ok if not seen_one else False

    return test


def definition_test(compiled: CompiledDefinition, made: Made | None = None) -> NativeTest:
    """`compiled.evaluate(record, None)` as the matcher calls it, minus the Failure: the
    address captures read by segment position when the index found the definition by
    its shape (the literal segments already compared), then every other check in
    declaration order (not the address check of a definition the index found by its
    constant address, nor the constants a split bucket found it by: those hold)."""
    positions = compiled.address_captures
    skip = (compiled.address_check if positions is not None or compiled.address_exact
            else None)
    known = compiled.narrowed_checks
    checks = compiled.protocol_checks
    # Two or more captures from repeated fields: their entries are searched together
    # (`compiled.search`); one alone takes any agreeing entry in its own test.
    searched = checks[len(checks) - compiled.repeated:] if compiled.repeated > 1 else []
    kept = [c for c in checks if c is not skip and c not in known and c not in searched]
    tests = tuple(check_test(c, made) for c in kept)
    if searched:
        tests += (_search_test(tuple(searched)),)
    decode = skip is not None and skip.decode
    if positions is None and kept and _opens(kept[0]):
        # The usual Kafka or MQTT definition: a template on the key or topic captures
        # first, into an empty context: its captures are the context (`_opened`).
        first = kept[0]
        assert first.access is not None
        return _opened(first.access.field, first, tests[1:], made)
    if made is None:
        return _definition_test(positions, decode, tests)
    key = ("definition", positions, decode, tests)
    test = made.get(key)
    if test is None:
        test = made[key] = _definition_test(positions, decode, tests)
    return cast(NativeTest, test)


def _opens(check: Check) -> bool:
    """`check` is one `_check_test` makes a `_scalar_template` of."""
    access, template = check.access, check.template
    return (access is not None and access.kind == "scalar" and template is not None
            and not template.whole_value and not check.decode and not check.check_type)


_ABSENT = object()


def _opened(field: str, check: Check, rest: tuple[CheckTest, ...],
            made: Made | None) -> NativeTest:
    """The definition test whose first check is a template on a scalar field: what
    `checks_only` does with `_scalar_template` first, with two calls and the context
    dict fewer. Into an empty context, `_merge` takes the captures as they are, so the
    template's captures (a new dict each time) are the context the other checks add to."""
    key = ("opened", _check_key(check), rest)
    if made is not None and (found := made.get(key)) is not None:
        return cast(NativeTest, found)
    match_fn: Callable[[str], dict[str, str] | None] | None = None
    in_head = field not in ENTRY_FIELDS  # read where no entries are made for it

    def opened(record: NativeMessage, segments: list[str] | None) -> dict[str, str] | None:
        nonlocal match_fn
        value = (record.head if in_head else record.fields).get(field, _ABSENT)
        if value is _ABSENT:
            return None  # a template requires a value
        if match_fn is None:  # built when first needed, as `_scalar_template` does
            match_fn = check.matcher()
        context = match_fn(value if isinstance(value, str) else as_text(value))
        if context is None or not rest:
            return context
        for test in rest:
            if not test(record, context):
                return None
        return context

    if made is not None and key[1] is not None:
        made[key] = opened
    return opened


def _search_test(checks: tuple[Check, ...]) -> CheckTest:
    def test(record: NativeMessage, context: dict[str, str]) -> bool:
        found = search([(c, c.reader(record) if c.reader else []) for c in checks],
                       dict(context))
        if isinstance(found, Failure):
            return False
        context.update(found)
        return True

    return test


def _definition_test(positions: tuple[tuple[str, int], ...] | None, decode: bool,
                     tests: tuple[CheckTest, ...]) -> NativeTest:
    if positions is None:
        def checks_only(record: NativeMessage, segments: list[str] | None
                        ) -> dict[str, str] | None:
            context: dict[str, str] = {}
            for test in tests:
                if not test(record, context):
                    return None
            return context

        return checks_only
    if len(positions) == 1 and not decode:
        (name, index), = positions

        def one_capture(record: NativeMessage, segments: list[str] | None
                        ) -> dict[str, str] | None:
            assert segments is not None
            value = segments[index]
            if not value:
                return None  # a placeholder captures a non-empty run
            context = {name: value}
            for test in tests:
                if not test(record, context):
                    return None
            return context

        return one_capture

    def captures(record: NativeMessage, segments: list[str] | None) -> dict[str, str] | None:
        assert segments is not None
        context: dict[str, str] = {}
        for name, index in positions:
            value = segments[index]
            if not value:
                return None
            if decode:
                value = unquote(value)
            if context.setdefault(name, value) != value:
                return None  # same name, same value
        for test in tests:
            if not test(record, context):
                return None
        return context

    return captures
