"""Write the gateway-config parts of the Helm chart's values.schema.json from the config
spec, so the chart checks `config` exactly as the gateway reads it (`xrgw schema` prints
the same schema for the config file itself).

    python -m scripts.chart_values_schema           # rewrite helm/xrgw/values.schema.json
    python -m scripts.chart_values_schema --check   # exit 1 when it is out of date

Generated: `properties.config` (the config without `definitions` and `admin`, which the
chart writes) and `properties.definitions.properties.registries.items` (a registry
source). Everything else in the file is the chart's own values, written by hand.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path
from typing import Any

from gateway.config import CONFIG_SPEC, field_schema

ROOT = Path(__file__).resolve().parents[1]
VALUES_SCHEMA = ROOT / "helm" / "xrgw" / "values.schema.json"
#: Written by the chart from its own `definitions` and `admin` values.
CHART_OWNED = ("definitions", "admin")
CONFIG_DESCRIPTION = ("The gateway config without `definitions` and `admin` (the chart "
                      "writes them). Generated from the config spec by "
                      "scripts/chart_values_schema.py; reference: docs/configuration.md")


def registry_source_schema() -> dict[str, Any]:
    definitions = CONFIG_SPEC.member("definitions")
    assert definitions is not None and definitions.item is not None
    (registry,) = [v for v in definitions.item.variants if v.kind == "object"]
    return field_schema(registry)


def chart_config_schema() -> dict[str, Any]:
    node = field_schema(CONFIG_SPEC, omit=CHART_OWNED)
    node["description"] = CONFIG_DESCRIPTION
    return node


def generated(current: dict[str, Any]) -> dict[str, Any]:
    """`current` (the file's content) with its generated parts replaced."""
    out = copy.deepcopy(current)
    out["properties"]["config"] = chart_config_schema()
    registries = out["properties"]["definitions"]["properties"]["registries"]
    registries["items"] = registry_source_schema()
    return out


def render(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="only check; exit 1 when the file is out of date")
    args = parser.parse_args(argv)
    text = VALUES_SCHEMA.read_text(encoding="utf-8")
    expected = render(generated(json.loads(text)))
    if text == expected:
        return 0
    if args.check:
        print(f"{VALUES_SCHEMA.relative_to(ROOT)} is out of date: "
              "python -m scripts.chart_values_schema", file=sys.stderr)
        return 1
    VALUES_SCHEMA.write_text(expected, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
