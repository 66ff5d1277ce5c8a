"""What every harness broker shares: the `Broker` lifecycle of a child process (start
on a free loopback port, protocol-level readiness probe, restart on the same port and data
dir, stop, clean up), the errors, TLS files, and the helpers the probes use.

Every broker runs as a plain child process (no system services, no Docker): it listens on
a free *loopback* port, keeps all its state in its own temp data dir, and writes
stdout/stderr to ``<data_dir>/broker.log``. ``start()`` returns only once the port accepts
connections *and* a protocol-level handshake succeeds; on failure or timeout it raises
:class:`BrokerStartError` with the tail of the log.

``restart()`` stops the process and starts it again on the same port with the same data
dir, which is what broker-restart tests need (clients reconnect to the same URL and find
their durable state again -- except for Tansu, whose bundled build is memory-only).
"""

from __future__ import annotations

import abc
import contextlib
import os
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import ClassVar, Self

#: Only loopback is used, for listening and for connecting.
HOST = "127.0.0.1"

#: Hint appended to "binary not found" errors.
INSTALL_HINT = "run scripts/install-system-deps.sh (as root), then re-run the tests"

#: Set to a non-empty value to keep broker data dirs (and logs) after the run.
KEEP_DATA_ENV = "XRGW_KEEP_BROKER_DATA"


class BrokerError(RuntimeError):
    """Base class for harness errors."""


class BrokerNotInstalled(BrokerError):
    """The broker's executable is not installed on this machine."""


class BrokerStartError(BrokerError):
    """The broker process exited early or did not become ready in time."""


class ProbeError(Exception):
    """A protocol-level readiness check failed (the caller retries until the deadline)."""


@dataclass(frozen=True)
class TlsFiles:
    """PEM files of a TLS-enabled broker: the CA that clients must trust and that
    verifies client certificates, the server's certificate and key, and a client
    certificate and key the readiness probe uses when client certificates are required."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path

    def client_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.ca))
        context.load_cert_chain(str(self.client_cert), str(self.client_key))
        return context


def free_port() -> int:
    """Return a currently free TCP port on loopback (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        port: int = s.getsockname()[1]
        return port


def find_executable(
    name: str, *fallbacks: str, env_var: str | None = None, use_path: bool = True
) -> str:
    """Locate an executable: ``$env_var`` if set, else ``PATH``, then absolute fallbacks.

    Debian puts some daemons in /usr/sbin, which is not on a normal user's PATH.
    """
    if env_var and os.environ.get(env_var):  # an explicit override must be right
        override = os.environ[env_var]
        if os.path.isfile(override) and os.access(override, os.X_OK):
            return override
        raise BrokerNotInstalled(
            f"${env_var}={override!r} is not an executable file; unset it or {INSTALL_HINT}"
        )
    candidates: list[str] = []
    found = shutil.which(name) if use_path else None
    if found:
        candidates.append(found)
    candidates.extend(fallbacks)
    for path in candidates:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise BrokerNotInstalled(
        f"{name!r} not found (looked in PATH and {list(fallbacks)}); {INSTALL_HINT}"
    )


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    """Read exactly ``n`` bytes or raise :class:`ProbeError` if the peer closes first."""
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ProbeError(f"connection closed after {len(buf)} of {n} bytes")
        buf += chunk
    return buf


def recv_line(sock: socket.socket, limit: int = 65536) -> bytes:
    """Read one CRLF-terminated line (NATS protocol)."""
    buf = b""
    while not buf.endswith(b"\r\n"):
        chunk = sock.recv(1)
        if not chunk:
            raise ProbeError(f"connection closed mid-line: {buf[:200]!r}")
        buf += chunk
        if len(buf) > limit:
            raise ProbeError("line too long")
    return buf[:-2]


class Broker(abc.ABC):
    """Common lifecycle of a broker child process.

    Subclasses provide the command line (:meth:`command`), optional config files
    (:meth:`prepare`), environment (:meth:`environment`) and a protocol-level readiness
    check (:meth:`probe`). Port and data dir are fixed at construction, so
    :meth:`restart` brings the broker back at the same URL with the same state.
    """

    #: Human-readable name used in messages and temp dir names.
    name: ClassVar[str]
    #: URL scheme of :attr:`url`.
    scheme: ClassVar[str]
    #: Default seconds to wait for readiness.
    default_startup_timeout: ClassVar[float] = 30.0
    #: Seconds to wait after SIGTERM before SIGKILL.
    stop_timeout: ClassVar[float] = 15.0

    def __init__(
        self,
        *,
        port: int | None = None,
        data_dir: str | os.PathLike[str] | None = None,
        startup_timeout: float | None = None,
    ) -> None:
        #: Instance override of :attr:`scheme` (TLS variants: mqtts, tls, ...).
        self.url_scheme: str | None = None
        self.host = HOST
        self.port = port if port is not None else free_port()
        self._owns_data_dir = data_dir is None
        self.data_dir = (
            Path(tempfile.mkdtemp(prefix=f"xrgw-{self.name}-"))
            if data_dir is None
            else Path(data_dir)
        )
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.data_dir / "broker.log"
        self.startup_timeout = (
            startup_timeout if startup_timeout is not None else self.default_startup_timeout
        )
        self._proc: subprocess.Popen[bytes] | None = None
        #: Seconds the last successful start() took until ready (for reports/diagnostics).
        self.last_start_seconds: float | None = None

    # ----------------------------------------------------------------- subclass hooks

    @abc.abstractmethod
    def command(self) -> list[str]:
        """The argv that runs the broker in the foreground."""

    def prepare(self) -> None:  # noqa: B027 (optional hook)
        """Write config files into :attr:`data_dir`; called before every (re)start."""

    def environment(self) -> Mapping[str, str]:
        """Environment for the child process (default: inherit ours)."""
        return dict(os.environ)

    @abc.abstractmethod
    def probe(self, sock: socket.socket) -> None:
        """Protocol-level readiness check on a fresh connection to :attr:`port`.

        Raise :class:`ProbeError` (or ``OSError``) if the broker is not ready yet.
        """

    def _start_auxiliary(self) -> None:  # noqa: B027 (optional hook)
        """Start helper processes the broker needs (RabbitMQ: epmd)."""

    def _stop_auxiliary(self) -> None:  # noqa: B027 (optional hook)
        """Stop what :meth:`_start_auxiliary` started."""

    # ----------------------------------------------------------------- public API

    @property
    def url(self) -> str:
        """``<scheme>://127.0.0.1:<port>``."""
        return f"{self.url_scheme or self.scheme}://{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        """True while the broker process is alive."""
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        """PID of the broker process (None when stopped)."""
        return self._proc.pid if self._proc is not None else None

    def start(self) -> Self:
        """Start the broker and block until it is ready (idempotent while running)."""
        if self.running:
            return self
        self._check_port_free()
        self.prepare()
        began = time.monotonic()
        self._start_auxiliary()
        try:
            with open(self.log_path, "ab") as log:
                log.write(
                    f"\n===== xrgw harness: starting {self.name} on {self.url} =====\n".encode()
                )
                log.flush()
                self._proc = subprocess.Popen(
                    self.command(),
                    cwd=self.data_dir,
                    env=dict(self.environment()),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    # Own process group: Ctrl-C in the terminal does not hit the broker
                    # directly, and stop() can kill the whole tree (RabbitMQ: sh + beam).
                    start_new_session=True,
                )
            self._wait_ready(began + self.startup_timeout)
        except BaseException:
            self._terminate()
            self._stop_auxiliary()
            raise
        self.last_start_seconds = time.monotonic() - began
        return self

    def stop(self) -> None:
        """Stop the broker: SIGTERM, wait up to :attr:`stop_timeout`, then SIGKILL."""
        self._terminate()
        self._stop_auxiliary()

    def restart(self) -> None:
        """Stop and start again with the same port and data dir."""
        self.stop()
        self.start()

    def close(self) -> None:
        """Stop, and delete the data dir if the harness created it.

        Set ``XRGW_KEEP_BROKER_DATA=1`` to keep it for post-mortem inspection.
        """
        self.stop()
        if self._owns_data_dir and not os.environ.get(KEEP_DATA_ENV):
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of the broker log (for error messages)."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - 64 * 1024))
                text = f.read().decode("utf-8", errors="replace")
        except OSError as exc:
            return f"<no log: {exc}>"
        return "\n".join(text.splitlines()[-lines:])

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<{type(self).__name__} {self.url} {state} data_dir={self.data_dir}>"

    # ----------------------------------------------------------------- internals

    def _check_port_free(self) -> None:
        """Refuse to start if something already listens on our port: the readiness
        probe would otherwise talk to that process instead of ours."""
        try:
            socket.create_connection((self.host, self.port), timeout=0.5).close()
        except OSError:
            return
        raise BrokerStartError(f"{self.name}: port {self.port} is already in use on {self.host}")

    def _wait_ready(self, deadline: float) -> None:
        """Poll until the port accepts connections and :meth:`probe` succeeds."""
        last_error: BaseException | None = None
        while True:
            assert self._proc is not None
            code = self._proc.poll()
            if code is not None:
                raise BrokerStartError(
                    f"{self.name} exited with code {code} during startup "
                    f"(command: {' '.join(self.command())})\n"
                    f"--- last lines of {self.log_path} ---\n{self.log_tail()}"
                )
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise BrokerStartError(
                    f"{self.name} not ready on {self.url} after {self.startup_timeout:.0f}s "
                    f"(last check: {last_error!r})\n"
                    f"--- last lines of {self.log_path} ---\n{self.log_tail()}"
                )
            try:
                with socket.create_connection(
                    (self.host, self.port), timeout=min(2.0, max(remaining, 0.1))
                ) as sock:
                    self.probe(sock)
                return
            except (OSError, ProbeError, ValueError, struct.error) as exc:
                last_error = exc
            time.sleep(0.05)

    def _terminate(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(self.stop_timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        # Reap stragglers of the process group (the group id stays reserved while any
        # member is alive, so this cannot hit an unrelated process).
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
