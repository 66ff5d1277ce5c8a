"""The ops docs: the configuration reference is exactly what the config spec generates;
the operations page documents every metric, dead-letter reason and alert; links between
docs resolve; the chart README has the per-protocol scaling notes."""

from __future__ import annotations

import difflib
import re
from pathlib import Path

import pytest
import yaml

from gateway.config import reference_markdown
from gateway.deadletter import reasons
from gateway.observability.metrics import Metrics

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = ["architecture.md", "configuration.md", "deployment.md", "operations.md",
         "troubleshooting.md", "request-reply.md", "performance.md"]


def test_configuration_reference_is_generated_from_the_schema() -> None:
    expected = reference_markdown()
    actual = (DOCS / "configuration.md").read_text()
    diff = "\n".join(difflib.unified_diff(actual.splitlines(), expected.splitlines(),
                                          "docs/configuration.md", "reference_markdown()",
                                          lineterm=""))
    assert actual == expected, (
        "docs/configuration.md differs from the config schema; regenerate it with\n"
        "  .venv/bin/python -c 'from gateway.config import reference_markdown; "
        "print(reference_markdown(), end=\"\")' > docs/configuration.md\n" + diff)


@pytest.mark.parametrize("page", PAGES)
def test_page_exists(page: str) -> None:
    assert (DOCS / page).read_text().startswith("# ")


def _exposed_names() -> set[str]:
    names = set()
    for family in Metrics().registry.collect():
        names.add(family.name + ("_total" if family.type == "counter" else ""))
    return names


def test_operations_documents_every_metric_and_reason() -> None:
    text = (DOCS / "operations.md").read_text()
    for name in _exposed_names():
        assert f"`{name}" in text, f"metric {name} is not in docs/operations.md"
    for reason in reasons.ALL:
        assert f"`{reason}`" in text, f"dead-letter reason {reason} is not documented"
    for header in ("xrgw-reason", "xrgw-detail", "xrgw-explain", "xrgw-record"):
        assert header in text


def test_operations_documents_each_renamed_metric_with_its_new_name() -> None:
    text = (DOCS / "operations.md").read_text()
    renamed = text.split("### Renamed metrics", 1)[1].split("\n## ", 1)[0]
    for alias in Metrics().aliases:
        suffix = "_total" if alias.metric._type == "counter" else ""
        row = f"| `{alias.old_name}{suffix}` | `{alias.metric._name}{suffix}` |"
        assert row in renamed, row


def test_operations_documents_every_alert() -> None:
    template = (ROOT / "helm/xrgw/templates/prometheusrule.yaml").read_text()
    alerts = re.findall(r"- alert: (\w+)", template)
    assert alerts
    text = (DOCS / "operations.md").read_text()
    for alert in alerts:
        assert f"`{alert}`" in text, f"alert {alert} is not in docs/operations.md"


LINK = re.compile(r"\[[^\]]+\]\(([^)#\s]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize("page", [*(f"docs/{p}" for p in PAGES), "helm/xrgw/README.md",
                                  "README.md"])
def test_relative_links_resolve(page: str) -> None:
    path = ROOT / page
    for target in LINK.findall(path.read_text()):
        if "://" in target or target.startswith("mailto:"):
            continue
        assert (path.parent / target).exists(), f"{page}: broken link {target}"


def test_chart_readme_has_scaling_notes_per_protocol() -> None:
    text = (ROOT / "helm/xrgw/README.md").read_text()
    for phrase in ("consumer group", "shared subscription", "queue group", "JetStream",
                   "durable", "competing consumers", "at-most-once", "QoS 0",
                   "xrgw.sidecar.container", "xrgw.sidecar.volumes", "values.schema.json"):
        assert phrase in text, phrase


def test_chart_readme_documents_every_top_level_value() -> None:
    values = yaml.safe_load((ROOT / "helm/xrgw/values.yaml").read_text())
    text = (ROOT / "helm/xrgw/README.md").read_text()
    for key in values:
        assert f"`{key}" in text, f"value {key} is not in the chart README"


def test_troubleshooting_uses_the_cli() -> None:
    text = (DOCS / "troubleshooting.md").read_text()
    for command in ("xrgw match", "xrgw validate", "xrgw test", "xrgw lint", "explain"):
        assert command in text
