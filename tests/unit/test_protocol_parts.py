"""A protocol is four parts, each registered by one line (docs/architecture.md, "Adding a
protocol"): its profile (`gateway/protocols`, in `PROFILES`), its CloudEvents binding
(`gateway/cloudevents/bindings`, in `BINDINGS`), its adapter package (`adapters/<name>/`,
in `adapters.registry.INSTALLED`) and its broker in the harness (`harness/brokers/`,
exported by the package). These checks fail on the part that was forgotten."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import adapters.registry
import harness.brokers
from gateway.cloudevents.bindings import BINDINGS
from gateway.protocols import PROFILES

ROOT = Path(__file__).resolve().parents[2]


def test_every_profile_has_a_binding_and_an_adapter() -> None:
    for prof in PROFILES:
        assert prof.name in BINDINGS, f"{prof.name}: no CloudEvents binding in BINDINGS"
        assert prof.family in adapters.registry.ADAPTERS, (
            f"{prof.name}: no adapter package in adapters.registry.INSTALLED")


def test_every_adapter_package_is_installed_and_serves_a_profile() -> None:
    families = {prof.family for prof in PROFILES}
    installed = {adapter.family for adapter in adapters.registry.INSTALLED}
    packages = sorted(path.parent.name for path in (ROOT / "adapters").glob("*/__init__.py"))
    assert packages, "no adapter packages found"
    for name in packages:
        adapter = importlib.import_module(f"adapters.{name}").ADAPTER
        assert adapter in adapters.registry.INSTALLED, (
            f"adapters/{name}/ is not listed in adapters.registry.INSTALLED")
        assert adapter.family in families, f"adapters/{name}/ serves no profile's family"
    assert len(installed) == len(adapters.registry.INSTALLED), "one package per family"


def test_every_broker_of_the_harness_is_exported() -> None:
    exported = set(harness.brokers.__all__)
    for path in sorted((ROOT / "harness" / "brokers").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and any(
                    isinstance(base, ast.Name) and base.id == "Broker" for base in node.bases):
                assert node.name in exported, (
                    f"harness/brokers/{path.name}: {node.name} is not exported by "
                    "harness/brokers/__init__.py")
