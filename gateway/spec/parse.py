"""Spec-driven parsing: a raw YAML value plus a `Field` -> a checked plain value + problems.

Every problem is collected; a bad value becomes `INVALID` and parsing goes on, so one run
shows the operator everything. Output values are plain Python (dicts, lists, str, int,
float seconds for durations, `Secret` for secret strings) with defaults filled in.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from gateway.spec.durations import (
    DURATION_FIX,
    MILLIS_FIX,
    SECONDS_FIX,
    parse_duration,
    unit_fix,
)
from gateway.spec.fields import OPTIONAL, REQUIRED, Field, _Marker
from gateway.spec.problems import Problems, json_path, suggest
from gateway.spec.secret import Secret

INVALID = _Marker("INVALID")
Parts = tuple[str | int, ...]


@dataclass
class Context:
    file: str
    problems: Problems
    # Paths whose string came from `${VAR}` substitution: there `"256"` may stand for an
    # int, since an environment variable cannot carry a type.
    substituted: set[str] = field(default_factory=set)
    # Paths whose string still holds a `${NAME}` nobody read (`xrgw validate --no-env`):
    # the value it stands for is unknown, so its type and value checks are not made.
    unresolved: set[str] = field(default_factory=set)

    def holds_unresolved(self, parts: Parts) -> bool:
        return holds_unresolved(self.unresolved, json_path(*parts))

    def error(self, parts: Parts, message: str, fix: str) -> None:
        self.problems.error(self.file, json_path(*parts), message, fix)

    def warning(self, parts: Parts, message: str, fix: str) -> None:
        self.problems.warning(self.file, json_path(*parts), message, fix)


def holds_unresolved(unresolved: set[str], path: str) -> bool:
    """Whether the value at `path`, or one below it, holds an unread `${NAME}`."""
    return bool(unresolved) and any(u == path or u.startswith((f"{path}.", f"{path}["))
                                    for u in unresolved)


def parse(spec: Field, value: object, parts: Parts, ctx: Context) -> object:
    result = _parse_kind(spec, value, parts, ctx)
    if result is not INVALID and spec.check is not None and not ctx.holds_unresolved(parts):
        issue = spec.check(result)
        if issue is not None:
            ctx.error(parts, *issue)
            return INVALID
    return result


def _parse_kind(spec: Field, value: object, parts: Parts, ctx: Context) -> object:
    kind = spec.kind
    path = json_path(*parts)
    from_env = path in ctx.substituted
    if path in ctx.unresolved and isinstance(value, str) and kind in _TYPED_SCALARS:
        return _stand_in(spec)
    if kind == "any":
        return value
    if kind == "str" and isinstance(value, str):
        return Secret(value) if spec.secret else value
    if kind == "int":
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if from_env and isinstance(value, str) and value.strip().lstrip("-").isdigit():
            return int(value)
    if kind == "bool":
        if isinstance(value, bool):
            return value
        if from_env and isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
    if kind == "duration" and isinstance(value, str):
        seconds = parse_duration(value)
        if seconds is None:
            ctx.error(parts, f"'{value}' is not a duration", DURATION_FIX)
            return INVALID
        return seconds
    if kind == "seconds":
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
            return float(value)
        if isinstance(value, str) and (seconds := parse_duration(value)) is not None:
            return seconds
        if from_env and isinstance(value, str) and _number(value) is not None:
            return _number(value)
    if kind == "millis":
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
        if isinstance(value, str) and (seconds := parse_duration(value)) is not None:
            return round(seconds * 1000)
        if from_env and isinstance(value, str) and value.strip().isdigit():
            return int(value)
    if kind == "enum" and isinstance(value, str):
        if value in spec.choices:
            return value
        close = suggest(value, spec.choices)
        hint = f"did you mean '{close}'? " if close else ""
        ctx.error(parts, f"'{value}' is not one of {', '.join(spec.choices)}",
                  f"{hint}write one of: {', '.join(spec.choices)}")
        return INVALID
    if kind == "list" and isinstance(value, list):
        return _parse_list(spec, value, parts, ctx)
    if kind == "map" and isinstance(value, dict):
        return _parse_map(spec, value, parts, ctx)
    if kind == "object" and isinstance(value, dict):
        return _parse_object(spec, value, parts, ctx)
    if kind == "union":
        for variant in spec.variants:
            if _fits(variant, value):
                return parse(variant, value, parts, ctx)
    ctx.error(parts, f"expected {spec.type_name()}, got {_describe(spec, value)}",
              unit_fix(value) if kind == "duration" else _type_fix(spec, parts))
    return INVALID


def _parse_list(spec: Field, value: list[object], parts: Parts, ctx: Context) -> object:
    assert spec.item is not None
    if spec.non_empty and not value:
        ctx.error(parts, f"'{spec.name}' is empty", _type_fix(spec, parts))
        return INVALID
    items = [parse(spec.item, item, (*parts, i), ctx) for i, item in enumerate(value)]
    return INVALID if INVALID in items else items


def _parse_map(spec: Field, value: dict[object, object], parts: Parts, ctx: Context) -> object:
    assert spec.item is not None
    out = {str(k): parse(spec.item, v, (*parts, str(k)), ctx) for k, v in value.items()}
    return INVALID if INVALID in out.values() else out


def _parse_object(spec: Field, value: dict[object, object], parts: Parts, ctx: Context) -> object:
    names = [f.name for f in spec.fields]
    for key in value:
        if str(key) not in names:
            close = suggest(str(key), names)
            fix = f"did you mean '{close}'?" if close else f"known keys: {', '.join(names)}"
            # An error, not a warning: a misspelt `pasword` would otherwise run without a
            # password (the Helm values schema refuses the same key).
            ctx.error((*parts, str(key)), f"unknown key '{key}'", fix)
    out: dict[str, object] = {}
    for member in spec.fields:
        if member.name in value:
            out[member.name] = parse(member, value[member.name], (*parts, member.name), ctx)
        elif member.default is REQUIRED:
            ctx.error((*parts, member.name), f"'{member.name}' is required",
                      member.hint or f"add {member.name}: {_example(member)}")
            out[member.name] = INVALID
        elif member.default is OPTIONAL:
            out[member.name] = None
        elif member.kind == "object":
            # Absent sections get their members' defaults, so consumers never test for None.
            out[member.name] = parse(member, {}, (*parts, member.name), ctx)
        else:
            out[member.name] = member.default
    return INVALID if INVALID in out.values() else out


#: Kinds an environment variable's text can stand for (`"256"` an int, `"30s"` a duration).
_TYPED_SCALARS = ("int", "bool", "duration", "seconds", "millis", "enum")


def _number(text: str) -> float | None:
    try:
        number = float(text)
    except ValueError:
        return None
    return number if number >= 0 else None


def _stand_in(spec: Field) -> object:
    """A value of `spec`'s type for an unread `${NAME}`: its default, else its example.
    It stands in only so the later stages (references, endpoints) can run; nothing is
    run with a config loaded without its environment."""
    if not isinstance(spec.default, _Marker):
        return spec.default
    if spec.example is not None:
        parsed = parse(spec, spec.example, (), Context("", Problems()))
        if parsed is not INVALID:
            return parsed
    return None


def _fits(spec: Field, value: object) -> bool:
    if spec.kind == "object":
        return isinstance(value, dict)
    if spec.kind in ("str", "enum"):
        return isinstance(value, str)
    if spec.kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if spec.kind == "list":
        return isinstance(value, list)
    if spec.kind == "map":
        return isinstance(value, dict)
    return False


def _describe(spec: Field, value: object) -> str:
    kind = {dict: "a mapping", list: "a list", str: "a string", bool: "true/false",
            int: "an integer", float: "a number", type(None): "nothing (null)"}.get(
        type(value), type(value).__name__)
    if spec.secret or isinstance(value, (dict, list)) or value is None:
        return kind
    return f"{kind} ({json.dumps(value, default=str)[:60]})"


def _example(spec: Field) -> str:
    return json.dumps(spec.example, default=str) if spec.example is not None else "..."


def _type_fix(spec: Field, parts: Parts) -> str:
    name = parts[-1] if parts and isinstance(parts[-1], str) else spec.name
    if spec.kind == "duration":
        return DURATION_FIX
    if spec.kind == "seconds":
        return SECONDS_FIX
    if spec.kind == "millis":
        return MILLIS_FIX
    if spec.example is None:
        return f"write {spec.type_name()}"
    return f"write {spec.type_name()}, e.g. {name}: {_example(spec)}"
