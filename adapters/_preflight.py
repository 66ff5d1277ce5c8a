"""`xrgw validate --connect`: what a deployment would meet, checked before traffic.

Per endpoint, in order, stopping at the first failure: the name resolves (DNS), the port
answers (TCP), the TLS handshake verifies the server (and how many days its certificate
has left), the adapter logs in as `run` would (SASL, MQTT CONNACK, NATS auth, AMQP SASL:
its own `connect()` with the configured credentials, under a client id of its own so a
running gateway's session is not taken over), and the destination exists (Kafka topic,
JetStream stream). A listening endpoint (HTTP ingress) is checked by binding its address.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal
from urllib.parse import urlsplit

from gateway.ports import AdapterEndpoint, Consumer, Producer
from gateway.ports.tls import client_context
from gateway.protocols import ProtocolProfile

Outcome = Literal["ok", "warning", "error"]

#: The registered port of each URI scheme the adapters accept (IANA), for an address
#: that names none; a scheme not listed takes the port of its profile's example.
WELL_KNOWN_PORTS = {"mqtt": 1883, "tcp": 1883, "mqtts": 8883, "ssl": 8883,
                    "amqp": 5672, "amqps": 5671, "nats": 4222, "tls": 4222,
                    "http": 80, "https": 443, "kafka": 9092}

#: A certificate with fewer days left than this is a warning.
EXPIRY_WARNING_DAYS = 30


@dataclass(frozen=True)
class Finding:
    step: str  # dns, tcp, tls, auth, destination, listen
    outcome: Outcome
    message: str
    fix: str = ""


#: Checks that the destination exists, after a successful login: findings (topic, stream).
Destination = Callable[[Producer, AdapterEndpoint], Awaitable[list[Finding]]]


def addresses(prof: ProtocolProfile, endpoint: AdapterEndpoint) -> list[tuple[str, str, int]]:
    """(scheme, host, port) of every server the endpoint names."""
    uris = endpoint.uris or (("kafka://" + ",".join(endpoint.bootstrap_servers),)
                             if endpoint.bootstrap_servers else ())
    example = _port(prof.endpoint.uris.example.split(",")[0])
    out = []
    for uri in uris:
        scheme = urlsplit(uri).scheme.lower()
        rest = uri.split("://", 1)[-1]
        for server in rest.split(","):
            part = urlsplit(f"{scheme}://{server.strip()}")
            tls = prof.endpoint.uris.is_tls(scheme)
            port = _port(f"{scheme}://{server.strip()}")
            if port is None:  # 0 stays 0: a listener on any free port
                port = WELL_KNOWN_PORTS.get(scheme, example if example is not None
                                            else (443 if tls else 80))
            out.append((scheme, part.hostname or "127.0.0.1", port))
    return out


def _port(uri: str) -> int | None:
    try:
        return urlsplit(uri).port
    except ValueError:
        return None


def _tls_wanted(prof: ProtocolProfile, scheme: str, endpoint: AdapterEndpoint) -> bool:
    return prof.endpoint.uris.is_tls(scheme) or endpoint.tls is not None


def _days_left(cert: Mapping[str, object] | None) -> int | None:
    after = cert.get("notAfter") if cert else None
    if not isinstance(after, str):
        return None
    return int((ssl.cert_time_to_seconds(after) - time.time()) // 86400)


def _network(host: str, port: int, tls: ssl.SSLContext | None,
             timeout: float) -> list[Finding]:
    """DNS, TCP and (with `tls`) the handshake; blocking (run in a thread)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        return [Finding("dns", "error", f"{host}: does not resolve ({exc.strerror})",
                        "check the host name in the endpoint's uri")]
    shown = sorted({str(info[4][0]) for info in infos})
    found = [Finding("dns", "ok", f"{host} -> {', '.join(shown[:3])}")]
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        return [*found, Finding("tcp", "error", f"{host}:{port}: {why}",
                                "is the broker running, and is the port open to this pod?")]
    found.append(Finding("tcp", "ok", f"{host}:{port} accepts connections"))
    with sock:
        if tls is None:
            return found
        sock.settimeout(timeout)
        try:
            _skip_greeting(sock)
            with tls.wrap_socket(sock, server_hostname=host) as secured:
                days = _days_left(secured.getpeercert())
        except ssl.SSLCertVerificationError as exc:
            return [*found, Finding("tls", "error",
                                    f"{host}:{port}: the server's certificate does not "
                                    f"verify: {exc.verify_message}",
                                    "set tls.ca_file to the CA that signed the broker's "
                                    "certificate, and check the host name in the uri")]
        except (ssl.SSLError, OSError) as exc:
            return [*found, Finding("tls", "error", f"{host}:{port}: TLS handshake failed: "
                                    f"{getattr(exc, 'reason', None) or exc}",
                                    "check that the port speaks TLS and the tls settings")]
    if days is None:
        return [*found, Finding("tls", "ok", "handshake verified")]
    if days < EXPIRY_WARNING_DAYS:
        return [*found, Finding("tls", "warning",
                                f"the server's certificate expires in {days} day(s)",
                                "renew the broker's certificate")]
    return [*found, Finding("tls", "ok",
                            f"handshake verified; the certificate expires in {days} days")]


def _skip_greeting(sock: socket.socket) -> None:
    """A server that speaks first in clear text before TLS (NATS's INFO line): read it."""
    sock.settimeout(0.5)
    try:
        first = sock.recv(5, socket.MSG_PEEK)
    except (TimeoutError, BlockingIOError):
        first = b""
    finally:
        sock.settimeout(5)
    if first.startswith(b"INFO"):
        line = b""
        while not line.endswith(b"\r\n"):
            chunk = sock.recv(1)
            if not chunk:
                break
            line += chunk


def _listen(host: str, port: int) -> Finding:
    try:
        with socket.create_server((host, port)):
            pass
    except OSError as exc:
        return Finding("listen", "error", f"cannot listen on {host}:{port}: "
                       f"{exc.strerror or exc}",
                       "use a free port and an address of this host")
    return Finding("listen", "ok", f"{host}:{port} can be listened on")


async def preflight(prof: ProtocolProfile, endpoint: AdapterEndpoint, *, listens: bool,
                    make: Callable[[AdapterEndpoint], Producer | Consumer],
                    destination: Destination | None, timeout: float) -> list[Finding]:
    """The findings for one endpoint; stops at the first error. Never raises: whatever
    goes wrong is a finding."""
    try:
        return await _preflight(prof, endpoint, listens=listens, make=make,
                                destination=destination, timeout=timeout)
    except Exception as exc:
        return [Finding("check", "error", f"the check failed: {why(exc)}")]


async def _preflight(prof: ProtocolProfile, endpoint: AdapterEndpoint, *, listens: bool,
                     make: Callable[[AdapterEndpoint], Producer | Consumer],
                     destination: Destination | None, timeout: float) -> list[Finding]:
    findings: list[Finding] = []
    for scheme, host, port in addresses(prof, endpoint):
        if listens:
            findings.append(await asyncio.to_thread(_listen, host, port))
            continue
        try:
            context = client_context(endpoint.tls) if _tls_wanted(
                prof, scheme, endpoint) else None
        except ValueError as exc:
            return [*findings, Finding("tls", "error", str(exc))]
        findings += await asyncio.to_thread(_network, host, port, context, timeout)
        if any(f.outcome == "error" for f in findings):
            return findings
    if listens:
        return findings
    probe = replace(endpoint, client_id=f"xrgw-validate-{uuid.uuid4().hex[:10]}")
    try:
        client = make(probe)
    except ValueError as exc:
        return [*findings, Finding("auth", "error", str(exc))]
    try:
        try:
            # The adapter bounds its own connect (its connect_timeout) and then says why
            # (NATS: the server's "authorization violation"); this only guards a hang.
            async with asyncio.timeout(max(timeout, 30.0) + 30.0):
                await client.connect()
        except Exception as exc:  # NotConnected with the broker's reason; a timeout
            return [*findings, Finding("auth", "error", f"cannot log in: {why(exc)}",
                                       "check the user name, password or key files, and "
                                       "the broker's permissions for this user")]
        who = f" as {endpoint.username}" if endpoint.username else ""
        findings.append(Finding("auth", "ok", f"connected and logged in{who}"))
        if destination is not None and isinstance(client, Producer):
            findings += await destination(client, endpoint)
    finally:
        with contextlib.suppress(Exception):  # closing a probe is best effort
            await client.aclose()
    return findings


def listed(value: object) -> list[object]:
    return list(value) if isinstance(value, list) else [value] if value else []


def why(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def worst(findings: Sequence[Finding]) -> Outcome:
    outcomes = {f.outcome for f in findings}
    return "error" if "error" in outcomes else "warning" if "warning" in outcomes else "ok"


__all__ = ["EXPIRY_WARNING_DAYS", "Destination", "Finding", "addresses", "listed", "preflight",
           "why", "worst"]
