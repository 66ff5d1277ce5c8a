"""The gateway as a real child process (`python -m gateway.cli run -c CONFIG`): started,
SIGKILLed, SIGTERMed and watched through its admin port."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

#: The checkout: the child runs from here, so it imports this checkout's gateway.
ROOT = Path(__file__).resolve().parents[2]


class GatewayProcess:
    """`xrgw run -c CONFIG` as a child process with its log in a file."""

    def __init__(self, config: Path, admin_port: int) -> None:
        self.config = config
        self.admin_port = admin_port
        self.log_path = config.with_suffix(".log")
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with open(self.log_path, "ab") as log:
            log.write(b"\n===== test: starting gateway =====\n")
            log.flush()
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "gateway.cli", "run", "-c", str(self.config)],
                cwd=ROOT, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL: no drain, no acks, no commits -- a crash."""
        assert self.proc is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    async def terminate(self, timeout: float) -> tuple[int | None, float]:
        """SIGTERM; (exit code or None if still running after `timeout`, seconds)."""
        assert self.proc is not None
        began = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = await asyncio.to_thread(self.proc.wait, timeout)
        except subprocess.TimeoutExpired:
            code = None
        return code, time.monotonic() - began

    def close(self) -> None:
        if self.running:
            self.kill()

    def assert_no_stall(self) -> None:
        """The consumer never timed out waiting for SUBACK (adapters/mqtt/ used to
        pause reading on a full buffer before SUBACK when a session was resumed with a
        full window of unacked messages, and then stalled on every reconnect)."""
        text = self.log_path.read_text(errors="replace")
        assert "no SUBACK" not in text, f"MQTT consumer stalled:\n{self.log_tail()}"

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError as exc:
            return f"<no log: {exc}>"
        return "\n".join(text.splitlines()[-lines:])

    # -- admin port --------------------------------------------------------------------
    def _get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(
                    f"http://127.0.0.1:{self.admin_port}{path}", timeout=2) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()
        except OSError:
            return 0, ""

    async def get(self, path: str) -> tuple[int, str]:
        return await asyncio.to_thread(self._get, path)

    async def readyz(self) -> int:
        return (await self.get("/readyz"))[0]

    async def wait_ready(self, timeout: float = 30.0, source: str = "faults-mqtt") -> None:
        """Until /readyz is 200 and the source consumer is connected (the MQTT consumer's
        gauge is set only after SUBACK, so nothing published from now on can miss the
        session; a Kafka consumer's only once it has its partitions)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.running:
                raise AssertionError(f"gateway exited early:\n{self.log_tail()}")
            status, _ = await self.get("/readyz")
            if status == 200:
                _, metrics = await self.get("/metrics")
                if (f'xrgw_endpoint_connected{{endpoint="{source}",'
                        f'xrgw_endpoint="{source}"}} 1.0') in metrics:
                    return
            await asyncio.sleep(0.05)
        raise AssertionError(f"gateway not ready after {timeout}s:\n{self.log_tail()}")

    async def wait_status(self, want: int, timeout: float) -> float:
        """Until /readyz answers `want`; the seconds that took."""
        began = time.monotonic()
        while (status := await self.readyz()) != want:
            if time.monotonic() - began > timeout:
                raise AssertionError(f"/readyz still {status} after {timeout}s, want {want}")
            await asyncio.sleep(0.05)
        return time.monotonic() - began

    async def metric(self, name: str) -> float:
        """The value of the first sample of `name` (0 when absent or unreachable)."""
        _, text = await self.get("/metrics")
        for line in text.splitlines():
            if line.startswith(name) and line[len(name):len(name) + 1] in ("{", " "):
                return float(line.split()[-1])
        return 0.0

    def rss_bytes(self) -> int:
        """Resident set size of the gateway process (Linux /proc)."""
        assert self.proc is not None
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0


@contextlib.contextmanager
def gateway_process(config: Path, admin_port: int) -> Iterator[GatewayProcess]:
    """A GatewayProcess (not started) that is killed on the way out; when the block
    fails, the tail of its log is printed first."""
    gateway = GatewayProcess(config, admin_port)
    try:
        yield gateway
    except BaseException:
        print(f"--- gateway log ({gateway.log_path}) ---\n{gateway.log_tail(60)}")
        raise
    finally:
        gateway.close()
