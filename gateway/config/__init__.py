"""The gateway configuration: one YAML file -> a checked, resolved `GatewayConfig`.

    load_config(path)        -> (GatewayConfig | None, [Problem, ...]); never raises on bad
                                input, the config is None when any problem is an error
    load_config_text(...)    the same from a string (tests, `xrgw validate -`)
    CONFIG_SPEC              the declarative spec of every key (drives parsing and docs)
    reference_markdown()     the generated reference page
    config_json_schema()     the generated JSON Schema of the file (`xrgw schema`)
    for_adapter(endpoint, messages)  what the adapter factory gets (`ports.AdapterEndpoint`)

Modules are private (`_name.py`); this door is the public surface.
"""

from __future__ import annotations

from gateway.config._adapter import for_adapter
from gateway.config._docs import reference_markdown
from gateway.config._jsonschema import config_json_schema, config_json_text, field_schema
from gateway.config._load import load_config, load_config_text
from gateway.config._model import (
    AdminConfig,
    DefinitionSource,
    EndpointConfig,
    GatewayConfig,
    LogConfig,
    RouteConfig,
    ShutdownConfig,
)
from gateway.config._routes import observe_refusal
from gateway.config._schema import CONFIG_SPEC, DEADLETTER_LOG
from gateway.spec.fields import Field
from gateway.spec.secret import Secret, redact_uri

__all__ = [
    "CONFIG_SPEC",
    "DEADLETTER_LOG",
    "AdminConfig",
    "DefinitionSource",
    "EndpointConfig",
    "Field",
    "GatewayConfig",
    "LogConfig",
    "RouteConfig",
    "Secret",
    "ShutdownConfig",
    "config_json_schema",
    "config_json_text",
    "field_schema",
    "for_adapter",
    "load_config",
    "load_config_text",
    "observe_refusal",
    "redact_uri",
    "reference_markdown",
]
