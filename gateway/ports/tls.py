"""TLS contexts and TLS error wording shared by the adapters.

One rule for every protocol: the connection is encrypted when the URI scheme says so
(`mqtts://` or `ssl://`, `amqps://`, `tls://` for NATS, `https://`: each profile's
`UriSchemes.tls`) *or* a `tls` block is configured
(Kafka has no scheme of its own; for the others a `tls` block next to `mqtt://` still
means TLS, on the port given). Whoever asked for TLS gets TLS or no connection, never
clear text. The `tls` block (`TlsSettings`) says *how*: the CA bundle that verifies the
peer (default: the system trust store), a client certificate and key for mutual TLS,
and `insecure` to skip verification (tests only).

Errors name the file and what is wrong with it, never its content; a failed handshake is
described by `describe()` in words an operator can act on ("certificate verify failed:
unable to get local issuer certificate" -> check `tls.ca_file`).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl

from gateway.ports import TlsSettings
from gateway.protocols import UriSchemes

__all__ = ["client_context", "describe", "describe_text", "probe", "server_context",
           "wants_tls"]


def wants_tls(scheme: str, uris: UriSchemes, tls: TlsSettings | None) -> bool:
    """Whether to encrypt: a TLS scheme of the protocol (`UriSchemes.tls`), or any `tls`
    settings."""
    return uris.is_tls(scheme) or tls is not None


def _load_chain(context: ssl.SSLContext, cert_file: str | None, key_file: str | None) -> None:
    if not cert_file:
        if key_file:
            raise ValueError("tls.key_file is given without tls.cert_file")
        return
    try:
        context.load_cert_chain(cert_file, key_file or None)
    except FileNotFoundError as exc:
        raise ValueError(f"tls: cannot read '{exc.filename}': no such file") from None
    except (ssl.SSLError, OSError) as exc:
        raise ValueError(
            f"tls: cannot load the certificate '{cert_file}' with key "
            f"'{key_file or cert_file}': {_reason(exc)}"
        ) from None


def client_context(tls: TlsSettings | None) -> ssl.SSLContext:
    """A verifying client context (system CAs unless `ca_file`), with the client
    certificate when given. Raises ValueError naming a file that cannot be used."""
    tls = tls or TlsSettings()
    try:
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=tls.ca_file)
    except FileNotFoundError:
        raise ValueError(f"tls.ca_file: cannot read '{tls.ca_file}': no such file") from None
    except (ssl.SSLError, OSError) as exc:
        raise ValueError(f"tls.ca_file: '{tls.ca_file}' is not a PEM CA bundle: "
                         f"{_reason(exc)}") from None
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    _load_chain(context, tls.cert_file, tls.key_file)
    if tls.insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def server_context(tls: TlsSettings | None) -> ssl.SSLContext:
    """A server context with `cert_file`/`key_file`; with `ca_file`, clients must present
    a certificate signed by it (mutual TLS)."""
    if tls is None or not tls.cert_file:
        raise ValueError("tls.cert_file: a TLS listener needs a server certificate "
                         "(tls: {cert_file: ..., key_file: ...})")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    _load_chain(context, tls.cert_file, tls.key_file)
    if tls.ca_file:
        try:
            context.load_verify_locations(cafile=tls.ca_file)
        except FileNotFoundError:
            raise ValueError(f"tls.ca_file: cannot read '{tls.ca_file}': no such file") from None
        except (ssl.SSLError, OSError) as exc:
            raise ValueError(f"tls.ca_file: '{tls.ca_file}' is not a PEM CA bundle: "
                             f"{_reason(exc)}") from None
        context.verify_mode = ssl.CERT_REQUIRED
    return context


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLError) and exc.reason:
        return str(exc.reason).lower().replace("_", " ")
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return type(exc).__name__


def describe(exc: BaseException) -> str:
    """One line for a failed TLS handshake (or any connect error), with a hint."""
    text = str(exc)
    if isinstance(exc, ssl.SSLCertVerificationError):
        detail = exc.verify_message or text
        hint = ("check tls.ca_file (the CA that signed the server certificate)"
                if "issuer" in detail or "self-signed" in detail or "self signed" in detail
                else "check the host name in the uri and the server certificate")
        return f"TLS: server certificate rejected: {detail}; {hint}"
    if _client_cert_refused(text):
        return (f"TLS: the server refused the client certificate ({_short(exc)}); check "
                "tls.cert_file/tls.key_file and that the server trusts their CA")
    if isinstance(exc, ssl.SSLError):
        return f"TLS handshake failed: {_short(exc)}"
    return text or type(exc).__name__


def describe_text(text: str) -> str:
    """The same for an error a library only reports as text (e.g. paho's log)."""
    if _client_cert_refused(text):
        return (f"TLS: the server refused the client certificate ({text}); check "
                "tls.cert_file/tls.key_file and that the server trusts their CA")
    return text


def _client_cert_refused(text: str) -> bool:
    # TLS alerts a server sends about *our* certificate (TLS 1.3 sends them after the
    # client considers the handshake done, so they surface on the first read).
    lowered = text.lower().replace("_", " ")
    return any(alert in lowered for alert in (
        "certificate required", "unknown ca", "bad certificate", "certificate unknown",
        "alert certificate"))


async def probe(host: str, port: int, context: ssl.SSLContext, timeout: float) -> str | None:
    """Why a TLS handshake with host:port fails (None when it succeeds): for clients
    that log a failed handshake but report only "cannot connect"."""
    try:
        async with asyncio.timeout(timeout):
            reader, writer = await asyncio.open_connection(host, port, ssl=context,
                                                           server_hostname=host)
    except (ssl.SSLError, ssl.CertificateError) as exc:
        return describe(exc)
    except (OSError, TimeoutError):
        return None
    try:
        # TLS 1.3: a server refuses our certificate only after our side is done; its
        # alert arrives on the first read. A server that accepted us stays silent.
        async with asyncio.timeout(0.5):
            if await reader.read(1) == b"":
                return ("TLS: the server closed the connection right after the handshake "
                        "(does it require a client certificate? check tls.cert_file/"
                        "tls.key_file and that the server trusts their CA)")
    except ssl.SSLError as exc:
        return describe(exc)
    except (OSError, TimeoutError):
        pass
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()
    return None


def _short(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLError) and exc.reason:
        return str(exc.reason)
    return str(exc) or type(exc).__name__
