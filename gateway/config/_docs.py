"""The configuration reference, generated from `CONFIG_SPEC` (one row per key).

Generated rather than written so the page cannot drift from what the parser accepts.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from gateway.config._schema import CONFIG_SPEC
from gateway.ports.adapter_options import option_spec
from gateway.ports.options import OptionSpec
from gateway.ports.options import reference_markdown as options_markdown
from gateway.protocols import PROTOCOLS
from gateway.spec.durations import format_duration
from gateway.spec.fields import OPTIONAL, REQUIRED, Field


def reference_markdown(spec: Field = CONFIG_SPEC) -> str:
    lines = [
        "# xrgw configuration reference",
        "",
        "Generated from `gateway/config/_schema.py`. Strings may use `${VAR}` and "
        "`${VAR:-default}`.",
        "",
        "Time values follow one convention: a duration with a unit (`500ms`, `30s`, "
        "`2m`, `1h`, `1m30s`) is accepted everywhere. A bare number is accepted only "
        "where the spec writes time values as numbers, and means what the spec means: "
        "endpoint options of type *seconds or duration* take seconds (`publish_timeout: "
        "10`), Kafka's `*_ms` options (*milliseconds or duration*) take milliseconds "
        "(`session_timeout_ms: 10000`, or `10s`). The gateway's own keys (type "
        "*duration*: `routes[].retry.*`, `shutdown.grace`, `definitions[].poll` ...) "
        "need the unit, so that `30` is never read as the wrong one.",
        "",
        "| Key | Type | Default | Description | Example |",
        "|---|---|---|---|---|",
    ]
    lines.extend(_rows(spec, ""))
    return "\n".join(lines) + "\n\n" + options_markdown(_adapter_specs())


def _adapter_specs() -> dict[str, OptionSpec]:
    """One spec per installed adapter, titled by the protocols it serves."""
    served: dict[int, tuple[list[str], OptionSpec]] = {}
    for protocol in PROTOCOLS:
        spec = option_spec(protocol)
        if spec is not None:
            served.setdefault(id(spec), ([], spec))[0].append(protocol)
    return {" and ".join(sorted(names)): spec for names, spec in served.values()}


def iter_fields(spec: Field, prefix: str = "") -> Iterator[tuple[str, Field]]:
    """Every documented key with its dotted name (`routes[].retry.attempts`)."""
    children: tuple[Field, ...] = spec.fields
    if spec.kind in ("list", "map") and spec.item is not None:
        suffix = "[]" if spec.kind == "list" else ".<id>"
        item = spec.item
        if item.kind == "object":
            yield from _members(item, prefix + suffix)
        elif item.kind == "union":
            for variant in item.variants:
                yield from _members(variant, prefix + suffix)
        return
    for child in children:
        yield from _members(child, prefix, is_child=True)


def _members(spec: Field, prefix: str, is_child: bool = False) -> Iterator[tuple[str, Field]]:
    if is_child:
        name = f"{prefix}.{spec.name}" if prefix else spec.name
        yield name, spec
        yield from iter_fields(spec, name)
    else:
        yield from iter_fields(spec, prefix)


def _rows(spec: Field, prefix: str) -> Iterator[str]:
    for name, field in iter_fields(spec, prefix):
        kind = field.type_name().replace("|", "\\|")
        yield (f"| `{name}` | {kind} | {_default(field)} | "
               f"{field.description}{' (advanced)' if field.advanced else ''} | "
               f"{_example(field)} |")


def _default(field: Field) -> str:
    if field.default is REQUIRED:
        return "**required**"
    if field.default is OPTIONAL or field.kind == "object":
        return ""
    if field.kind == "duration" and isinstance(field.default, float):
        return f"`{format_duration(field.default)}`"
    return f"`{json.dumps(field.default)}`"


def _example(field: Field) -> str:
    if field.example is None:
        return ""
    return f"`{json.dumps(field.example)}`".replace("|", "\\|")
