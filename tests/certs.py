"""Throwaway certificates for TLS tests: a CA, a server certificate for 127.0.0.1, a client certificate, and an
unrelated second CA; and a python3-etcd3 client that connects with them."""

from __future__ import annotations

import datetime
import ipaddress
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

import etcd3
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from etcd_users.local import ClusterTLS


@dataclass(frozen=True)
class Certs:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path  # signs nothing the servers present: the wrong CA

    def cluster_tls(self, client_cert_auth: bool = False) -> ClusterTLS:
        return ClusterTLS(
            cert_file=self.server_cert,
            key_file=self.server_key,
            ca_file=self.ca,
            client_cert_auth=client_cert_auth,
            client_cert_file=self.client_cert,
            client_key_file=self.client_key,
        )


def make_certs(directory: Path) -> Certs:
    """Write the PEM files into ``directory`` (EC P-256 keys: quick to make)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, ca_cert = _self_signed_ca("locust-etcd test CA")
    _, other_ca_cert = _self_signed_ca("unrelated test CA")
    server_key, server_cert = _leaf(
        ca_key,
        ca_cert,
        "127.0.0.1",
        [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")],
        # etcd's own gateway dials its client port with the server certificate, so it is a client one too
        [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH],
    )
    client_key, client_cert = _leaf(ca_key, ca_cert, "locust-client", [], [ExtendedKeyUsageOID.CLIENT_AUTH])
    certs = Certs(
        ca=directory / "ca.pem",
        server_cert=directory / "server.pem",
        server_key=directory / "server-key.pem",
        client_cert=directory / "client.pem",
        client_key=directory / "client-key.pem",
        other_ca=directory / "other-ca.pem",
    )
    _write_cert(certs.ca, ca_cert)
    _write_cert(certs.other_ca, other_ca_cert)
    _write_cert(certs.server_cert, server_cert)
    _write_key(certs.server_key, server_key)
    _write_cert(certs.client_cert, client_cert)
    _write_key(certs.client_key, client_key)
    return certs


def etcd_client(
    endpoint: str,
    certs: Certs | None = None,
    *,
    client_cert: bool = False,
    user: str | None = None,
    password: str | None = None,
) -> etcd3.Etcd3Client:
    """A python3-etcd3 client of ``endpoint``; https endpoints need ``certs``."""
    address = urllib.parse.urlsplit(endpoint)
    tls = {}
    if address.scheme == "https":
        tls["ca_cert"] = str(certs.ca)
        if client_cert:
            tls.update(cert_cert=str(certs.client_cert), cert_key=str(certs.client_key))
    return etcd3.client(address.hostname, address.port, timeout=10, user=user, password=password, **tls)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _validity(builder: x509.CertificateBuilder) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.timezone.utc)
    return builder.not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=7))


def _self_signed_ca(common_name: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(_name(common_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
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
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    )
    return key, _validity(builder).sign(key, hashes.SHA256())


def _leaf(
    ca_key: ec.EllipticCurvePrivateKey,
    ca_cert: x509.Certificate,
    common_name: str,
    alt_names: list[x509.GeneralName],
    usages: list[x509.ObjectIdentifier],
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_cert.public_key()),
            critical=False,
        )
    )
    if alt_names:
        builder = builder.add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
    return key, _validity(builder).sign(ca_key, hashes.SHA256())


def _write_cert(path: Path, cert: x509.Certificate) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    path.chmod(0o600)
