"""The cluster's PKI: each certificate verifies against its CA and says who its holder is to Kubernetes."""

from __future__ import annotations

from ipaddress import IPv4Address, ip_address
from pathlib import Path

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from miniclusters.localkube import cluster
from miniclusters.localkube.layout import Layout


def _load(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_identities_and_chain(tmp_path: Path) -> None:
    layout = Layout(
        cache=tmp_path, state=tmp_path / "s", run=tmp_path / "r", node_name="n1", node_address=IPv4Address("192.0.2.7")
    )
    cluster.write_pki(layout)
    ca = _load(layout.pki / "ca.crt")
    server = _load(layout.pki / "apiserver.crt")
    server.verify_directly_issued_by(ca)
    names = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ip_address("192.0.2.7") in names.get_values_for_type(x509.IPAddress)
    assert ip_address("10.96.0.1") in names.get_values_for_type(x509.IPAddress)
    assert "kubernetes.default.svc.cluster.local" in names.get_values_for_type(x509.DNSName)
    usage = server.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.SERVER_AUTH in usage

    kubelet = _load(layout.pki / "kubelet-client.crt")
    kubelet.verify_directly_issued_by(ca)
    assert kubelet.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "system:node:n1"
    assert kubelet.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value == "system:nodes"

    front = _load(layout.pki / "front-proxy-client.crt")
    front.verify_directly_issued_by(_load(layout.pki / "front-proxy-ca.crt"))
    assert (layout.pki / "sa.key").stat().st_mode & 0o077 == 0
    assert (layout.pki / "admin.key").stat().st_mode & 0o077 == 0
