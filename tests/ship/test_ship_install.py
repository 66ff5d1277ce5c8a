"""The image without a Docker engine: every step of the Dockerfile's build stage, run for
real with the image paths mapped into tmp (a virtualenv from the lock file with
--require-hashes, the project wheel with --no-deps, the installers removed, the SBOM
generated), then the runtime stage's filesystem assembled from its COPY instructions.
From that directory, with the runtime's environment, `xrgw --version` and `xrgw validate`
run, the environment holds no pip, setuptools or wheel, and the SBOM lists it. Only
`--no-cache-dir` is dropped so pip's cache keeps this fast; packages, pins and hashes are
exactly the image's.

Also checks that requirements.lock satisfies every dependency in pyproject.toml."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version
from ship_dockerfile import global_args, instructions, stage_args, stages, substitute

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


#: Where the build stage's paths land: /opt/xrgw inside the runtime root (it is copied
#: there unchanged, and a virtualenv cannot move), the build-only ones beside it.
BUILD_ONLY = ("/opt/sbom-tool", "/wheels", "/sbom")
#: Build arguments given to the image build, as CI does.
BUILD_ARGS = {"REVISION": "abc1234"}


def _map_paths(text: str, mapping: dict[str, Path]) -> str:
    """Image paths -> directories here, as whole path words (`/sbom` is not the start of
    `/opt/sbom-tool`)."""
    for image_path, local in sorted(mapping.items(), key=lambda kv: -len(kv[0])):
        text = re.sub(rf"(?<![\w/.-]){re.escape(image_path)}(?=[/\s\"']|$)", str(local), text)
    return text


def _host_env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON"))}
    # `python` in the Dockerfile's commands is this interpreter (the base image's role)
    bin_dir = tmp / "host-bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


@pytest.fixture(scope="module")
def runtime_root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The runtime stage's filesystem, built here: every RUN of the build stage (the
    image paths mapped into tmp; only `--no-cache-dir` dropped, so pip's cache keeps this
    fast), then each `COPY --from=build` and `COPY` of the runtime stage."""
    tmp = tmp_path_factory.mktemp("image")
    all_stages = {s.name: s for s in stages(ROOT / "Dockerfile")}
    build, runtime = all_stages["build"], all_stages["runtime"]
    root, src = tmp / "root", tmp / "src"
    mapping = {"/opt/xrgw": root / "opt" / "xrgw",
               **{p: tmp / "build" / p.strip("/") for p in BUILD_ONLY}}
    (tmp / "build").mkdir()
    # the build context as the build stage copies it
    src.mkdir()
    for item in build.all("COPY"):
        *sources, _ = item.value.split()
        for name in sources:
            if (ROOT / name).is_dir():
                shutil.copytree(ROOT / name, src / name,
                                ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            else:
                shutil.copy(ROOT / name, src / name)
    env = _host_env(tmp)
    for run in build.all("RUN"):
        command = _map_paths(run.value, mapping).replace("--no-cache-dir ", "")
        result = subprocess.run(["bash", "-euo", "pipefail", "-c", command], cwd=src, env=env,
                                capture_output=True, text=True, timeout=400)
        assert result.returncode == 0, f"{command}\n{result.stdout[-3000:]}{result.stderr[-3000:]}"
    for item in runtime.all("COPY"):
        words = item.value.split()
        if words[0] == "--from=build":
            source, target = _map_paths(words[1], mapping), root / words[2].lstrip("/")
        else:
            source, target = str(ROOT / words[0]), root / words[1].lstrip("/")
        if Path(source) == target:
            continue  # built in place: /opt/xrgw
        target.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if Path(source).is_dir() else shutil.copy)(source, target)
    yield root


def _runtime_env(root: Path) -> dict[str, str]:
    """The runtime stage's ENV (its ARG defaults and BUILD_ARGS substituted), the image
    paths pointing into `root`."""
    runtime = next(s for s in stages(ROOT / "Dockerfile") if s.name == "runtime")
    args = {**global_args(instructions(ROOT / "Dockerfile")), **stage_args(runtime),
            **BUILD_ARGS}
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    for item in runtime.all("ENV"):
        for word in shlex.split(substitute(item.value, args)):
            name, _, value = word.partition("=")
            env[name] = value.replace("/opt/xrgw", str(root / "opt" / "xrgw")).replace(
                "$PATH", env["PATH"])
    return env


def _in_runtime(root: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = _runtime_env(root)
    return subprocess.run(list(argv), capture_output=True, text=True, env=env,
                          cwd=env.get("HOME", "/tmp"), timeout=120)


def test_runtime_runs_the_gateway(runtime_root: Path) -> None:
    version = _in_runtime(runtime_root, "xrgw", "--version")
    assert version.returncode == 0, version.stderr
    assert version.stdout == "xrgw 0.1.0 (revision abc1234)\n"
    examples = runtime_root / "usr/share/xrgw/examples"
    check = _in_runtime(runtime_root, "xrgw", "validate", str(examples / "store.xreg.json"))
    assert check.returncode == 0, check.stdout + check.stderr
    config = _in_runtime(runtime_root, "xrgw", "validate", "-c",
                         str(examples / "kafka-payments.yaml"))
    assert config.returncode == 0 and "valid:" in config.stdout, config.stdout + config.stderr
    # every adapter imports, found through the entry point, installed from the wheel
    probe = _in_runtime(runtime_root, "python", "-c",
                        "import adapters.amqp, adapters.http, adapters.kafka, adapters.mqtt, "
                        "adapters.nats, gateway; from gateway.daemon import load_factory; "
                        "print(type(load_factory()).__name__, gateway.__file__)")
    assert probe.returncode == 0, probe.stderr
    name, where = probe.stdout.split()
    assert name == "AdapterRegistry" and where.startswith(str(runtime_root / "opt/xrgw"))


def test_runtime_environment_has_no_installers(runtime_root: Path) -> None:
    venv = runtime_root / "opt/xrgw"
    (site,) = venv.glob("lib/python3*/site-packages")
    installed = {re.sub(r"[-_.]+", "-", p.name.split("-")[0]).lower()
                 for p in site.glob("*.dist-info")}
    assert {"aiohttp", "prometheus-client", "xregistry-gateway"} <= installed
    assert installed.isdisjoint({"pip", "setuptools", "wheel"}), installed
    assert not [p.name for p in (venv / "bin").iterdir() if p.name.startswith(("pip", "wheel"))]
    assert not (site / "pkg_resources").exists() and not (site / "pip").exists()
    # the check can fail: the build stage's own tool environment has pip
    (tool_site,) = (runtime_root.parent / "build/opt/sbom-tool").glob("lib/python3*/site-packages")
    assert (tool_site / "pip").is_dir()


def test_runtime_ships_an_sbom_of_its_environment(runtime_root: Path) -> None:
    path = runtime_root / "usr/share/doc/xrgw/sbom.cdx.json"
    sbom = json.loads(path.read_text())
    assert sbom["bomFormat"] == "CycloneDX"
    root_component = sbom["metadata"]["component"]
    assert (root_component["name"], root_component["version"]) == ("xregistry-gateway", "0.1.0")
    listed = {re.sub(r"[-_.]+", "-", c["name"]).lower(): c["version"]
              for c in sbom["components"]}
    pins = {name: str(version) for name, version in _lock().items()}
    shipped = {n: v for n, v in pins.items() if n not in ("pip", "setuptools", "wheel")}
    assert {n: listed.get(n) for n in shipped} == shipped  # every locked package, its pin
    assert not {"pip", "setuptools", "wheel"} & set(listed)  # and what is not there, not
    assert all(c["purl"].startswith("pkg:pypi/") for c in sbom["components"])
    # valid CycloneDX, by the CycloneDX library the build stage used
    tool = runtime_root.parent / "build/opt/sbom-tool/bin/python"
    check = subprocess.run(
        [str(tool), "-c",
         "import sys; from cyclonedx.schema import SchemaVersion; "
         "from cyclonedx.validation.json import JsonStrictValidator; "
         "version = SchemaVersion.from_version(sys.argv[2]); "
         "error = JsonStrictValidator(version).validate_str(open(sys.argv[1]).read()); "
         "print(error); sys.exit(1 if error else 0)", str(path), sbom["specVersion"]],
        capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr
