"""Local TLS material for the secured stacks: a CA, a server certificate and a client certificate.

Everything is made with the ``openssl`` CLI (no network, no Python crypto dependency) into one
directory, once; later calls reuse it. The API, for every stack that serves TLS (the secured
single node, the 3-broker Kafka cluster, the TLS Redis Cluster)::

    from agentledger.stack.certs import ensure_certificates, kafka_ssl_properties, redis_tls_conf

    certs = ensure_certificates(paths.root / "certs")   # idempotent; safe to call every start
    certs.ca_cert        # ca.pem: what clients trust (AGENTLEDGER_KAFKA_SSL_CAFILE,
                         #         AGENTLEDGER_REDIS_SSL_CAFILE)
    certs.server_cert    # server.pem + certs.server_key (server.key, unencrypted PKCS#8):
                         #         SAN IP:127.0.0.1 and DNS:localhost, serverAuth + clientAuth, so
                         #         every broker (or Redis node) on loopback can present it, also
                         #         as the client side of inter-broker / replica links
    certs.server_keystore   # server.p12: the same key + chain as PKCS#12 for the JVM,
                            # password certs.keystore_password (also in keystore.password)
    certs.client_cert    # client.pem + certs.client_key: a client certificate (CN=agentledger)
                         #         for mTLS (AGENTLEDGER_KAFKA_SSL_CERTFILE / _KEYFILE)

    kafka_ssl_properties(certs, client_auth="required")   # broker ssl.* server.properties keys
    redis_tls_conf(certs, port, auth_clients=False)       # redis.conf lines for a tls-port

A broker's inter-broker/controller links use the same properties: the truststore is the CA
(PEM), the keystore is ``server.p12``. One certificate for every node is enough because every
node listens on 127.0.0.1; the SAN is what hostname verification checks.

The directory holds private keys: it is created 0700 and each key 0600. A second call with the
same directory returns the same certificates (so a broker restarted later still trusts its
clients); a different directory means a different CA (which is how tests make a "wrong CA").
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from agentledger.errors import StackError

DEFAULT_HOSTS: tuple[str, ...] = ("127.0.0.1", "localhost")
CA_DAYS = 3650
LEAF_DAYS = 825
KEY_BITS = 2048
OPENSSL_TIMEOUT_S = 60.0
CLIENT_CN = "agentledger"

_FILES = (
    "ca.pem",
    "ca.key",
    "server.pem",
    "server.key",
    "server.p12",
    "client.pem",
    "client.key",
    "keystore.password",
)


@dataclass(frozen=True)
class Certificates:
    """The files of one local CA and the two certificates it signed (see the module docstring)."""

    directory: Path

    @property
    def ca_cert(self) -> Path:
        """The CA certificate (PEM): the file every client and server trusts."""
        return self.directory / "ca.pem"

    @property
    def ca_key(self) -> Path:
        """The CA's private key (PEM); nothing but this module needs it."""
        return self.directory / "ca.key"

    @property
    def server_cert(self) -> Path:
        """The server certificate followed by the CA (PEM chain); SAN 127.0.0.1 and localhost."""
        return self.directory / "server.pem"

    @property
    def server_key(self) -> Path:
        """The server's private key (PEM, PKCS#8, unencrypted)."""
        return self.directory / "server.key"

    @property
    def server_keystore(self) -> Path:
        """Server key + chain as PKCS#12 (password :attr:`keystore_password`), for the JVM."""
        return self.directory / "server.p12"

    @property
    def client_cert(self) -> Path:
        """A client certificate (PEM, CN=agentledger) for mTLS."""
        return self.directory / "client.pem"

    @property
    def client_key(self) -> Path:
        """The client certificate's private key (PEM, PKCS#8, unencrypted)."""
        return self.directory / "client.key"

    @property
    def keystore_password_file(self) -> Path:
        """The file holding :attr:`keystore_password` (0600)."""
        return self.directory / "keystore.password"

    @property
    def keystore_password(self) -> str:
        """The password of :attr:`server_keystore` (random, made with the keystore)."""
        return self.keystore_password_file.read_text().strip()

    def complete(self) -> bool:
        """Whether every file exists (a half-made directory is remade from scratch)."""
        return all((self.directory / name).is_file() for name in _FILES)


def ensure_certificates(directory: Path, *, hosts: tuple[str, ...] = DEFAULT_HOSTS) -> Certificates:
    """The certificates in ``directory``, made there first when any file is missing.

    ``hosts`` are the server certificate's subject alternative names (IP addresses or DNS
    names); they only matter when the certificates are made. Raises StackError when openssl is
    missing or fails.
    """
    certs = Certificates(directory)
    if certs.complete():
        return certs
    if shutil.which("openssl") is None:
        msg = "making TLS certificates needs the openssl CLI: run `apt-get install -y openssl`"
        raise StackError(msg)
    directory.parent.mkdir(parents=True, exist_ok=True)
    # Made in a sibling temporary directory and renamed into place: a crash half-way never
    # leaves a CA without the certificates it signed (or the reverse).
    work = Path(tempfile.mkdtemp(prefix=".certs-", dir=directory.parent))
    try:
        _make_all(work, hosts)
        if directory.exists():
            shutil.rmtree(directory)
        work.rename(directory)
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
    return certs


def kafka_ssl_properties(
    certs: Certificates, *, client_auth: Literal["required", "requested", "none"] = "none"
) -> dict[str, str]:
    """The broker's ``ssl.*`` server.properties keys for listeners using these certificates.

    ``client_auth="required"`` makes every SSL listener demand a client certificate signed by
    the CA (mTLS); set it per listener with ``listener.name.<name>.ssl.client.auth`` instead
    when only one listener should. Hostname verification of brokers stays on (the default
    ``https``): the SAN covers 127.0.0.1 and localhost.
    """
    return {
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(certs.server_keystore),
        "ssl.keystore.password": certs.keystore_password,
        "ssl.key.password": certs.keystore_password,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs.ca_cert),
        "ssl.client.auth": client_auth,
    }


def redis_tls_conf(certs: Certificates, port: int, *, auth_clients: bool = False) -> str:
    """redis.conf lines serving TLS on ``port`` with these certificates.

    ``auth_clients=False`` lets clients connect without a certificate (they still verify the
    server against the CA, and log in with an ACL user); ``True`` demands a CA-signed one.
    Replication and cluster-bus links use TLS too (``tls-replication``, ``tls-cluster``), and
    the server certificate also carries clientAuth for them.
    """
    return (
        f"tls-port {port}\n"
        f'tls-cert-file "{certs.server_cert}"\n'
        f'tls-key-file "{certs.server_key}"\n'
        f'tls-ca-cert-file "{certs.ca_cert}"\n'
        f"tls-auth-clients {'yes' if auth_clients else 'no'}\n"
        "tls-replication yes\n"
        "tls-cluster yes\n"
    )


def _openssl(*args: str, cwd: Path) -> None:
    """Run one openssl command in ``cwd``; its output is shown only when it fails."""
    try:
        done = subprocess.run(
            ["openssl", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=OPENSSL_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        msg = f"openssl {args[0]} failed: {type(e).__name__}: {e}"
        raise StackError(msg) from e
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        msg = f"openssl {' '.join(args[:2])} failed in {cwd}: " + " | ".join(detail)
        raise StackError(msg)


def _san(hosts: tuple[str, ...]) -> str:
    entries = []
    for host in hosts:
        kind = "IP" if host.replace(".", "").isdigit() or ":" in host else "DNS"
        entries.append(f"{kind}:{host}")
    return ",".join(entries)


def _make_all(work: Path, hosts: tuple[str, ...]) -> None:
    """Make every file of a :class:`Certificates` directory in ``work``."""
    work.chmod(0o700)
    _openssl(
        "req", "-x509", "-newkey", f"rsa:{KEY_BITS}", "-nodes", "-sha256",
        "-days", str(CA_DAYS), "-keyout", "ca.key", "-out", "ca.pem",
        "-subj", "/CN=agentledger local CA",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        cwd=work,
    )  # fmt: skip
    _leaf(work, "server", f"/CN={hosts[0]}", _san(hosts), "serverAuth,clientAuth")
    _leaf(work, "client", f"/CN={CLIENT_CN}", None, "clientAuth")
    # The server file is the chain (leaf, then CA), as Redis and the JVM keystore expect.
    chain = (work / "server.pem").read_text() + (work / "ca.pem").read_text()
    (work / "server.pem").write_text(chain)
    password = secrets.token_urlsafe(18)
    password_file = work / "keystore.password"
    password_file.write_text(password + "\n")
    _openssl(
        "pkcs12", "-export", "-in", "server.pem", "-inkey", "server.key",
        "-name", "server", "-out", "server.p12", "-passout", f"file:{password_file}",
        cwd=work,
    )  # fmt: skip
    for name in ("ca.key", "server.key", "client.key", "server.p12", "keystore.password"):
        os.chmod(work / name, 0o600)
    (work / "ca.srl").unlink(missing_ok=True)


def _leaf(work: Path, name: str, subject: str, san: str | None, usage: str) -> None:
    """Make ``name``.key and ``name``.pem signed by the CA in ``work``."""
    _openssl(
        "req", "-newkey", f"rsa:{KEY_BITS}", "-nodes", "-sha256",
        "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject,
        cwd=work,
    )  # fmt: skip
    ext = work / f"{name}.ext"
    lines = [
        "basicConstraints=critical,CA:FALSE",
        "keyUsage=critical,digitalSignature,keyEncipherment",
        f"extendedKeyUsage={usage}",
    ]
    if san:
        lines.append(f"subjectAltName={san}")
    ext.write_text("\n".join(lines) + "\n")
    _openssl(
        "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-sha256", "-days", str(LEAF_DAYS),
        "-extfile", ext.name, "-out", f"{name}.pem",
        cwd=work,
    )  # fmt: skip
    (work / f"{name}.csr").unlink()
    ext.unlink()
