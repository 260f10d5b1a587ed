"""The cluster's PKI, made with `cryptography`: one CA, a certificate per component, the service-account key.

What kubeadm makes, cut to one node: the apiserver's serving certificate names every address a client may use
(loopback, the node's address, the `kubernetes` Service's ClusterIP and its DNS names); clients authenticate with
certificates whose subject is their Kubernetes identity (CN = user, O = groups); the front-proxy CA signs the
client the apiserver's aggregator presents to extension API servers (the custom metrics API).
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from common import atomic

_VALIDITY = datetime.timedelta(days=365)
_Address = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class Identity:
    """Who a certificate says its holder is, and what it may be used for."""

    name: str  # file stem: NAME.crt, NAME.key
    common_name: str
    organizations: tuple[str, ...] = ()
    client: bool = True
    server: bool = False
    dns_names: tuple[str, ...] = ()
    addresses: tuple[_Address, ...] = ()


@dataclass(frozen=True)
class Issued:
    certificate: Path
    key: Path


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _name(common_name: str, organizations: tuple[str, ...] = ()) -> x509.Name:
    parts = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in organizations]
    return x509.Name([*parts, x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write_pair(folder: Path, stem: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> Issued:
    cert_path, key_path = folder / f"{stem}.crt", folder / f"{stem}.key"
    atomic.write_bytes(cert_path, cert.public_bytes(serialization.Encoding.PEM))
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    atomic.write_bytes(key_path, pem, mode=0o600)
    return Issued(cert_path, key_path)


class Authority:
    """A CA kept in memory while it signs, written beside what it signed."""

    def __init__(self, folder: Path, stem: str, common_name: str) -> None:
        self.folder = folder
        self._key = _key()
        now = datetime.datetime.now(datetime.UTC)
        subject = _name(common_name)
        self._subject = subject
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + 10 * _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self._key.public_key()), critical=False)
            .sign(self._key, hashes.SHA256())
        )
        self.issued = _write_pair(folder, stem, self._cert, self._key)

    def issue(self, who: Identity) -> Issued:
        key = _key()
        now = datetime.datetime.now(datetime.UTC)
        usages = [ExtendedKeyUsageOID.CLIENT_AUTH] if who.client else []
        usages += [ExtendedKeyUsageOID.SERVER_AUTH] if who.server else []
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(who.common_name, who.organizations))
            .issuer_name(self._subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()), critical=False)
        )
        if who.dns_names or who.addresses:
            names: list[x509.GeneralName] = [x509.DNSName(name) for name in who.dns_names]
            names += [x509.IPAddress(address) for address in who.addresses]
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        return _write_pair(self.folder, who.name, builder.sign(self._key, hashes.SHA256()), key)


def write_service_account_key(folder: Path) -> tuple[Path, Path]:
    """The key pair the controller-manager signs service-account tokens with and the apiserver checks them by."""
    key = _key()
    private = folder / "sa.key"
    public = folder / "sa.pub"
    atomic.write_bytes(
        private,
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()),
        mode=0o600,
    )
    atomic.write_bytes(
        public,
        key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo),
    )
    return private, public
