"""Throw-away TLS material for the integration tests (the `cryptography` package).

`make_pki(directory)` writes, all PEM:

* ``ca.pem`` / ``ca.key``           the test CA that signs everything below;
* ``server.pem`` / ``server.key``   a server certificate for ``127.0.0.1`` and
                                    ``localhost`` (SAN IP + DNS), serverAuth;
* ``client.pem`` / ``client.key``   a client certificate (CN ``xrgw-client``), clientAuth;
* ``wrong-ca.pem`` / ``wrong-ca.key``  an unrelated CA: trusting it must fail;
* ``wrong-client.pem`` / ``wrong-client.key``  a client certificate signed by the wrong
                                    CA: a server that trusts only ``ca.pem`` refuses it.

Keys are unencrypted EC P-256 (fast to make, accepted by OpenSSL-based servers: Mosquitto,
nats-server, RabbitMQ/Erlang, Tansu/rustls and Python). Certificates are valid from one
hour ago for two days.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["Pki", "make_pki"]


@dataclass(frozen=True)
class Pki:
    directory: Path
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    wrong_ca: Path
    wrong_client_cert: Path
    wrong_client_key: Path


Key = ec.EllipticCurvePrivateKey


def _key() -> Key:
    return ec.generate_private_key(ec.SECP256R1())


def _name(common_name: str) -> x509.Name:
    return x509.Name([
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "xrgw tests"),
        x509.NameAttribute(NameOID.COMMON_NAME, common_name),
    ])


def _builder(subject: x509.Name, issuer: x509.Name, key: Key) -> x509.CertificateBuilder:
    now = dt.datetime.now(dt.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(days=2))
    )


def _ca(common_name: str) -> tuple[x509.Certificate, Key]:
    key = _key()
    name = _name(common_name)
    cert = (
        _builder(name, name, key)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True,
                crl_sign=True, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _leaf(
    common_name: str, ca: tuple[x509.Certificate, Key], *, server: bool
) -> tuple[x509.Certificate, Key]:
    ca_cert, ca_key = ca
    key = _key()
    builder = (
        _builder(_name(common_name), ca_cert.subject, key)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=True, key_cert_sign=False,
                crl_sign=False, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
    )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([
                x509.DNSName("localhost"),
                x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
            ]),
            critical=False,
        )
    return builder.sign(ca_key, hashes.SHA256()), key


def _write(directory: Path, stem: str, pair: tuple[x509.Certificate, Key]) -> tuple[Path, Path]:
    cert, key = pair
    cert_path = directory / f"{stem}.pem"
    key_path = directory / f"{stem}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            # PKCS#8 ("BEGIN PRIVATE KEY"): the one form every server above reads.
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    key_path.chmod(0o600)
    return cert_path, key_path


def make_pki(directory: Path) -> Pki:
    directory.mkdir(parents=True, exist_ok=True)
    ca = _ca("xrgw test CA")
    wrong = _ca("xrgw wrong CA")
    ca_path, _ = _write(directory, "ca", ca)
    wrong_path, _ = _write(directory, "wrong-ca", wrong)
    server_cert, server_key = _write(directory, "server", _leaf("127.0.0.1", ca, server=True))
    client_cert, client_key = _write(directory, "client", _leaf("xrgw-client", ca, server=False))
    wrong_cert, wrong_key = _write(
        directory, "wrong-client", _leaf("xrgw-intruder", wrong, server=False)
    )
    return Pki(directory, ca_path, server_cert, server_key, client_cert, client_key,
               wrong_path, wrong_cert, wrong_key)
