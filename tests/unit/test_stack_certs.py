"""The local CA and certificates of stack.certs: real openssl, real TLS handshakes on loopback."""

from __future__ import annotations

import asyncio
import ssl
import stat
from pathlib import Path

import pytest

from agentledger.stack.certs import (
    Certificates,
    ensure_certificates,
    kafka_ssl_properties,
    redis_tls_conf,
)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    """One certificate set for the module (making keys costs a fraction of a second each)."""
    return ensure_certificates(tmp_path_factory.mktemp("tls") / "certs")


async def _handshake(server: ssl.SSLContext, client: ssl.SSLContext, host: str) -> str:
    """Serve TLS on a free loopback port, connect as ``host`` and return what the server read."""
    got: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            got.set_result((await reader.readline()).decode().strip())
        except (ssl.SSLError, ConnectionError) as e:
            got.set_exception(e)
        finally:
            writer.close()

    srv = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=server)
    port = srv.sockets[0].getsockname()[1]
    try:
        _, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=client, server_hostname=host
        )
        writer.write(b"hello\n")
        await writer.drain()
        async with asyncio.timeout(10):
            result = await got
        writer.close()
        return result
    finally:
        srv.close()


def _server_context(certs: Certificates, *, require_client: bool) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(certs.ca_cert))
    ctx.load_cert_chain(str(certs.server_cert), str(certs.server_key))
    ctx.verify_mode = ssl.CERT_REQUIRED if require_client else ssl.CERT_NONE
    return ctx


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
async def test_server_certificate_verifies_for_loopback_names(
    certs: Certificates, host: str
) -> None:
    """A client trusting only ca.pem verifies the server certificate as 127.0.0.1 and localhost."""
    client = ssl.create_default_context(cafile=str(certs.ca_cert))
    assert await _handshake(_server_context(certs, require_client=False), client, host) == "hello"


async def test_client_certificate_passes_mutual_tls(certs: Certificates) -> None:
    """A server demanding a CA-signed client certificate accepts client.pem/client.key."""
    client = ssl.create_default_context(cafile=str(certs.ca_cert))
    client.load_cert_chain(str(certs.client_cert), str(certs.client_key))
    server = _server_context(certs, require_client=True)
    assert await _handshake(server, client, "127.0.0.1") == "hello"


async def test_another_directory_is_another_ca(certs: Certificates, tmp_path: Path) -> None:
    """Certificates made in another directory have another CA: trusting it fails the handshake."""
    other = ensure_certificates(tmp_path / "other")
    client = ssl.create_default_context(cafile=str(other.ca_cert))
    with pytest.raises(ssl.SSLCertVerificationError):
        await _handshake(_server_context(certs, require_client=False), client, "127.0.0.1")


def test_second_call_reuses_the_same_ca(certs: Certificates) -> None:
    """Calling ensure_certificates again on a complete directory keeps every file as it was."""
    before = {p.name: p.read_bytes() for p in certs.directory.iterdir()}
    again = ensure_certificates(certs.directory)
    assert {p.name: p.read_bytes() for p in again.directory.iterdir()} == before


def test_half_made_directory_is_remade(tmp_path: Path) -> None:
    """A directory missing one file is remade whole, so the CA and what it signed always match."""
    first = ensure_certificates(tmp_path / "certs")
    old_ca = first.ca_cert.read_bytes()
    first.client_key.unlink()
    second = ensure_certificates(tmp_path / "certs")
    assert second.complete()
    assert second.ca_cert.read_bytes() != old_ca


def test_private_keys_are_private(certs: Certificates) -> None:
    """The directory is 0700 and the keys, the keystore and its password are 0600."""
    assert stat.S_IMODE(certs.directory.stat().st_mode) == 0o700
    for path in (certs.ca_key, certs.server_key, certs.client_key, certs.server_keystore,
                 certs.keystore_password_file):  # fmt: skip
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


def test_broker_and_redis_config_name_the_files(certs: Certificates) -> None:
    """The broker's ssl.* keys and the redis.conf TLS lines point at this set's files."""
    props = kafka_ssl_properties(certs, client_auth="required")
    assert props["ssl.keystore.location"] == str(certs.server_keystore)
    assert props["ssl.keystore.password"] == certs.keystore_password
    assert props["ssl.truststore.location"] == str(certs.ca_cert)
    assert props["ssl.client.auth"] == "required"
    conf = redis_tls_conf(certs, 7001, auth_clients=True)
    assert "tls-port 7001\n" in conf
    assert f'tls-ca-cert-file "{certs.ca_cert}"' in conf
    assert "tls-auth-clients yes" in conf
