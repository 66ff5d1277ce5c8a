"""RFC 6570 level-1 templates used both ways: as match patterns and as render slots.

Interpretation (shared/spec/README.md): each `{name}` captures one non-empty run of
characters; when the template contains a `/` the run never spans a `/` (one path or topic
segment); otherwise a lone `{name}` captures the whole value. A name used twice must
capture the same value. Only level 1 is allowed: `{+x}`, `{#x}`, `{x*}`, `{x:3}`, `{a,b}`
are errors.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from urllib.parse import quote

from gateway.templates.match import linear_regex, template_matcher

_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
_NAME = re.compile(r"[A-Za-z0-9_]+\Z")  # \Z: `$` would let a trailing newline in
_OPERATORS = "+#./;?&=,!@|"


class TemplateError(ValueError):
    """A template that is not RFC 6570 level 1."""


@dataclass(frozen=True)
class Segment:
    literal: str | None = None
    name: str | None = None


@dataclass(frozen=True)
class Template:
    """A parsed level-1 template. Build with `Template.parse`."""

    text: str
    parts: tuple[Segment, ...]
    # What one placeholder never spans when the template contains it: `/` (a path or topic
    # segment), `.` for a NATS subject (one token).
    separator: str = "/"

    @classmethod
    def parse(cls, text: str, separator: str = "/") -> Template:
        parts: list[Segment] = []
        pos = 0
        for m in _PLACEHOLDER.finditer(text):
            literal = text[pos : m.start()]
            if "{" in literal or "}" in literal:
                raise TemplateError(f"unbalanced brace in template {text!r}")
            if literal:
                parts.append(Segment(literal=literal))
            inner = m.group(1)
            if not inner:
                raise TemplateError(f"empty placeholder '{{}}' in template {text!r}")
            if inner[0] in _OPERATORS or inner.endswith("*") or ":" in inner or "," in inner:
                raise TemplateError(
                    f"placeholder {{{inner}}} in {text!r} uses RFC 6570 level 2-4 syntax; "
                    "only level 1 ({name}) is allowed"
                )
            if not _NAME.match(inner):
                raise TemplateError(
                    f"placeholder name {inner!r} in {text!r} is not a symbol "
                    "(letters, digits, underscore)"
                )
            parts.append(Segment(name=inner))
            pos = m.end()
        tail = text[pos:]
        if "{" in tail or "}" in tail:
            raise TemplateError(f"unbalanced brace in template {text!r}")
        if tail:
            parts.append(Segment(literal=tail))
        return cls(text, tuple(parts), separator)

    # -- facts -------------------------------------------------------------------------------
    @cached_property
    def names(self) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for part in self.parts:
            if part.name is not None:
                seen.setdefault(part.name, None)
        return tuple(seen)

    @property
    def is_constant(self) -> bool:
        return not self.names

    @cached_property
    def literal_length(self) -> int:
        return sum(len(p.literal) for p in self.parts if p.literal is not None)

    @cached_property
    def literal_prefix(self) -> str:
        """The literal text before the first placeholder (the whole text if none)."""
        out = []
        for part in self.parts:
            if part.literal is None:
                break
            out.append(part.literal)
        return "".join(out)

    @property
    def segmented(self) -> bool:
        """`/`-segmented (what the matcher's shape index keys on)."""
        return "/" in self.text

    @property
    def whole_value(self) -> bool:
        """A lone placeholder with no separator around it captures the whole value."""
        return len(self.parts) == 1 and self.separator not in self.text

    @property
    def run(self) -> str:
        """What one placeholder's capture may hold, as a regex character class: anything
        but the separator when the template has one, else any character."""
        if self.separator in self.text:
            return f"[^{re.escape(self.separator)}]"
        return "."

    # -- matching ----------------------------------------------------------------------------
    @cached_property
    def regex_source(self) -> str | None:
        """An anchored regex (ending in `\\Z`, for `re.DOTALL`) with one named group per
        placeholder that runs in time linear in the value's length
        (`gateway.templates.match`); None when the template is matched by a search
        instead (a name repeated where no regex can be linear)."""
        if self.is_constant:
            return re.escape(self.text) + r"\Z"
        if self.whole_value:
            return f"(?P<{self.parts[0].name}>.+)\\Z"
        written = linear_regex(self)
        return None if written is None else written[0]

    @cached_property
    def regex(self) -> re.Pattern[str] | None:
        source = self.regex_source
        return None if source is None else re.compile(source, re.DOTALL)

    @cached_property
    def matcher(self) -> Callable[[str], dict[str, str] | None]:
        """`match` as one function, built on first use."""
        if self.is_constant:
            text = self.text
            return lambda value: {} if value == text else None
        if self.whole_value:
            name = self.parts[0].name or ""
            return lambda value: {name: value} if value else None
        return template_matcher(self)

    def match(self, value: str) -> dict[str, str] | None:
        """Captured values when `value` conforms to the template, else None.

        Time linear in `len(value)` whatever the template (`gateway.templates.match`)."""
        return self.matcher(value)

    # -- rendering ---------------------------------------------------------------------------
    def missing(self, context: Mapping[str, object]) -> list[str]:
        return [name for name in self.names if context.get(name) in (None, "")]

    @cached_property
    def format_string(self) -> str | None:
        """`str.format_map` form of the template, or None when a name would be read as a
        positional index (all digits)."""
        if any(name.isdigit() for name in self.names):
            return None
        return "".join(
            p.literal.replace("{", "{{").replace("}", "}}") if p.literal is not None
            else f"{{{p.name}}}"
            for p in self.parts
        )

    def expand_strings(self, context: Mapping[str, str]) -> str:
        """Fast `expand` for contexts of non-empty strings (captured values): one C call.

        Raises `KeyError` naming an unbound placeholder, like `expand`.
        """
        fmt = self.format_string
        if fmt is None:
            return self.expand(context)
        return fmt.format_map(context)

    def expand(self, context: Mapping[str, object], encode: bool = False) -> str:
        """Fill every placeholder; raises `KeyError` naming the first unbound one.

        Values are inserted verbatim by default (the gateway's templates are topics, paths
        and attribute values whose authors intend raw characters). `encode=True` applies
        RFC 6570 simple-string expansion (percent-encoding of reserved characters).
        """
        out: list[str] = []
        for part in self.parts:
            if part.literal is not None:
                out.append(part.literal)
                continue
            value = context.get(part.name or "")
            if value is None or value == "":
                raise KeyError(part.name)
            text = _to_text(value)
            out.append(quote(text, safe="-._~") if encode else text)
        return "".join(out)


def _to_text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def has_placeholders(value: object) -> bool:
    return isinstance(value, str) and "{" in value and _PLACEHOLDER.search(value) is not None


def wildcard_levels(template: Template, separator: str = "/") -> tuple[str | None, ...]:
    """The levels a broker matches one at a time (split on `separator`), a level that
    holds a placeholder as None -- also one that mixes literal text and a placeholder,
    since brokers match whole levels."""
    rendered = template.expand({n: "\0" for n in template.names})
    return tuple(None if "\0" in level else level for level in rendered.split(separator))


def to_wildcard_filter(template: Template, single: str, separator: str = "/") -> str:
    """A broker subscription filter: each placeholder becomes a one-level wildcard.

    MQTT uses `+` (separator `/`), NATS `*` (separator `.`). Adapters receive the levels
    (`gateway.ports.AddressTemplate`) and put in their own wildcard the same way.
    """
    return separator.join(single if level is None else level
                          for level in wildcard_levels(template, separator))
