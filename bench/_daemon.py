"""The real daemon (`xrgw run -c CONFIG`) as a child process, for the benchmarks that
measure it from outside (bench_memory, bench_latency)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def start_daemon(config: Path) -> subprocess.Popen[bytes]:
    """`xrgw run -c config` from this checkout (not an installed copy)."""
    return subprocess.Popen(
        [sys.executable, "-c", "import sys; from gateway.cli import main; sys.exit(main())",
         "run", "-c", str(config)],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})


def stop_daemon(child: subprocess.Popen[bytes], grace: float = 30) -> None:
    """SIGTERM (the daemon drains), SIGKILL after `grace` seconds."""
    child.send_signal(signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        child.wait(grace)
    if child.poll() is None:
        child.kill()
