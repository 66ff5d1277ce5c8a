"""The JSON Schema (draft-07) of the config file, generated from `CONFIG_SPEC`.

For editors (a YAML language server validates and completes `config.yaml` with it:
`xrgw schema > xrgw.schema.json`) and for the Helm chart, whose values schema holds the
same `config` (`scripts/chart_values_schema.py` writes it into values.schema.json).

It says what the YAML alone can tell, like the spec: keys, types, enums, defaults,
required keys, durations; unknown keys are refused, as the gateway refuses them. Rules
that need the definitions (endpoint ids, protocols, addresses) are `xrgw validate -c`'s.

`${VAR}` references are accepted wherever the gateway substitutes them before parsing, so
`inflight: ${INFLIGHT}` or `grace: ${GRACE:-30s}` do not show as errors.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from gateway.config._schema import CONFIG_SPEC
from gateway.json.values import JSON, JSONObject
from gateway.spec.durations import format_duration
from gateway.spec.fields import OPTIONAL, REQUIRED, Field

DRAFT_07 = "http://json-schema.org/draft-07/schema#"
#: A value holding a `${VAR}` reference: its type is known only after substitution.
ENV_REFERENCE: JSONObject = {"type": "string", "pattern": r"\$\{"}
DURATION_PATTERN = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$"
_DURATION_HELP = "A duration: 500ms, 30s, 2m, 1h, 1m30s."


def config_json_schema() -> JSONObject:
    """The whole document `xrgw schema` prints."""
    return {
        "$schema": DRAFT_07,
        "title": "xrgw gateway configuration",
        **field_schema(CONFIG_SPEC),
    }


def config_json_text() -> str:
    return json.dumps(config_json_schema(), indent=2, ensure_ascii=False) + "\n"


def field_schema(spec: Field, omit: Iterable[str] = ()) -> JSONObject:
    """The schema of one field (an object's members but `omit`)."""
    node = _kind_schema(spec, tuple(omit))
    if spec.schema:
        node.update({k: _json(v) for k, v in spec.schema.items()})
    if _may_be_substituted(spec):
        node = {"anyOf": [node, ENV_REFERENCE]}
    node["description"] = _description(spec)
    if spec.default not in (REQUIRED, OPTIONAL) and spec.kind not in ("object", "list", "map"):
        node["default"] = _default(spec)
    if spec.example is not None and spec.kind not in ("object", "union"):
        node["examples"] = [_json(spec.example)]
    return node


def _kind_schema(spec: Field, omit: tuple[str, ...]) -> JSONObject:
    kind = spec.kind
    if kind == "str":
        return {"type": "string"}
    if kind == "int":
        return {"type": "integer"}
    if kind == "bool":
        return {"type": "boolean"}
    if kind == "duration":
        return {"type": "string", "pattern": DURATION_PATTERN}
    if kind == "seconds":
        return {"anyOf": [{"type": "number", "minimum": 0},
                          {"type": "string", "pattern": DURATION_PATTERN}]}
    if kind == "millis":
        return {"anyOf": [{"type": "integer", "minimum": 0},
                          {"type": "string", "pattern": DURATION_PATTERN}]}
    if kind == "enum":
        return {"enum": list(spec.choices)}
    if kind == "list":
        assert spec.item is not None
        node: JSONObject = {"type": "array", "items": field_schema(spec.item)}
        if spec.non_empty:
            node["minItems"] = 1
        return node
    if kind == "map":
        assert spec.item is not None
        return {"type": "object", "additionalProperties": field_schema(spec.item)}
    if kind == "object":
        members = [f for f in spec.fields if f.name not in omit]
        node = {"type": "object", "additionalProperties": False,
                "properties": {f.name: field_schema(f) for f in members}}
        required: list[JSON] = [f.name for f in members if f.required]
        if required:
            node["required"] = required
        return node
    if kind == "union":
        return {"anyOf": [field_schema(v) for v in spec.variants]}
    assert kind == "any", kind
    return {}


def _may_be_substituted(spec: Field) -> bool:
    """Scalars the schema restricts beyond "a string": a `${VAR}` in their place is
    fine, it is replaced before the gateway reads the value."""
    if spec.kind in ("int", "bool", "enum", "duration", "seconds", "millis"):
        return True
    return spec.kind == "str" and bool(spec.schema) and "pattern" in (spec.schema or {})


def _description(spec: Field) -> str:
    text = spec.description
    if spec.kind == "duration":
        text = f"{text} {_DURATION_HELP}"
    elif spec.kind == "seconds":
        text = f"{text} Seconds (10, 0.5) or {_DURATION_HELP[2:]}"
    elif spec.kind == "millis":
        text = f"{text} Milliseconds (10000) or {_DURATION_HELP[2:]}"
    return f"{text} (advanced)" if spec.advanced else text


def _default(spec: Field) -> JSON:
    if spec.kind == "duration" and isinstance(spec.default, float):
        return format_duration(spec.default)
    return _json(spec.default)


def _json(value: object) -> JSON:
    """Spec values are plain Python literals; round-trip them to be sure they are JSON."""
    loaded: JSON = json.loads(json.dumps(value))
    return loaded
