"""The test harness (`harness/`) is imported, never put on the path by hand: nothing in
`tests/`, `harness/`, `scripts/` or `bench/` edits `sys.path`, and the Makefile runs the
scripts and benchmarks as modules from the root (`python -m scripts.demo`), which is what
lets them import the harness. pytest gets the root from `pythonpath` in pyproject.toml.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path, PurePosixPath

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCANNED_DIRS = ("tests", "harness", "scripts", "bench")

_PATH_EDIT = re.compile(
    r"\bsys\.path\s*(?:\.\s*(?:insert|append|extend|remove)\b|\[|\+=|=[^=])"
    r"|\bsite\.addsitedir\b|\bPYTHONPATH[\"']?\]?\s*=(?!=)"
)
# `$(PY) scripts/x.py` or `python bench/x.py`: a script run by path, not as a module.
_RUN_BY_PATH = re.compile(r"(?:\$\(PY\)|python3?)\s+(?:scripts|bench)/\w+\.py\b")


def path_edits(relative: PurePosixPath, text: str) -> list[str]:
    return [f"{relative}:{number}: {line.strip()}"
            for number, line in enumerate(text.splitlines(), start=1)
            if _PATH_EDIT.search(line)]


def scripts_run_by_path(makefile: str) -> list[str]:
    return [line.strip() for line in makefile.splitlines() if _RUN_BY_PATH.search(line)]


def test_nothing_edits_sys_path():
    found = []
    for folder in SCANNED_DIRS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            relative = PurePosixPath(path.relative_to(ROOT).as_posix())
            if relative == PurePosixPath("tests/ship/test_harness_imports.py"):
                continue  # its own examples below are the forbidden forms, on purpose
            found += path_edits(relative, path.read_text(encoding="utf-8"))
    assert not found, "sys.path edited by hand:\n" + "\n".join(found)


def test_the_makefile_runs_scripts_and_benchmarks_as_modules():
    makefile = (ROOT / "Makefile").read_text()
    assert scripts_run_by_path(makefile) == []
    assert "$(PY) -m scripts.demo" in makefile and "$(PY) -m scripts.fault_report" in makefile
    assert "$(PY) -m bench.bench_matcher" in makefile


def test_pytest_puts_the_root_on_the_path():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["tool"]["pytest"]["ini_options"]["pythonpath"] == ["."]


@pytest.mark.parametrize("line", [
    'sys.path.insert(0, str(ROOT / "tests/integration"))',
    "sys.path.append(str(HERE))",
    "sys.path[:0] = [str(ROOT)]",
    "sys.path += [here]",
    "sys.path = [str(ROOT), *sys.path]",
    "site.addsitedir(str(ROOT))",
    'os.environ["PYTHONPATH"] = str(ROOT)',
    "env = dict(os.environ, PYTHONPATH=str(ROOT))",
])
def test_the_check_catches_a_path_edit(line):
    assert path_edits(PurePosixPath("scripts/x.py"), line)


@pytest.mark.parametrize("line", [
    "if str(path) in sys.path:",
    "print(sys.path == before)",
    "env = dict(os.environ, PYTHONPATH_EXTRA='x')",
    'assert env["PYTHONPATH"] == before',
])
def test_the_check_accepts_reading_the_path(line):
    assert path_edits(PurePosixPath("scripts/x.py"), line) == []


def test_the_check_catches_a_script_run_by_path():
    assert scripts_run_by_path("demo:\n\t$(PY) scripts/demo.py\nbench:\n\tpython bench/b.py\n")
