"""Eclipse Mosquitto (MQTT 3.1.1 and 5.0) as a child process."""

from __future__ import annotations

import base64
import hashlib
import os
import secrets
import socket
import struct
from collections.abc import Mapping
from pathlib import Path

from harness.brokers.broker import Broker, ProbeError, TlsFiles, find_executable, recv_exactly


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
        connack = recv_exactly(sock, 4)
        if connack[0] != 0x20 or connack[3] != 0:
            raise ProbeError(f"unexpected CONNACK {connack!r}")
        sock.sendall(b"\xe0\x00")  # DISCONNECT


def _mosquitto_hash(password: str) -> str:
    """A Mosquitto 2 password-file hash (``$6$``: salted SHA-512, as mosquitto_passwd
    writes it without ``-H``)."""
    salt = secrets.token_bytes(12)
    digest = hashlib.sha512(password.encode() + salt).digest()
    return f"$6${base64.b64encode(salt).decode()}${base64.b64encode(digest).decode()}"

