"""The one place that decides how a Kafka client authenticates (aiokafka and faust arguments).

Every ``AIOKafkaProducer``/``AIOKafkaConsumer``/``AIOKafkaAdminClient`` in ``services/`` is built
with ``**kafka_options(settings)`` and the faust app with :func:`faust_credentials`; a unit test
scans the package so no client is ever built without them. ``settings=None`` means the local
plaintext stack (its own readiness probes, test helpers reading that stack). Both also make
aiokafka encode and decode zstd record batches with reused contexts
(:mod:`agentledger.zstd_batches`), so every client built here writes and reads them that way.
"""

from __future__ import annotations

import ssl
from typing import TYPE_CHECKING, Any

from agentledger.errors import ConfigurationError
from agentledger.zstd_batches import install as install_zstd

if TYPE_CHECKING:
    from agentledger.settings import CommonSettings


def ssl_context(settings: CommonSettings) -> ssl.SSLContext:
    """A verifying client TLS context: the CA file (or the system's CAs) and the client cert.

    Hostname verification stays on: a broker must present a certificate for the name or IP
    address it is reached at (the bootstrap entries and the advertised listeners).
    """
    cafile = settings.kafka_ssl_cafile
    try:
        context = ssl.create_default_context(cafile=str(cafile) if cafile else None)
    except (OSError, ssl.SSLError) as e:
        msg = (
            f"AGENTLEDGER_KAFKA_SSL_CAFILE={str(cafile)!r} is not a PEM CA file "
            f"({type(e).__name__}): give the CA certificate that signed the brokers'"
        )
        raise ConfigurationError(msg) from None
    if settings.kafka_ssl_certfile is not None:
        keyfile = settings.kafka_ssl_keyfile
        try:
            context.load_cert_chain(
                str(settings.kafka_ssl_certfile), str(keyfile) if keyfile else None
            )
        except (OSError, ssl.SSLError) as e:
            msg = (
                "AGENTLEDGER_KAFKA_SSL_CERTFILE/AGENTLEDGER_KAFKA_SSL_KEYFILE are not a PEM "
                f"certificate and its unencrypted key ({type(e).__name__}): give the client "
                "certificate and the matching key"
            )
            raise ConfigurationError(msg) from None
    return context


def kafka_options(settings: CommonSettings | None) -> dict[str, Any]:
    """The security keyword arguments of every aiokafka client (producer, consumer, admin)."""
    install_zstd()
    if settings is None or settings.kafka_security_protocol == "PLAINTEXT":
        return {"security_protocol": "PLAINTEXT"}
    protocol = settings.kafka_security_protocol
    options: dict[str, Any] = {"security_protocol": protocol}
    if protocol in ("SSL", "SASL_SSL"):
        options["ssl_context"] = ssl_context(settings)
    if protocol.startswith("SASL_"):
        password = settings.kafka_sasl_password
        options["sasl_mechanism"] = settings.kafka_sasl_mechanism
        options["sasl_plain_username"] = settings.kafka_sasl_username
        options["sasl_plain_password"] = password.get_secret_value() if password else None
    return options


def compression_of(settings: CommonSettings | None) -> str | None:
    """aiokafka's ``compression_type`` of agentledger's producers (None: uncompressed)."""
    if settings is None or settings.kafka_compression == "none":
        return None
    return settings.kafka_compression


def faust_credentials(settings: CommonSettings) -> Any:
    """The faust ``broker_credentials`` for these settings (None: plaintext).

    faust maps them back onto the same aiokafka arguments as :func:`kafka_options`
    (``credentials_to_aiokafka_auth``): SASL over TLS when there is a TLS context, TLS alone for
    SSL.
    """
    install_zstd()
    import faust  # noqa: PLC0415 - faust is heavy; only the projector's app needs it
    from faust.types.auth import SASLMechanism  # noqa: PLC0415 - with faust

    protocol = settings.kafka_security_protocol
    if protocol == "PLAINTEXT":
        return None
    context = ssl_context(settings) if protocol in ("SSL", "SASL_SSL") else None
    if protocol == "SSL":
        return faust.SSLCredentials(context)
    password = settings.kafka_sasl_password
    return faust.SASLCredentials(
        username=settings.kafka_sasl_username,
        password=password.get_secret_value() if password else None,
        ssl_context=context,
        mechanism=SASLMechanism(settings.kafka_sasl_mechanism),
    )
