"""An isolated RabbitMQ node with AMQP 1.0 as a child process (and its own epmd)."""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

from harness.brokers.broker import (
    Broker,
    BrokerError,
    BrokerStartError,
    ProbeError,
    TlsFiles,
    find_executable,
    free_port,
    recv_exactly,
)

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
    def login_url(self) -> str:
        """``amqp://guest:guest@127.0.0.1:<port>``: :attr:`url` with the default
        credentials, which clients that do not offer SASL ANONYMOUS need."""
        return f"{self.scheme}://{self.user}:{self.password}@{self.host}:{self.port}"

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
        reply = recv_exactly(sock, 8)
        if reply != AMQP10_SASL_HEADER:
            raise ProbeError(f"AMQP 1.0 not available, server replied {reply!r}")

