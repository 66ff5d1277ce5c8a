"""What an adapter is built from: where and how to connect, filled by the config layer."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class TlsSettings:
    """TLS files (PEM) and the test-only switch that skips server verification; the
    config layer resolves the paths (`endpoints.<id>.tls`), what each protocol does with
    them is in `gateway/ports/tls.py`. Paths only: nothing secret."""

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    insecure: bool = False


@dataclass(frozen=True)
class EndpointSettings:
    """Where and how to connect; filled by the adapter factory from the configuration.

    `options` holds the protocol-specific settings (topic filters, QoS, group, ...) that
    each adapter documents and reads itself; unknown keys are the config layer's problem.
    """

    uri: str
    username: str | None = None
    password: str | None = None  # or a token (NATS, HTTP bearer); never in repr or logs
    client_id: str | None = None
    options: Mapping[str, object] = field(default_factory=dict)
    tls: TlsSettings | None = None

    def __repr__(self) -> str:
        # Hand-written: the password, and a password inside the URI, must not print.
        password = None if self.password is None else "***"
        return (f"EndpointSettings(uri={_redact_uri(self.uri)!r}, username={self.username!r}, "
                f"password={password!r}, client_id={self.client_id!r}, "
                f"options={dict(self.options)!r}, tls={self.tls!r})")


def _redact_uri(uri: str) -> str:
    """`scheme://user:secret@host` -> `scheme://user:***@host` (every address of a list)."""
    return re.sub(r"(://[^:/@,\s]*):[^@/,\s]*@", r"\1:***@", uri)
