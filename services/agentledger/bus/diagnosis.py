"""Why a Kafka client could not start, when the cause is a security setting: one line naming it.

aiokafka reports a refused login, an untrusted certificate or a protocol mismatch alike, as
"Unable to bootstrap". After a failed start, :func:`security_hint` makes one bounded probe of
the first bootstrap server with the same options and names the setting to fix. Its lines never
contain the password.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl

from aiokafka.conn import create_conn
from aiokafka.errors import (
    IllegalSaslStateError,
    KafkaConnectionError,
    KafkaError,
    SaslAuthenticationFailed,
    UnsupportedSaslMechanismError,
)

from agentledger.errors import ConfigurationError
from agentledger.kafkaclient import kafka_options
from agentledger.settings import CommonSettings

PROBE_TIMEOUT_S = 5.0
V = "AGENTLEDGER_KAFKA_"


def _first_server(bootstrap: str) -> tuple[str, int]:
    host, _, port = bootstrap.split(",", maxsplit=1)[0].strip().rpartition(":")
    return host.strip("[]"), int(port)


async def _accepts(host: str, port: int) -> bool:
    """Whether the server accepts a TCP connection at all."""
    try:
        _, writer = await asyncio.open_connection(host, port)
    except OSError:
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True


async def _speaks_tls(host: str, port: int) -> bool:
    """Whether the server completes a TLS handshake (certificate not checked)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        _, writer = await asyncio.open_connection(host, port, ssl=context, server_hostname=host)
    except (OSError, ssl.SSLError):
        return False
    writer.close()
    with contextlib.suppress(OSError, ssl.SSLError):
        await writer.wait_closed()
    return True


async def _tls_problem(settings: CommonSettings, where: str, host: str, port: int) -> str | None:
    """The TLS handshake's failure with the client's own context, as a hint (None: it worked)."""
    try:
        context = kafka_options(settings)["ssl_context"]
        _, writer = await asyncio.open_connection(host, port, ssl=context, server_hostname=host)
    except ssl.SSLCertVerificationError as e:
        return (
            f"Kafka at {where} presented a certificate this client does not trust "
            f"({e.verify_message}): set {V}SSL_CAFILE to the CA file that signed the brokers' "
            "certificates"
        )
    except ssl.SSLError as e:
        return (
            f"Kafka at {where} did not complete a TLS handshake ({e.reason}): if its listener "
            f"is not TLS, set {V}SECURITY_PROTOCOL=PLAINTEXT or SASL_PLAINTEXT"
        )
    except OSError:
        return None  # not a security problem: the caller's "unreachable" stands
    writer.close()
    with contextlib.suppress(OSError, ssl.SSLError):
        await writer.wait_closed()
    return None


async def _protocol_problem(settings: CommonSettings, where: str, host: str, port: int) -> str:
    """Connect as the client would (TLS, SASL, one request); what failed, as a hint, or ""."""
    protocol = settings.kafka_security_protocol
    try:
        conn = await create_conn(
            host, port, request_timeout_ms=int(PROBE_TIMEOUT_S * 1000), **kafka_options(settings)
        )
    except SaslAuthenticationFailed:
        return (
            f"Kafka at {where} refused the SASL login of user {settings.kafka_sasl_username!r} "
            f"({settings.kafka_sasl_mechanism}): check {V}SASL_USERNAME and {V}SASL_PASSWORD "
            f"(and {V}SASL_MECHANISM)"
        )
    except (UnsupportedSaslMechanismError, IllegalSaslStateError):
        return (
            f"Kafka at {where} does not accept SASL mechanism {settings.kafka_sasl_mechanism}: "
            f"set {V}SASL_MECHANISM to one its listener enables"
        )
    except (KafkaConnectionError, OSError, KafkaError):
        if protocol in ("SSL", "SASL_SSL") and settings.kafka_ssl_certfile is None:
            return (
                f"Kafka at {where} closed the connection after the TLS handshake: if its "
                f"listener requires a client certificate set {V}SSL_CERTFILE and "
                f"{V}SSL_KEYFILE; check {V}SECURITY_PROTOCOL={protocol} is the listener's"
            )
        return (
            f"Kafka at {where} closed the connection: check {V}SECURITY_PROTOCOL={protocol} is "
            "the protocol of the listener it serves on that port"
        )
    conn.close()
    return ""


async def security_hint(settings: CommonSettings | None, bootstrap: str) -> str | None:
    """One line naming the security setting that made a client's start fail, or None.

    None when the probe finds nothing wrong with the security settings (the broker is down,
    slow, or the failure lies elsewhere): the caller's own error stands.
    """
    if settings is None:
        return None
    host, port = _first_server(bootstrap)
    try:
        async with asyncio.timeout(PROBE_TIMEOUT_S):
            if not await _accepts(host, port):
                return None  # down or restarting: not a security problem, and worth a retry
            return await _probe(settings, host, port) or None
    except (TimeoutError, ConfigurationError):
        return None


async def _probe(settings: CommonSettings, host: str, port: int) -> str | None:
    protocol = settings.kafka_security_protocol
    where = f"{host}:{port}"
    if protocol in ("SSL", "SASL_SSL"):
        problem = await _tls_problem(settings, where, host, port)
        if problem is not None:
            return problem
    elif await _speaks_tls(host, port):
        return (
            f"Kafka at {where} expects TLS but {V}SECURITY_PROTOCOL={protocol}: set it to "
            f"SASL_SSL or SSL (with the CA file in {V}SSL_CAFILE)"
        )
    if protocol == "PLAINTEXT":
        return None
    return await _protocol_problem(settings, where, host, port)


async def raise_if_security(settings: CommonSettings | None, bootstrap: str) -> None:
    """Raise ConfigurationError with :func:`security_hint`'s line when it finds one."""
    hint = await security_hint(settings, bootstrap)
    if hint is not None:
        raise ConfigurationError(hint)
