"""Certificates made per run for secured test clusters and loopback TLS servers (never committed).

A private CA signs a server certificate (the names given, as DNS or IP SANs) and, for mutual
TLS, client certificates whose subject DN becomes the Kafka principal (``User:CN=...``). All of
it is PEM, which Kafka 4.4 reads natively (``ssl.keystore.type=PEM``), as do librdkafka,
kafka-python and Python's ``ssl``; so no keytool, no JKS and no store passwords. The
``cryptography`` package (already an Airflow dependency) makes them in a few milliseconds.
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

__all__ = ["CertificateAuthority", "IssuedCert"]


@dataclass(frozen=True)
class IssuedCert:
    """One key pair on disk: ``cert`` (PEM chain: leaf then CA), ``key`` (PKCS#8 PEM), ``bundle`` (both)."""

    cert: Path
    key: Path
    bundle: Path
    subject: str  # RFC 2253 DN, as Kafka names the principal: User:<subject>


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


class CertificateAuthority:
    """A throwaway CA in ``directory`` (``ca.pem``): signs server and client certificates."""

    def __init__(self, directory: Path, *, name: str = "kafka-eos test CA") -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._key = ec.generate_private_key(ec.SECP256R1())
        self._name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = dt.datetime.now(dt.timezone.utc)
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(self._name)
            .issuer_name(self._name)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(self._key, hashes.SHA256())
        )
        self.ca_file = self.directory / "ca.pem"
        self.ca_file.write_bytes(self._cert.public_bytes(serialization.Encoding.PEM))

    def issue(
        self,
        stem: str,
        *,
        common_name: str,
        names: tuple[str, ...] = (),
        client: bool = False,
        organization: str | None = None,
        valid_days: float = 2.0,
        not_before_days: float = -0.01,
    ) -> IssuedCert:
        """A leaf certificate: ``names`` as SANs (IP addresses as IP SANs); ``client`` for mTLS."""
        key = ec.generate_private_key(ec.SECP256R1())
        attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
        if organization:
            attrs.insert(0, x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
        subject = x509.Name(attrs)
        now = dt.datetime.now(dt.timezone.utc)
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self._name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now + dt.timedelta(days=not_before_days))
            .not_valid_after(now + dt.timedelta(days=valid_days))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.CLIENT_AUTH]
                    if client
                    else [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
        )
        if names:
            sans: list[x509.GeneralName] = []
            for name in names:
                try:
                    sans.append(x509.IPAddress(ipaddress.ip_address(name)))
                except ValueError:
                    sans.append(x509.DNSName(name))
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        chain = cert.public_bytes(serialization.Encoding.PEM) + self._cert.public_bytes(
            serialization.Encoding.PEM
        )
        paths = IssuedCert(
            cert=self.directory / f"{stem}.pem",
            key=self.directory / f"{stem}.key",
            bundle=self.directory / f"{stem}.bundle.pem",
            subject=subject.rfc4514_string(),
        )
        paths.cert.write_bytes(chain)
        paths.key.write_bytes(_key_pem(key))
        paths.key.chmod(0o600)
        paths.bundle.write_bytes(_key_pem(key) + chain)
        paths.bundle.chmod(0o600)
        return paths
