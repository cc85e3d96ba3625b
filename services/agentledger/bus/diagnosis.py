"""Why a Kafka call failed: an outage to wait out, or an answer to report; and, when the cause
of a failed start is a security setting, one line naming it.

:func:`failure_of` classifies the error of a failed transaction. A lost connection is an outage
(waited out within the outage budget). An error the broker answered with (a missing topic, an
authorization refusal, a fenced producer, an invalid state) is not: retrying cannot help, so the
publishes fail at once. A deadline of our own (``TimeoutError``; note that it is an ``OSError``)
says neither: :func:`explain_deadline` asks the broker for its metadata once, bounded, and
classifies from the answer (no answer: an outage; a topic of the transaction missing or not
authorized: refused; the broker answering with every topic there: it is up but not completing
the transaction, e.g. its coordinator still loading after a restart, which is waited out).

aiokafka reports a refused login, an untrusted certificate or a protocol mismatch alike, as
"Unable to bootstrap". After a failed start, :func:`security_hint` makes one bounded probe of
the first bootstrap server with the same options and names the setting to fix. Its lines never
contain the password.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import ssl
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from aiokafka.conn import create_conn
from aiokafka.errors import (
    IllegalSaslStateError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    NodeNotReadyError,
    RequestTimedOutError,
    SaslAuthenticationFailed,
    UnknownTopicOrPartitionError,
    UnsupportedSaslMechanismError,
)

from agentledger.errors import ConfigurationError, UnreachableError
from agentledger.kafkaclient import kafka_options
from agentledger.netprobe import accepts
from agentledger.settings import CommonSettings

PROBE_TIMEOUT_S = 5.0
V = "AGENTLEDGER_KAFKA_"
API_VERSIONS, SASL_HANDSHAKE = 18, 17
ILLEGAL_SASL_STATE = 34  # what a listener without SASL answers a SASL handshake
# TLS alerts of a broker that refused (or did not get) the client's certificate
CERTIFICATE_ALERTS = ("CERTIFICATE", "UNKNOWN_CA", "DECRYPT_ERROR", "HANDSHAKE_FAILURE")


class Failure(enum.Enum):
    """What a failed Kafka call says about the broker."""

    #: The broker could not be reached (or is up but not serving): wait it out.
    OUTAGE = "outage"
    #: The broker answered with an error retrying cannot fix: fail the call at once.
    REFUSED = "refused"
    #: Our own deadline passed, or aiokafka's bare KafkaError said nothing more: ask the
    #: broker (:func:`explain_deadline`).
    DEADLINE = "deadline"


#: Errors that mean the connection to the broker was lost or never made (a socket's OSError).
_LOST = (KafkaConnectionError, NodeNotReadyError, RequestTimedOutError, UnreachableError, OSError)


def failure_of(error: BaseException) -> Failure:
    """Classify the error of a failed Kafka call by its type alone.

    ``TimeoutError`` is tested first: it is an ``OSError`` subclass, and an ``OSError`` is
    otherwise a socket's failure (an outage), also as the cause of the error. A retriable
    KafkaError (not leader, coordinator not available, not enough replicas) is a broker not
    serving yet, except an unknown topic: the brokers here never auto-create, so a missing
    topic stays missing.
    """
    if isinstance(error, TimeoutError | KafkaTimeoutError):
        return Failure.DEADLINE
    if any(isinstance(e, _LOST) and not isinstance(e, TimeoutError) for e in _causes(error)):
        # aiokafka wraps a lost connection in a bare KafkaError ("Unexpected error during
        # batch delivery" when its sender task dies on one)
        return Failure.OUTAGE
    if isinstance(error, UnknownTopicOrPartitionError):
        return Failure.REFUSED
    if isinstance(error, KafkaError) and error.retriable:
        return Failure.OUTAGE
    if type(error) is KafkaError:
        return Failure.DEADLINE  # aiokafka's catch-all names no cause: ask the broker
    return Failure.REFUSED


def _causes(error: BaseException) -> list[BaseException]:
    """``error`` and the exceptions it was raised from (a bounded walk of the chain)."""
    chain: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and len(chain) < 16 and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


@dataclass(frozen=True)
class Diagnosis:
    """A classified failure and, when the broker said why, the reason (or "")."""

    failure: Failure
    reason: str = ""


async def explain_deadline(client: Any, topics: Iterable[str], timeout_s: float) -> Diagnosis:
    """Why a call over ``client`` (an aiokafka client) missed its deadline: one bounded
    metadata request. No answer is an outage; a topic of ``topics`` missing or not authorized
    is refused; an answer with every topic there is a broker up but not serving (an outage)."""
    try:
        async with asyncio.timeout(timeout_s):
            metadata = await client.fetch_all_metadata()
    except (TimeoutError, KafkaError, OSError) as e:
        return Diagnosis(Failure.OUTAGE, f"the broker did not answer a metadata request: {e!r}")
    wanted = set(topics)
    unauthorized = sorted(wanted & set(metadata.unauthorized_topics))
    if unauthorized:
        return Diagnosis(Failure.REFUSED, f"not authorized to write topic(s) {unauthorized}")
    missing = sorted(wanted - set(metadata.topics()) - set(unauthorized))
    if missing:
        return Diagnosis(
            Failure.REFUSED,
            f"topic(s) {missing} do not exist (agentledger topics ensure creates them)",
        )
    return Diagnosis(Failure.OUTAGE, "the broker answers but did not complete the transaction")


def _first_server(bootstrap: str) -> tuple[str, int]:
    host, _, port = bootstrap.split(",", maxsplit=1)[0].strip().rpartition(":")
    return host.strip("[]"), int(port)


async def any_broker_listening(bootstrap: str, timeout_s: float = 1.0) -> bool:
    """Whether any of the bootstrap servers accepts a TCP connection within ``timeout_s``."""
    servers = []
    for server in bootstrap.split(","):
        host, _, port = server.strip().rpartition(":")
        servers.append((host.strip("[]"), int(port)))

    return any(await asyncio.gather(*(accepts(h, p, timeout_s) for h, p in servers)))


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


def _request(api_key: int, version: int, body: bytes = b"") -> bytes:
    """One Kafka request frame (request header v1: key, version, correlation id, client id)."""
    client = b"agentledger-probe"
    payload = struct.pack(">hhih", api_key, version, 1, len(client)) + client + body
    return struct.pack(">i", len(payload)) + payload


async def _exchange(host: str, port: int, context: ssl.SSLContext | None, frame: bytes) -> bytes:
    """Send one request frame on a new connection; the response (after its correlation id).

    Raises what the connection raised: OSError, ssl.SSLError, asyncio.IncompleteReadError.
    """
    reader, writer = await asyncio.open_connection(
        host, port, ssl=context, server_hostname=host if context is not None else None
    )
    try:
        writer.write(frame)
        await writer.drain()
        (size,) = struct.unpack(">i", await reader.readexactly(4))
        return (await reader.readexactly(size))[4:]
    finally:
        writer.close()
        with contextlib.suppress(OSError, ssl.SSLError):
            await writer.wait_closed()


async def _wants_sasl(host: str, port: int, context: ssl.SSLContext | None) -> bool:
    """Whether the listener answers a SASL handshake as a SASL listener does."""
    mechanism = b"PLAIN"
    frame = _request(SASL_HANDSHAKE, 1, struct.pack(">h", len(mechanism)) + mechanism)
    try:
        response = await _exchange(host, port, context, frame)
    except (OSError, ssl.SSLError, asyncio.IncompleteReadError):
        return False
    return len(response) >= 2 and struct.unpack(">h", response[:2])[0] != ILLEGAL_SASL_STATE


def _certificate_problem(settings: CommonSettings, where: str, reason: str) -> str:
    if settings.kafka_ssl_certfile is None:
        return (
            f"Kafka at {where} requires a client certificate ({reason}): set {V}SSL_CERTFILE "
            f"and {V}SSL_KEYFILE"
        )
    return (
        f"Kafka at {where} refused this client's certificate ({reason}): set {V}SSL_CERTFILE "
        f"and {V}SSL_KEYFILE to a certificate signed by a CA the brokers trust"
    )


async def _tls_problem(settings: CommonSettings, where: str, host: str, port: int) -> str | None:
    """The TLS handshake's failure with the client's own context, as a hint (None: it worked).

    With TLS 1.3 a broker checks the client's certificate after the client has finished its
    side of the handshake, so one request is sent too: a refused certificate shows there.
    """
    context = kafka_options(settings)["ssl_context"]
    try:
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
    try:
        await _exchange(host, port, context, _request(API_VERSIONS, 0))
    except ssl.SSLError as e:
        reason = str(e.reason or e)
        if any(alert in reason.upper() for alert in CERTIFICATE_ALERTS):
            return _certificate_problem(settings, where, reason)
    except (OSError, asyncio.IncompleteReadError):
        pass  # closed without an alert: the login probe names the likeliest setting
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
            if not await accepts(host, port, PROBE_TIMEOUT_S):
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
    if protocol in ("PLAINTEXT", "SSL"):
        context = kafka_options(settings).get("ssl_context")
        if await _wants_sasl(host, port, context):
            return (
                f"Kafka at {where} asks for a SASL login but {V}SECURITY_PROTOCOL={protocol}: "
                f"set it to {'SASL_SSL' if context else 'SASL_PLAINTEXT'} with "
                f"{V}SASL_MECHANISM, {V}SASL_USERNAME and {V}SASL_PASSWORD"
            )
    if protocol == "PLAINTEXT":
        return None
    return await _protocol_problem(settings, where, host, port)


async def raise_if_security(settings: CommonSettings | None, bootstrap: str) -> None:
    """Raise ConfigurationError with :func:`security_hint`'s line when it finds one."""
    hint = await security_hint(settings, bootstrap)
    if hint is not None:
        raise ConfigurationError(hint)
