"""The Dockerfile's install steps, run for real in a fresh virtualenv: the build stage's
`pip` commands (lock file with --require-hashes, the project wheel with --no-deps),
with the image paths mapped into tmp. Only `--no-cache-dir` is dropped so pip's cache
keeps this test fast; the packages, pins and hashes are exactly the image's.

Also checks that requirements.lock satisfies every dependency in pyproject.toml."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tomllib
import venv
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version
from ship_dockerfile import stages

ROOT = Path(__file__).resolve().parents[2]


def _lock() -> dict[str, Version]:
    pins: dict[str, Version] = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9][\w.-]*)==([\w.+!-]+)", line)
        if match:
            pins[re.sub(r"[-_.]+", "-", match.group(1)).lower()] = Version(match.group(2))
    return pins


def test_lock_file_satisfies_pyproject() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    pins = _lock()
    for spec in project["project"]["dependencies"] + project["build-system"]["requires"]:
        requirement = Requirement(spec)
        name = re.sub(r"[-_.]+", "-", requirement.name).lower()
        assert name in pins, f"{spec} is not in requirements.lock"
        assert requirement.specifier.contains(pins[name], prereleases=True), \
            f"requirements.lock pins {name}=={pins[name]}, pyproject wants {spec}"
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        if re.match(r"^[A-Za-z0-9]", line):
            assert "==" in line and line.rstrip().endswith("\\"), f"unhashed pin: {line}"


def test_the_wheel_packages_only_the_gateway_and_its_adapters() -> None:
    """setuptools' own discovery with pyproject's patterns, over the whole checkout: the
    test harness (harness/, importable by the tests), tests, scripts and benchmarks stay
    out of the wheel (and so out of the image, which installs the wheel)."""
    from setuptools import find_namespace_packages

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    include = project["tool"]["setuptools"]["packages"]["find"]["include"]
    shipped = find_namespace_packages(where=str(ROOT), include=include)
    assert {name.split(".")[0] for name in shipped} == {"gateway", "adapters"}, shipped
    # The same discovery does see the harness when asked: the check above can fail.
    assert "harness.brokers" in find_namespace_packages(where=str(ROOT), include=["harness*"])


def test_dockerfile_install_steps_in_a_fresh_virtualenv(tmp_path: Path) -> None:
    build = next(s for s in stages(ROOT / "Dockerfile") if s.name == "build")
    src, wheels, prefix = tmp_path / "src", tmp_path / "wheels", tmp_path / "opt-xrgw"
    # the build context as the Dockerfile copies it
    src.mkdir()
    for name in ("requirements.lock", "pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("gateway", "adapters"):
        shutil.copytree(ROOT / name, src / name, ignore=ignore)
    venv.create(prefix, with_pip=True)  # RUN python -m venv /opt/xrgw
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON"))}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    ran = 0
    for run in build.all("RUN"):
        if "pip " not in run.value:
            continue
        command = (run.value.replace("/opt/xrgw", str(prefix)).replace("/wheels", str(wheels))
                   .replace("--no-cache-dir ", ""))
        result = subprocess.run(["bash", "-euo", "pipefail", "-c", command], cwd=src, env=env,
                                capture_output=True, text=True, timeout=240)
        assert result.returncode == 0, f"{command}\n{result.stdout[-3000:]}{result.stderr[-3000:]}"
        ran += 1
    assert ran == 2
    # the installed gateway works, with its adapters found through the entry point
    xrgw = prefix / "bin" / "xrgw"
    check = subprocess.run([str(xrgw), "validate", str(ROOT / "config/examples/store.xreg.json")],
                           capture_output=True, text=True, env=env, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    probe = subprocess.run(
        [str(prefix / "bin" / "python"), "-c",
         "from gateway.daemon import load_factory; print(type(load_factory()).__name__)"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert probe.returncode == 0 and probe.stdout.strip() == "AdapterRegistry", probe.stderr
    # installed from the wheel, not from the checkout
    where = subprocess.run([str(prefix / "bin" / "python"), "-c",
                            "import gateway; print(gateway.__file__)"],
                           capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert str(prefix) in where.stdout, where.stdout
