"""nats-server with JetStream as a child process."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Mapping
from pathlib import Path

from harness.brokers.broker import Broker, ProbeError, TlsFiles, find_executable, recv_line


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
        line = recv_line(sock)
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
        reply = recv_line(sock)
        if reply != b"PONG":
            raise ProbeError(f"expected PONG, got {reply[:100]!r}")

