"""The vocabulary of a declarative config spec: a tree of `Field`s.

One spec drives parsing and validation (`parse.py`), the generated reference
(`gateway/config/_docs.py`) and the JSON Schema (`gateway/config/_jsonschema.py`: `xrgw
schema`, the Helm chart's values schema), so a key cannot be accepted without being
documented, nor documented differently from how it is read. The spec of the gateway config
itself is `gateway/config/_schema.py`; each adapter's option spec is built on it too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

Kind = Literal[
    "str",       # a string
    "int",       # an integer (not a bool)
    "bool",      # true / false
    "duration",  # `30s`, `500ms`, `2m` -> float seconds
    "seconds",   # a number of seconds (`10`, `0.5`) or a duration (`10s`) -> float seconds
    "millis",    # a whole number of milliseconds (`500`) or a duration (`10s`) -> int ms
    "enum",      # one of `choices`
    "list",      # a list of `item`
    "map",       # a mapping of string keys to `item` (free keys: ids, header names)
    "object",    # a mapping with the keys in `fields`; unknown keys are warned about
    "union",     # the first of `variants` whose kind fits the value's type
    "any",       # any JSON value, passed through (protocol options merged elsewhere)
]


class _Marker:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


REQUIRED = _Marker("REQUIRED")  # absent -> error
OPTIONAL = _Marker("OPTIONAL")  # absent -> None, no default

#: A value check: None when fine, else (what is wrong, how to fix it).
Check = Callable[[object], tuple[str, str] | None]


@dataclass(frozen=True)
class Field:
    name: str
    kind: Kind
    description: str
    default: object = OPTIONAL
    example: object = None
    choices: tuple[str, ...] = ()
    item: Field | None = None
    fields: tuple[Field, ...] = ()
    variants: tuple[Field, ...] = ()
    # Runs on the parsed value (for objects: the parsed dict, for cross-field rules).
    check: Check | None = None
    # JSON Schema keywords that say what `check` checks, for editors and the Helm chart
    # (`{"minimum": 1}` next to a positive-integer check); written next to the check so
    # the two are read, and changed, together.
    schema: Mapping[str, object] | None = None
    # Never echoed in problems; strings become `Secret`s.
    secret: bool = False
    # Lists: an empty list is an error (a route with no outputs routes nothing).
    non_empty: bool = False
    advanced: bool = False
    # The fix offered when a required field is missing; default: its example.
    hint: str = ""

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    def member(self, name: str) -> Field | None:
        for field in self.fields:
            if field.name == name:
                return field
        return None

    def type_name(self) -> str:
        """How the docs and type errors name what this field accepts."""
        if self.kind == "enum":
            return " | ".join(self.choices)
        if self.kind == "list" and self.item is not None:
            return f"list of {self.item.type_name()}"
        if self.kind == "map" and self.item is not None:
            return f"map of {self.item.type_name()}"
        if self.kind == "union":
            return " or ".join(v.type_name() for v in self.variants)
        if self.kind == "object":
            return "mapping"
        return {"str": "string", "int": "integer", "bool": "true/false",
                "seconds": "seconds or duration",
                "millis": "milliseconds or duration"}.get(self.kind, self.kind)
