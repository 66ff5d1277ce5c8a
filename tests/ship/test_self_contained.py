"""The repository is self-contained: tests, scripts, benchmarks and the build read nothing
outside it.

A user has only the clone. Any file the suite needs must live in the repository; this test
reads every file under `tests/`, `harness/`, `scripts/`, `bench/`, `.ci/`, the Makefile, the
Dockerfile and pyproject.toml and fails on a reference that climbs out of the repository root:

- `Path(__file__).parents[N]` with N past the root, or `.parent` taken of a name that
  already holds the root (`ROOT.parent / "<folder>"`);
- a relative path literal whose `..` steps leave the root (resolved from the file's folder
  and from the root, the working directory of `make test`);
- `/ ".."` on a root-valued name, or an absolute path into this machine's workspace.

Third-party data under `tests/data/` is data, not code, and is not read.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCANNED_DIRS = ("tests", "harness", "scripts", "bench", ".ci")
SCANNED_FILES = ("Makefile", "Dockerfile", "pyproject.toml")
SKIPPED_DIRS = {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"}
SKIPPED_TREES = (Path("tests") / "data",)
TEXT_SUFFIXES = {"", ".py", ".sh", ".md", ".yaml", ".yml", ".json", ".jsonl", ".toml", ".txt",
                 ".cfg", ".conf", ".ini", ".j2", ".tpl"}

_PARENTS = re.compile(r"Path\(__file__\)(?:\.resolve\(\))?\.parents\[(\d+)\]")
_PARENT_CHAIN = re.compile(r"Path\(__file__\)(?:\.resolve\(\))?((?:\.parent)+)\b")
_ASSIGNED = re.compile(r"^\s*([A-Z_][A-Z0-9_]*)\s*=\s*(.+)$", re.MULTILINE)
# A literal that starts with ../ (after a quote, a space, `=` or `(`), not `a/../b`.
_RELATIVE = re.compile(r"""(?:^|(?<=["'\s=(,:]))((?:\.\./)+[\w.-]*)""")
# A shell script's own folder: `$(dirname "$0")/../..`.
_SCRIPT_DIR = re.compile(r"""dirname\s+"?\$(?:0|\{BASH_SOURCE\[0\]\})"?\)"?((?:/\.\.)+)""")
_ABSOLUTE = re.compile(r"""(?<![\w.])(/work/|/root/|~/|\$HOME/)""")
# The project's sibling folder (test data, specs, the bench) that a clone does not have.
# Spelt in pieces so that this file, which must name it to forbid it, does not refer to it.
SIBLING = "".join(("sha", "red"))
_SHARED = re.compile(
    rf"""\b{SIBLING}["'/\s,)]+(?:/\s*)?["']?(testdata|bench|spec|reference|hooks)\b""")


def _depth(relative: PurePosixPath) -> int:
    """How many folders lie between the root and the file: `Path(__file__).parents[depth]`
    is the root (tests/unit/core/x.py: 3)."""
    return len(relative.parts) - 1


def _parents_index(expression: str) -> tuple[int, int] | None:
    """(N, end) for `Path(__file__).parents[N]` or its `.parent` chain (k links: N = k-1)."""
    match = _PARENTS.search(expression)
    if match:
        return int(match.group(1)), match.end()
    match = _PARENT_CHAIN.search(expression)
    if match:
        return match.group(1).count(".parent") - 1, match.end()
    return None


def _levels_above_root(expression: str, depth: int) -> int | None:
    """How far above the repository root a `Path(__file__)` expression lands, if it does."""
    found = _parents_index(expression)
    return found[0] - depth if found is not None and found[0] > depth else None


def _root_names(text: str, depth: int) -> set[str]:
    """Module-level names assigned exactly the repository root."""
    names = set()
    for name, value in _ASSIGNED.findall(text):
        found = _parents_index(value)
        if found is not None and found[0] == depth and "/" not in value[found[1]:]:
            names.add(name)
    return names


def _escapes(relative_literal: str, start: PurePosixPath) -> bool:
    """True when joining the literal onto `start` (a path under the root) leaves the root."""
    level = len(start.parts)
    for part in PurePosixPath(relative_literal).parts:
        if part == "..":
            level -= 1
            if level < 0:
                return True
        elif part != ".":
            level += 1
    return False


def outside_references(relative: PurePosixPath, text: str) -> list[str]:
    """Every place in one file that refers to a path outside the repository."""
    depth = _depth(relative)
    found: list[str] = []
    roots = _root_names(text, depth) if relative.suffix == ".py" else set()
    for number, line in enumerate(text.splitlines(), start=1):
        where = f"{relative}:{number}"
        if relative.suffix == ".py":
            above = _levels_above_root(line, depth)
            if above is not None:
                found.append(f"{where}: Path(__file__) climbs {above} level(s) above the root")
            for name in roots:
                if re.search(rf"\b{name}\.parent\b", line) or re.search(
                    rf"""\b{name}\s*/\s*["']\.\.["']""", line
                ):
                    found.append(f"{where}: {name} is the root; {name}.parent is outside it")
        for climb in _SCRIPT_DIR.findall(line):
            if _escapes(climb.strip("/") + "/", relative.parent):
                found.append(f"{where}: the script's folder{climb} leaves the repository")
        for literal in _RELATIVE.findall(line):
            if _escapes(literal, relative.parent) or _escapes(literal, PurePosixPath()):
                found.append(f"{where}: relative path {literal!r} leaves the repository")
        for prefix in _ABSOLUTE.findall(line):
            found.append(f"{where}: absolute path {prefix!r} outside the repository")
        if _SHARED.search(line):
            found.append(f"{where}: refers to the shared folder beside the clone")
    return found


def _scanned_files() -> list[Path]:
    files = [ROOT / name for name in SCANNED_FILES if (ROOT / name).exists()]
    for folder in SCANNED_DIRS:
        for path in sorted((ROOT / folder).rglob("*")):
            relative = path.relative_to(ROOT)
            if not path.is_file() or SKIPPED_DIRS & set(relative.parts):
                continue
            if any(relative.is_relative_to(tree) for tree in SKIPPED_TREES):
                continue
            if path.suffix in TEXT_SUFFIXES:
                files.append(path)
    return files


def test_the_scan_covers_the_suite_and_the_build():
    scanned = {path.relative_to(ROOT).as_posix() for path in _scanned_files()}
    assert "Makefile" in scanned and ".ci/run" in scanned
    assert "tests/unit/cloudevents/ce_testdata.py" in scanned
    assert "scripts/demo.py" in scanned and "bench/bench_routes.py" in scanned
    assert "harness/brokers/broker.py" in scanned
    assert __file__.endswith("test_self_contained.py")
    assert "tests/ship/test_self_contained.py" in scanned


def test_nothing_refers_outside_the_repository():
    found = []
    for path in _scanned_files():
        relative = PurePosixPath(path.relative_to(ROOT).as_posix())
        if relative == PurePosixPath("tests/ship/test_self_contained.py"):
            continue  # its own examples below are the forbidden forms, on purpose
        found += outside_references(relative, path.read_text(encoding="utf-8", errors="replace"))
    assert not found, "references outside the repository:\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("path", "text"),
    [
        # The forms that broke a fresh clone before the data was copied in.
        ("tests/unit/cloudevents/ce_testdata.py",
         'PROJECT_ROOT = Path(__file__).resolve().parents[3]\n'
         f'VECTORS = PROJECT_ROOT / ".." / "{SIBLING}" / "testdata" / "cloudevents-vectors"\n'),
        ("tests/unit/definitions/test_x.py",
         'PROJECT = Path(__file__).resolve().parents[3]\n'
         f'CATALOGS = PROJECT.parent / "{SIBLING}" / "testdata" / "xregistry-catalogs"\n'),
        ("tests/unit/core/test_x.py",
         'ROOT = Path(__file__).resolve().parents[3]\n'
         'CATALOGS = sorted((ROOT.parent / "xregistry-catalogs").rglob("*"))\n'),
        ("tests/spark/test_x.py", 'DATA = Path(__file__).resolve().parents[3] / "data"\n'),
        ("tests/spark/test_x.py", 'DATA = Path(__file__).parent.parent.parent.parent / "data"\n'),
        ("Makefile", f"bench:\n\tpython ../{SIBLING}/bench/run.py\n"),
        ("bench/run.sh", 'cd "$(dirname "$0")/../../bench"\n'),
        ("scripts/x.py", 'OUT = "/work/main/out.json"\n'),
    ],
)
def test_the_check_catches_outside_references(path, text):
    assert outside_references(PurePosixPath(path), text)


@pytest.mark.parametrize(
    ("path", "text"),
    [
        ("tests/unit/core/test_x.py",
         'ROOT = Path(__file__).resolve().parents[3]\nDATA = ROOT / "tests" / "data"\n'),
        ("tests/spark/test_x.py", 'DATA = Path(__file__).parent / "data"\n'),
        ("tests/ship/test_x.py", 'assert (path.parent / target).exists()\n'),
        ("bench/x.sh", 'cd "$(dirname "$0")/.."\n'),
        ("tests/fuzz/x.py", 'SEGMENTS = ("/", "..", "%2F")\n'),
        ("tests/unit/x.py", 'TOPIC = "a/../b"\n'),
        ("tests/unit/x.py", "# a subscription shared by two consumers\n"),
    ],
)
def test_the_check_accepts_paths_inside_the_repository(path, text):
    assert outside_references(PurePosixPath(path), text) == []
