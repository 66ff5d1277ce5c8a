"""Endpoint option specs: what each adapter declares about the options it reads.

One `OptionSpec` per adapter, built on the config spec vocabulary (`Field`), drives:
- parsing and validation of `endpoints.<id>.options` and of the xRegistry endpoint's
  `protocoloptions` at load time (`xrgw validate` refuses what the adapter would refuse),
  with did-you-mean for unknown names;
- the mapping of xRegistry spellings and older aliases to one canonical name (names
  compare ignoring case, `-` and `_`, as the definitions reader does);
- the report of xRegistry options an adapter does not implement (`Unsupported`): named,
  with the reason, never silently dropped;
- the adapter's own reading of its options (`OptionSpec.read`), with the same defaults;
- the generated per-protocol reference in docs/configuration.md.

The core owns the vocabulary; each adapter module owns its spec, and the core reaches the
specs through the adapter factory (entry point), never by importing an adapter.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from gateway.spec.fields import OPTIONAL, REQUIRED, Check, Field
from gateway.spec.parse import INVALID, Context, parse
from gateway.spec.problems import Problems, suggest
from gateway.spec.secret import Secret

__all__ = ["COMMON_OPTIONS", "OPTIONAL", "REQUIRED", "Check", "Field", "Option", "OptionSpec",
           "Unsupported", "count", "extend", "int_range", "milliseconds", "one_or_many",
           "reference_markdown", "seconds", "squash"]

V = TypeVar("V")

Side = Literal["consumer", "producer", "both"]
Source = Literal["definitions", "config"]

#: Options every endpoint has, read by the core itself (addresses, hints, template flag).
COMMON_OPTIONS = ("endpoints", "authorization", "deployed")


def squash(name: str) -> str:
    """The comparison form of an option name: case, `-` and `_` do not count."""
    return name.lower().replace("-", "").replace("_", "")


@dataclass(frozen=True)
class Option:
    """One option an adapter implements.

    `field.name` is the canonical name (the xRegistry spelling when the spec has the
    option, else the adapter's own); `aliases` are other accepted names; `xregistry` says
    the option comes from the xRegistry endpoint spec (so a document may carry it).
    `derived` options are set by the adapter factory (e.g. the MQTT version from the
    endpoint's protocol) and refused when an operator writes them.
    """

    field: Field
    side: Side = "both"
    xregistry: bool = False
    aliases: tuple[str, ...] = ()
    derived: bool = False

    @property
    def name(self) -> str:
        return self.field.name

    def names(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)


@dataclass(frozen=True)
class Unsupported:
    """An xRegistry endpoint option the adapter does not implement, and why; or, with
    `xregistry=False`, an option of xrgw's own that was removed (the reason says what
    replaces it), so that an old config gets that answer instead of "unknown option"."""

    name: str
    reason: str
    side: Side = "both"
    xregistry: bool = True


Resolved = Option | Unsupported


# -- builders the adapters' specs share ----------------------------------------------------


def int_range(low: int, high: int | None = None, example: int = 64) -> Check:
    """A check that an integer lies in low..high (no upper bound when high is None)."""
    def check(value: object) -> tuple[str, str] | None:
        if isinstance(value, int) and (value < low or (high is not None and value > high)):
            bounds = f"at least {low}" if high is None else f"{low}..{high}"
            return f"must be {bounds}, not {value}", f"write a number such as {example}"
        return None
    return check


def seconds(name: str, default: float, description: str, side: Side = "both") -> Option:
    """A time option: a number of seconds or a duration (`30s`)."""
    return Option(Field(name, "seconds", description, default=float(default)), side=side)


def milliseconds(name: str, default: int, description: str, side: Side = "both",
                 low: int = 1) -> Option:
    """A Kafka-style `*_ms` option: a whole number of milliseconds, as the spec and
    Kafka write it, or a duration with a unit (`10s`) like every other time value."""
    return Option(Field(name, "millis", description, default=default,
                        check=int_range(low, example=max(default, low))), side=side)


def count(name: str, default: int, description: str, side: Side = "consumer",
          high: int | None = None) -> Option:
    """A positive integer option (a window, a limit, a size)."""
    return Option(Field(name, "int", description, default=default,
                        check=int_range(1, high, min(default, 64))), side=side)


def one_or_many(name: str, description: str, item: str, example: object = None) -> Field:
    """A string or a list of strings (topic filters, subjects, paths)."""
    return Field(name, "union", description, example=example,
                 variants=(Field(name, "str", f"one {item}"),
                           Field(name, "list", f"{item}s", item=Field(item, "str", item))))


@dataclass(frozen=True)
class OptionSpec:
    """The options of one adapter (one protocol family)."""

    protocol: str  # how messages name the family: "MQTT", "KAFKA", ...
    options: tuple[Option, ...]
    unsupported: tuple[Unsupported, ...] = ()

    def __post_init__(self) -> None:
        seen: dict[str, str] = {}
        for entry in self._entries():
            for name in entry[0]:
                key = squash(name)
                if key in seen:
                    raise ValueError(f"{self.protocol}: option name {name!r} is declared twice "
                                     f"({seen[key]!r})")
                seen[key] = name

    def _entries(self) -> Iterator[tuple[tuple[str, ...], Resolved]]:
        for option in self.options:
            yield option.names(), option
        for gap in self.unsupported:
            yield (gap.name,), gap

    def lookup(self, name: str) -> Resolved | None:
        key = squash(name)
        for names, entry in self._entries():
            if any(squash(n) == key for n in names):
                return entry
        return None

    def option(self, name: str) -> Option:
        entry = self.lookup(name)
        if not isinstance(entry, Option):
            raise KeyError(name)
        return entry

    def canonical(self, raw: Mapping[str, object]) -> dict[str, object]:
        """`raw` with every known alias renamed to its canonical name (values unchecked;
        unknown names kept as they are, for `read` or `validate` to report)."""
        out: dict[str, object] = {}
        for key, value in raw.items():
            entry = self.lookup(str(key))
            out.setdefault(entry.name if isinstance(entry, Option) else str(key), value)
        return out

    def public_names(self) -> list[str]:
        return [o.name for o in self.options if not o.derived]

    def validate(self, raw: Mapping[str, object], source: Source, file: str,
                 where: tuple[str | int, ...], problems: Problems,
                 allow_derived: bool = False) -> dict[str, object]:
        """Canonical names -> checked values for the options in `raw` (no defaults).

        An unknown name or an unsupported xRegistry option is a warning when it comes from
        the definitions (documents are shared with other tools) and an error when the
        operator wrote it in the gateway config. Bad values are errors either way.
        """
        ctx = Context(file, problems)
        out: dict[str, object] = {}
        for key, value in raw.items():
            name = str(key)
            at = (*where, name)
            entry = self.lookup(name)
            if entry is None:
                if squash(name) in {squash(n) for n in COMMON_OPTIONS}:
                    continue
                self._unknown(name, source, ctx, at)
                continue
            if isinstance(entry, Unsupported):
                report = ctx.error if source == "config" else ctx.warning
                what = (f"an xRegistry {self.protocol} endpoint option that xrgw does not "
                        "support" if entry.xregistry else
                        f"no longer a {self.protocol} endpoint option")
                report(at, f"'{name}' is {what}: {entry.reason}; it is ignored",
                       f"remove '{name}'" + ("" if source == "config" else
                                             " or accept that it has no effect"))
                continue
            if entry.derived and not allow_derived:
                ctx.error(at, f"'{name}' is set by xrgw itself: {entry.field.description}",
                          f"remove '{name}'")
                continue
            if entry.name in out:
                ctx.warning(at, f"'{name}' repeats option '{entry.name}'; the first is used",
                            f"keep one of '{entry.name}' and '{name}'")
                continue
            parsed = parse(entry.field, value, at, ctx)
            if parsed is not INVALID:
                out[entry.name] = parsed
        return out

    def _unknown(self, name: str, source: Source, ctx: Context,
                 at: tuple[str | int, ...]) -> None:
        known = self.public_names()
        close = suggest(name, known)
        fix = f"did you mean '{close}'?" if close else f"known: {', '.join(known)}"
        if source == "config":
            ctx.error(at, f"'{name}' is not a {self.protocol} endpoint option", fix)
        else:
            ctx.warning(at, f"'{name}' is not a {self.protocol} endpoint option xrgw knows; "
                        "it is ignored", fix)

    def read(self, raw: Mapping[str, object]) -> dict[str, object]:
        """The adapter's view: every option by canonical name, defaults filled in.

        Raises ValueError naming the first bad option (adapters built directly, e.g. by
        tests, get the same checks as a loaded config)."""
        problems = Problems()
        values = self.validate(raw, "config", "<options>", (), problems, allow_derived=True)
        if problems.errors:
            first = problems.errors[0]
            name = first.path.removeprefix("$.").strip('[]"')
            raise ValueError(f"{name}: {first.message}")
        for option in self.options:
            if option.name not in values:
                default = option.field.default
                if default is REQUIRED:
                    continue
                values[option.name] = None if default is OPTIONAL else default
        return values


    def typed(self, view: type[V]) -> type[V]:
        """Class decorator for a dataclass that is this spec's typed view: one field per
        option, named as the option (`-` written `_`), typed as the option parses. Checked
        here, at import, so that the view and the spec cannot drift apart; read it with
        `read_into`."""
        problems = view_problems(self, view)
        if problems:
            raise TypeError(f"{view.__name__} is not a view of the {self.protocol} options: "
                            + "; ".join(problems))
        return view

    def read_into(self, view: type[V], raw: Mapping[str, object]) -> V:
        """`read(raw)` as an instance of the typed view `view` (see `typed`); raises
        ValueError naming the first bad or missing option."""
        values = self.read(raw)
        missing = [o.name for o in self.options if o.name not in values]
        if missing:
            raise ValueError(f"{missing[0]}: required")
        return view(**{attribute_name(name): value for name, value in values.items()})


def reference_markdown(specs: Mapping[str, OptionSpec]) -> str:
    """The per-protocol sections of the configuration reference."""
    lines = [
        "## Endpoint options per protocol",
        "",
        "Generated from each adapter's option spec. They are accepted in the xRegistry "
        "endpoint's `protocoloptions` and in `endpoints.<id>.options` (override wins); names "
        "compare ignoring case, `-` and `_`. An unknown name in the gateway config is an "
        "error, in a definitions document a warning. xRegistry options that xrgw does not "
        "implement are listed last with the reason; they are reported, never silently "
        "ignored.",
    ]
    for protocol, spec in specs.items():
        lines += ["", f"### {protocol}", "",
                  "| Option | Type | Default | Side | Description |", "|---|---|---|---|---|"]
        for option in spec.options:
            if option.derived:
                continue
            names = f"`{option.name}`" + "".join(f", `{a}`" for a in option.aliases)
            origin = " (xRegistry)" if option.xregistry else ""
            lines.append(f"| {names}{origin} | {_cell(option.field.type_name())} | "
                         f"{_default(option.field)} | {option.side} | "
                         f"{_cell(option.field.description)} |")
        gaps = [gap for gap in spec.unsupported if gap.xregistry]
        if gaps:
            lines += ["", f"Not supported ({protocol}):", ""]
            lines += [f"- `{gap.name}`: {gap.reason}" for gap in gaps]
        removed = [gap for gap in spec.unsupported if not gap.xregistry]
        if removed:
            lines += ["", f"Removed ({protocol}):", ""]
            lines += [f"- `{gap.name}`: {gap.reason}" for gap in removed]
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _default(field: Field) -> str:
    if field.default is REQUIRED:
        return "**required**"
    if field.default is OPTIONAL:
        return ""
    return _cell(f"`{json.dumps(field.default)}`")


W = TypeVar("W")


def extend(settings: type[W], values: object, **derived: Any) -> W:
    """An adapter's settings (`settings`: a subclass of a typed view that adds what the
    adapter derives: addresses, TLS contexts, normalised forms) from the options as read
    (`values`, an instance of that view) and the `derived` fields, which may also replace
    a read value (e.g. a flag another option implies). The options are named once, in the
    typed view."""
    return settings(**{**vars(values), **derived})


def attribute_name(option: str) -> str:
    """The view attribute of an option (`terminus-durability` -> `terminus_durability`)."""
    return option.replace("-", "_")


#: What each kind parses to (`gateway/spec/parse.py`).
_PARSED: dict[str, tuple[type, ...]] = {
    "str": (str,), "enum": (str,), "int": (int,), "millis": (int,), "bool": (bool,),
    "duration": (float,), "seconds": (float,), "list": (list,), "map": (dict,),
    "object": (dict,),
}


def _parsed_types(field: Field) -> set[type] | None:
    """The Python types a field's value can have after parsing; None: any."""
    if field.kind == "union":
        out: set[type] = set()
        for variant in field.variants:
            found = _parsed_types(variant)
            if found is None:
                return None
            out |= found
        return out
    if field.kind == "any":
        return None
    parsed = set(_PARSED[field.kind])
    return {Secret} if field.secret and str in parsed else parsed


def _annotated_types(annotation: Any) -> set[type] | None:
    """The runtime classes an annotation admits; None: any."""
    if annotation is Any or annotation is object:
        return None
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        out: set[type] = set()
        for arg in typing.get_args(annotation):
            found = _annotated_types(arg)
            if found is None:
                return None
            out |= found
        return out
    if origin is Literal:
        return {type(arg) for arg in typing.get_args(annotation)}
    if annotation is None or annotation is type(None):
        return {type(None)}
    cls = origin if isinstance(origin, type) else annotation
    return {cls} if isinstance(cls, type) else None


def view_problems(spec: OptionSpec, view: type) -> list[str]:
    """How `view` fails to be the typed view of `spec`'s options (empty: it is one)."""
    if not dataclasses.is_dataclass(view):
        return ["not a dataclass"]
    hints = typing.get_type_hints(view)
    names = {f.name for f in dataclasses.fields(view)}
    wanted = {attribute_name(o.name): o for o in spec.options}
    problems = [f"no field for option {o.name!r}" for a, o in wanted.items() if a not in names]
    problems += [f"field {n!r} is no option" for n in sorted(names - set(wanted))]
    for attribute, option in wanted.items():
        if attribute not in names:
            continue
        parsed = _parsed_types(option.field)
        admitted = _annotated_types(hints[attribute])
        if parsed is None or admitted is None:
            continue
        default = option.field.default
        if default is OPTIONAL or default is None:
            parsed.add(type(None))
        if not parsed <= admitted:
            problems.append(f"{attribute}: typed {hints[attribute]}, the option parses to "
                            + " | ".join(sorted(c.__name__ for c in parsed)))
    return problems
