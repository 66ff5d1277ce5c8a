"""pytest plugin: collect the tests once, then run them in a forked child per mutant.

mutmut forks a pytest session per mutant and collects again each time; on a loaded 2-core
machine that cost 6-20 s a mutant, too slow for the ~1,800 mutants of a package. This
plugin screens a list of mutants instead: from inside mutmut's working copy (`mutants/`,
or a copy of it) it collects once, runs the collected tests with no mutant in a child
(they must pass), then forks one child per mutant with MUTANT_UNDER_TEST set, which stops
at the first failing test. One line per mutant goes to $MUTOUT: `killed NAME TEST` (the
first failing test, `timeout` when it hung) or `survived NAME`.

    cd mutants && MUTLIST=names.txt MUTOUT=result.txt $VENV_PYTHON -m pytest \\
        -p scripts.mutation_screen -q -p no:cacheprovider --hypothesis-seed=0 \\
        --hypothesis-profile=mutation --timeout=3 tests/unit/runtime

Each child starts from the parent's state after collection (nothing a test run cached),
so a mutant behind a cache runs like any other. `--timeout` (pytest-timeout) bounds each
test: a mutant that hangs a test is killed, as mutmut counts a timeout; the fuzz tests and
the property tests (hypothesis) get 60 s, and a test that took long in the unmutated run
(a CLI in a subprocess on a loaded host) gets five times its own time: a timeout must mean
the mutant hung it, not that the host was busy. `MUTATION_SCREEN_DEADLINE` (default 120 s) bounds
a whole child (one that reaches it counts as killed: give a slow test set more). Put the
tests most likely to fail first: a child stops at the first failure.

`MUTATION_SCREEN_PAUSE` names a file (e.g. a shared host's "quiet, benchmarking" flag):
while it exists no child is started. The wait is between children, never inside one, so
no child is stopped on its way to its deadline (it would count as killed).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

_FUZZ_TIMEOUT = 60
_BASELINE_TIMEOUT = 120  # each test of the unmutated run (it only has to pass)
_SLOW_FACTOR = 5  # a test's timeout: at least this many times its unmutated duration
_first_failure: list[str] = []
_durations: dict[str, float] = {}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        # Property tests run many examples: on a loaded host the template oracle takes
        # more than the 3 s a plain test gets, and would fail without a mutant.
        property_test = getattr(getattr(item, "obj", None), "is_hypothesis_test", False)
        if item.nodeid.startswith("tests/fuzz") or property_test:
            item.add_marker(pytest.mark.timeout(_FUZZ_TIMEOUT))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _durations[report.nodeid] = _durations.get(report.nodeid, 0.0) + report.duration
    if report.failed and not _first_failure:
        hung = "Timeout" in (report.longreprtext or "")
        _first_failure.append(report.nodeid + (" timeout" if hung else ""))


def _child(session: pytest.Session, mutant: str, verdict: Path) -> None:
    """Runs in the forked child: the collected tests until one fails; never returns."""
    os.environ["MUTANT_UNDER_TEST"] = mutant
    if not mutant:  # the unmutated run measures the tests: a busy host must not fail it
        for item in session.items:
            item.add_marker(pytest.mark.timeout(_BASELINE_TIMEOUT), append=False)
    quiet = os.open(os.devnull, os.O_WRONLY)
    os.dup2(quiet, 1)
    os.dup2(quiet, 2)
    code = 0
    try:
        for item in session.items:
            item.ihook.pytest_runtest_protocol(item=item, nextitem=None)
            if _first_failure:
                code = 1
                break
    except BaseException as exc:  # the child must reach os._exit whatever happens
        _first_failure.append(f"crash {type(exc).__name__}")
        code = 2
    if _first_failure:
        verdict.write_text(_first_failure[0])
    elif not mutant:  # the unmutated run: each test's duration, for the timeouts
        verdict.with_suffix(".durations").write_text(json.dumps(_durations))
    os._exit(code)


def _run(session: pytest.Session, mutant: str, deadline: float) -> tuple[int, str]:
    """(exit code, why) of one child; why is the first failing test, if any."""
    verdict = Path(f"/tmp/mutation-screen-{os.getpid()}.txt")
    verdict.unlink(missing_ok=True)
    pid = os.fork()
    if pid == 0:
        _child(session, mutant, verdict)
    ends = time.monotonic() + deadline
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            code = os.waitstatus_to_exitcode(status)
            break
        if time.monotonic() > ends:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            return -9, "deadline"
        time.sleep(0.01)
    why = verdict.read_text() if verdict.exists() else (f"exit {code}" if code else "")
    verdict.unlink(missing_ok=True)
    return code, why


def _timeouts_from(durations: dict[str, float], session: pytest.Session) -> None:
    """A test slower than its timeout allows for, unmutated, gets `_SLOW_FACTOR` times
    its own time (never less than it has)."""
    default = float(session.config.getoption("timeout", 0) or 0)
    for item in session.items:
        marker = item.get_closest_marker("timeout")
        current = float(marker.args[0]) if marker and marker.args else default
        wanted = _SLOW_FACTOR * durations.get(item.nodeid, 0.0)
        if current and wanted > current:
            item.add_marker(pytest.mark.timeout(wanted), append=False)


def _wait_while_paused() -> None:
    pause = os.environ.get("MUTATION_SCREEN_PAUSE")
    while pause and Path(pause).exists():
        time.sleep(5)


def pytest_runtestloop(session: pytest.Session) -> bool:
    mutants = Path(os.environ["MUTLIST"]).read_text().split()
    deadline = float(os.environ.get("MUTATION_SCREEN_DEADLINE", "120"))
    with Path(os.environ["MUTOUT"]).open("w") as out:
        _wait_while_paused()
        code, why = _run(session, "", deadline)
        if code != 0:
            out.write(f"BASELINE FAILS {why}\n")
            return True
        timings = Path(f"/tmp/mutation-screen-{os.getpid()}.durations")
        if timings.exists():
            _timeouts_from(json.loads(timings.read_text()), session)
            timings.unlink()
        for mutant in mutants:
            _wait_while_paused()
            code, why = _run(session, mutant, deadline)
            verdict = "survived" if code == 0 else "killed"
            out.write(f"{verdict} {mutant}{' ' + why if why else ''}\n")
            out.flush()
    return True
