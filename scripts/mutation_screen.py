"""pytest plugin: run the collected tests once per mutant, all in one process.

mutmut forks a pytest session per mutant; on a loaded 2-core machine that cost 6-20 s a
mutant, too slow for the ~1,800 mutants of a package. This plugin screens a list of
mutants instead: from inside mutmut's working copy (`mutants/`, or a copy of it) it runs
the collected tests with no mutant (they must pass), then once per mutant with
MUTANT_UNDER_TEST set, stopping at the first failing test, and writes one line per mutant:
`killed NAME` or `survived NAME` ($VENV_PYTHON: the project's virtualenv's python).

    cd mutants && MUTLIST=names.txt MUTOUT=result.txt $VENV_PYTHON -m pytest \\
        -p scripts.mutation_screen -q -p no:cacheprovider --hypothesis-seed=0 \\
        --hypothesis-profile=mutation tests/unit/core

Screening is cheaper than exact: a value cached by an earlier run (a compiled check, an
lru_cache) can hide a mutant, so a survivor is confirmed with one process per mutant
(`MUTANT_UNDER_TEST=NAME python -m pytest ...`) before it is listed as equivalent. Each
mutant gets `MUTATION_SCREEN_TIMEOUT` seconds (default 30); a hang counts as killed, as
mutmut counts a timeout.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from types import FrameType

import pytest
from _pytest.runner import runtestprotocol


class _Hung(Exception):
    pass


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise _Hung


def _first_failure(items: list[pytest.Item], timeout: int) -> str | None:
    """The first failing test's id, "timeout", or None when every test passed."""
    signal.alarm(timeout)
    try:
        for item in items:
            reports = runtestprotocol(item, nextitem=None, log=False)
            if any(report.failed for report in reports):
                return item.nodeid
    except _Hung:
        return "timeout"
    finally:
        signal.alarm(0)
    return None


def pytest_runtestloop(session: pytest.Session) -> bool:
    mutants = Path(os.environ["MUTLIST"]).read_text().split()
    timeout = int(os.environ.get("MUTATION_SCREEN_TIMEOUT", "30"))
    signal.signal(signal.SIGALRM, _alarm)
    with Path(os.environ["MUTOUT"]).open("w") as out:
        os.environ["MUTANT_UNDER_TEST"] = ""
        failed = _first_failure(session.items, timeout)
        if failed is not None:
            out.write(f"BASELINE FAILS {failed}\n")
            return True
        for name in mutants:
            os.environ["MUTANT_UNDER_TEST"] = name
            verdict = "killed" if _first_failure(session.items, timeout) else "survived"
            out.write(f"{verdict} {name}\n")
            out.flush()
    os.environ["MUTANT_UNDER_TEST"] = ""
    return True
