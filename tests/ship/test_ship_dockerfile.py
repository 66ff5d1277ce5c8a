"""The Dockerfile's rules, checked by reading it (there is no Docker engine here):
multi-stage, slim base pinned by digest, pinned installs, no installers in the runtime,
an SBOM built and shipped, non-root user, read-only-root friendly, `xrgw run` entrypoint
with the documented config path, HEALTHCHECK on /healthz, OCI labels and the revision, a
Spark target with Java. The build stage's steps themselves run, and the runtime's
filesystem is assembled from them, in test_ship_install.py."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from ship_dockerfile import Stage, global_args, instructions, stage_args, stages, substitute

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
STAGES = {s.name: s for s in stages(DOCKERFILE)}
CONFIG_PATH = "/etc/xrgw/config.yaml"


def _shell_commands(stage: Stage) -> list[list[str]]:
    """Every simple command of the stage's RUN instructions, as argv lists."""
    out: list[list[str]] = []
    args = {**global_args(instructions(DOCKERFILE)), **stage_args(stage)}
    for run in stage.all("RUN"):
        text = substitute(run.value, args)
        for part in re.split(r"&&|\|\||;", text):
            words = shlex.split(part)
            if words:
                out.append(words)
    return out


def test_stages() -> None:
    assert list(STAGES) == ["build", "runtime", "spark-build", "spark"]
    assert STAGES["spark"].base == "runtime"
    assert STAGES["spark-build"].base == "build"
    copies = [c.value for c in STAGES["runtime"].all("COPY")]
    assert "--from=build /opt/xrgw /opt/xrgw" in copies


DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")


def test_base_image_is_pinned_by_digest_with_its_tag_beside_it() -> None:
    """A digest cannot be pushed again, a tag can: the default base is `tag@digest`, and
    the comment right above the ARG names the tag for people."""
    image = global_args(instructions(DOCKERFILE))["PYTHON_IMAGE"]
    assert DIGEST.search(image), f"{image}: pin the digest (python:<tag>@sha256:<64 hex>)"
    lines = DOCKERFILE.read_text().splitlines()
    arg = next(i for i, line in enumerate(lines) if line.startswith("ARG PYTHON_IMAGE="))
    assert lines[arg - 1] == f"# {image.partition('@')[0]}"
    # the check can fail: a tag alone is refused
    assert not DIGEST.search("python:3.11.11-slim-bookworm")


@pytest.mark.parametrize("name", ["build", "runtime"])
def test_base_image_is_a_pinned_slim_python(name: str) -> None:
    image = STAGES[name].base
    repo, _, tag = image.partition("@")[0].partition(":")
    assert repo == "python"
    assert tag and tag != "latest" and "latest" not in image
    assert re.fullmatch(r"3\.\d+\.\d+-slim-\w+", tag), f"{image}: pin a patch release"


def test_no_latest_anywhere_and_no_remote_add() -> None:
    for item in instructions(DOCKERFILE):
        assert not re.search(r":latest\b", item.value), f"line {item.line}"
        assert item.keyword != "ADD", f"line {item.line}: use COPY (no remote ADD)"


@pytest.mark.parametrize("name", ["build", "runtime", "spark-build", "spark"])
def test_installs_are_pinned(name: str) -> None:
    for argv in _shell_commands(STAGES[name]):
        if "pip" in Path(argv[0]).name and "install" in argv:
            rest = argv[argv.index("install") + 1:]
            if "-r" in rest:
                assert "--require-hashes" in rest
                lock = rest[rest.index("-r") + 1]
                assert lock in ("requirements.lock", "requirements-sbom.lock",
                                "requirements-spark.lock"), argv
                # the gateway's environment only from the project's locks
                assert argv[0] != "/opt/xrgw/bin/pip" or lock in (
                    "requirements.lock", "requirements-spark.lock")
                continue
            packages = [a for a in rest if not a.startswith("-")]
            assert packages, argv
            for package in packages:
                local_wheel = package.endswith(".whl") and package.startswith("/")
                assert local_wheel or re.fullmatch(r"[\w.-]+==[\w.+!-]+", package), argv
                if local_wheel:
                    assert "--no-deps" in rest, "a local wheel brings no unpinned deps"
        if argv[:1] == ["apt-get"] and "install" in argv:
            assert "--no-install-recommends" in argv
            packages = [a for a in argv[argv.index("install") + 1:] if not a.startswith("-")]
            assert packages and all(re.fullmatch(r"[\w.+-]+=[\w.+~:-]+", p) for p in packages)
            assert any("rm -rf /var/lib/apt/lists" in r.value for r in STAGES[name].all("RUN"))


@pytest.mark.parametrize("name", ["runtime", "spark"])
def test_runs_as_non_root(name: str) -> None:
    user = STAGES[name].last("USER")
    assert user is not None
    uid = user.value.split(":")[0]
    assert uid.isdigit() and int(uid) >= 1000, "numeric non-root uid (runAsNonRoot checks it)"
    # nothing after the last USER switches back to root
    after = STAGES[name].instructions[STAGES[name].instructions.index(user):]
    assert all(i.keyword != "USER" or i is user for i in after)
    runtime_users = [i for i in STAGES["runtime"].all("RUN") if "useradd" in i.value]
    assert runtime_users and f"--uid {uid}" in runtime_users[0].value


def test_read_only_root_filesystem_friendly() -> None:
    env = " ".join(i.value for i in STAGES["runtime"].all("ENV"))
    for setting in ("PYTHONDONTWRITEBYTECODE=1", "HOME=/tmp", "TMPDIR=/tmp"):
        assert setting in env
    workdir = STAGES["runtime"].last("WORKDIR")
    assert workdir is not None and workdir.value == "/tmp"
    spark_env = " ".join(i.value for i in STAGES["spark"].all("ENV"))
    assert "SPARK_LOCAL_DIRS=/tmp" in spark_env


def test_entrypoint_runs_the_gateway_with_the_documented_config() -> None:
    runtime = STAGES["runtime"]
    entrypoint, cmd = runtime.last("ENTRYPOINT"), runtime.last("CMD")
    assert entrypoint is not None and cmd is not None
    assert entrypoint.exec_form() == ["xrgw", "run"]
    assert cmd.exec_form() == ["-c", CONFIG_PATH]
    # the chart passes the same arguments, and the docs name the same path
    helpers = (ROOT / "helm/xrgw/templates/_helpers.tpl").read_text()
    # (then extraArgs; test_ship_helm.py checks the rendered args)
    assert f'args: ["-c", "{CONFIG_PATH}"{{{{ range $v.extraArgs }}}}' in helpers
    assert CONFIG_PATH in (ROOT / "docs/deployment.md").read_text()


def test_healthcheck_probes_healthz() -> None:
    runtime = STAGES["runtime"]
    check = runtime.last("HEALTHCHECK")
    assert check is not None
    argv = check.value.split("CMD", 1)[1].strip()
    assert argv.startswith("[")  # exec form: no shell needed
    env = " ".join(i.value for i in runtime.all("ENV"))
    assert "XRGW_HEALTHCHECK_URL=http://127.0.0.1:9464/healthz" in env
    assert re.search(r"--interval=\d+s", check.value) and re.search(r"--timeout=\d+s",
                                                                     check.value)


def test_oci_labels() -> None:
    labels = " ".join(i.value for i in STAGES["runtime"].all("LABEL"))
    for key in ("title", "description", "version", "revision", "created", "licenses",
                "source", "documentation"):
        assert f"org.opencontainers.image.{key}=" in labels
    assert 'org.opencontainers.image.source="https://github.com/xrgw/xrgw"' in labels
    assert "example" not in labels
    # the revision reaches the gateway: `xrgw --version` and xrgw_build_info
    env = " ".join(i.value for i in STAGES["runtime"].all("ENV"))
    assert "XRGW_REVISION=${REVISION}" in env
    assert "REVISION" in stage_args(STAGES["runtime"])


def _uninstalls_installers(argv: list[str]) -> bool:
    return ("pip" in argv and "uninstall" in argv and "--yes" in argv
            and {"pip", "setuptools", "wheel"} <= set(argv[argv.index("uninstall") + 1:]))


@pytest.mark.parametrize("name", ["build", "spark-build"])
def test_the_copied_environment_loses_its_installers_after_the_last_install(name: str) -> None:
    commands = _shell_commands(STAGES[name])
    removal = [i for i, c in enumerate(commands)
               if c[0] == "/opt/xrgw/bin/python" and _uninstalls_installers(c)]
    installs = [i for i, c in enumerate(commands)
                if c[0] == "/opt/xrgw/bin/pip" and "install" in c]
    assert removal and installs and removal[-1] > installs[-1]


def test_runtime_has_no_installers_of_its_own() -> None:
    commands = _shell_commands(STAGES["runtime"])
    assert any(c[:1] == ["python"] and _uninstalls_installers(c) for c in commands)
    assert any(c[:2] == ["rm", "-rf"] and "/usr/local/lib/python3*/ensurepip" in c
               for c in commands)
    # and nothing installs into it afterwards
    assert not any("install" in c and ("pip" in " ".join(c) or "ensurepip" in " ".join(c))
                   and not _uninstalls_installers(c) for c in commands)


def test_sbom_is_generated_at_build_and_shipped() -> None:
    for stage in ("build", "spark-build"):
        commands = _shell_commands(STAGES[stage])
        sbom = [c for c in commands if c[0].endswith("/cyclonedx-py")]
        assert sbom, stage
        argv = sbom[-1]
        assert argv[1] == "environment" and argv[-1] == "/opt/xrgw/bin/python"
        assert argv[argv.index("--output-file") + 1] == "/sbom/sbom.cdx.json"
        assert argv[argv.index("--output-format") + 1] == "JSON"
    copies = {s: [c.value for c in STAGES[s].all("COPY")] for s in ("runtime", "spark")}
    assert "--from=build /sbom/sbom.cdx.json /usr/share/doc/xrgw/sbom.cdx.json" in copies[
        "runtime"]
    assert "--from=spark-build /sbom/sbom.cdx.json /usr/share/doc/xrgw/sbom.cdx.json" in (
        copies["spark"])


def test_spark_target_adds_java_and_pyspark() -> None:
    commands = _shell_commands(STAGES["spark"])
    assert any(c[:1] == ["apt-get"] and any(a.startswith("openjdk-17-jre-headless=")
                                            for a in c) for c in commands)
    assert any("requirements-spark.lock" in c for c in _shell_commands(STAGES["spark-build"]))
    assert "--from=spark-build /opt/xrgw /opt/xrgw" in [
        c.value for c in STAGES["spark"].all("COPY")]
    env = " ".join(i.value for i in STAGES["spark"].all("ENV"))
    assert "JAVA_HOME=" in env


def test_spark_lock_pins_what_pyproject_allows_with_every_dependency_hashed() -> None:
    import tomllib

    from packaging.requirements import Requirement

    text = (ROOT / "requirements-spark.lock").read_text()
    pins = dict(re.findall(r"^([\w.-]+)==([\w.+!-]+) \\$", text, re.M))
    spark = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]["spark"]
    for spec in map(Requirement, spark):
        assert spec.name in pins and spec.specifier.contains(pins[spec.name]), spec
    assert pins["pandas"].split(".")[0] == "2"  # PySpark 4 supports pandas 2.x only
    # what the pinned packages require (their metadata), each locked too
    for needed in ("py4j", "numpy", "python-dateutil", "pytz", "tzdata"):
        assert needed in pins, needed
    for block in re.split(r"\n(?=[\w.-]+==)", text.split("\n#\n", 1)[1]):
        assert "--hash=sha256:" in block, block[:60]


def test_dockerignore_sends_only_what_the_build_copies() -> None:
    lines = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assert lines[0] == "*"
    allowed = {line[1:].rstrip("/") for line in lines if line.startswith("!")}
    copied = set()
    for stage in STAGES.values():
        for copy in stage.all("COPY"):
            words = copy.value.split()
            if words[0].startswith("--from"):
                continue
            copied.update(w.rstrip("/") for w in words[:-1])
    assert copied <= allowed, copied - allowed
    for source in copied:
        assert (ROOT / source).exists(), source
