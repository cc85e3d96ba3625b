"""The Kafka/Redis security settings: inconsistent ones stop a command in one line, without the
secret; consistent ones become the client arguments of kafka_options and redis_options."""

from __future__ import annotations

import logging
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from agentledger.cli import run
from agentledger.errors import ConfigurationError
from agentledger.kafkaclient import faust_credentials, kafka_options
from agentledger.redisclient import redis_options
from agentledger.settings import ArgumentsOnly, CommonSettings
from agentledger.stack.certs import Certificates, ensure_certificates

SECRET = "s3cr3t-Pa55word"


class Given(ArgumentsOnly, CommonSettings):
    """Settings from the test's arguments only."""


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    """A CA and client certificate to point the settings at."""
    return ensure_certificates(tmp_path_factory.mktemp("sec") / "certs")


@pytest.fixture(autouse=True)
def logging_restored() -> Iterator[None]:
    """The CLI points logging at this test's captured stderr; put the process's back after."""
    handlers, level = logging.root.handlers[:], logging.root.level
    config = structlog.get_config()
    yield
    logging.root.handlers[:] = handlers
    logging.root.setLevel(level)
    structlog.configure(**config)


@pytest.fixture(autouse=True)
def own_state_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Commands look at this test's own (empty) state directory."""
    monkeypatch.setenv("AGENTLEDGER_STATE_DIR", str(tmp_path))


CASES = [
    (
        {"SECURITY_PROTOCOL": "SASL_SSL", "SASL_USERNAME": "u", "SASL_PASSWORD": SECRET},
        "AGENTLEDGER_KAFKA_SASL_MECHANISM is not set",
    ),
    (
        {"SECURITY_PROTOCOL": "SASL_SSL", "SASL_MECHANISM": "SCRAM-SHA-256", "SASL_USERNAME": "u"},
        "AGENTLEDGER_KAFKA_SASL_PASSWORD is not set",
    ),
    (
        {"SASL_USERNAME": "u", "SASL_PASSWORD": SECRET},
        "AGENTLEDGER_KAFKA_SASL_USERNAME is set but AGENTLEDGER_KAFKA_SECURITY_PROTOCOL=PLAINTEXT",
    ),
    ({"SECURITY_PROTOCOL": "TLS"}, "AGENTLEDGER_KAFKA_SECURITY_PROTOCOL='TLS': use PLAINTEXT"),
    (
        {
            "SECURITY_PROTOCOL": "SASL_SSL",
            "SASL_MECHANISM": "SCRAM",
            "SASL_USERNAME": "u",
            "SASL_PASSWORD": SECRET,
        },
        "AGENTLEDGER_KAFKA_SASL_MECHANISM='SCRAM': use PLAIN, SCRAM-SHA-256, SCRAM-SHA-512",
    ),
    ({"SSL_CAFILE": "{ca}"}, "AGENTLEDGER_KAFKA_SSL_CAFILE is set but"),
    ({"SECURITY_PROTOCOL": "SSL", "SSL_CAFILE": "/nonexistent/ca.pem"}, "no such file"),
    (
        {"SECURITY_PROTOCOL": "SSL", "SSL_KEYFILE": "{key}"},
        "AGENTLEDGER_KAFKA_SSL_KEYFILE is set without AGENTLEDGER_KAFKA_SSL_CERTFILE",
    ),
]


@pytest.mark.parametrize(("env", "expected"), CASES)
def test_inconsistent_security_settings_stop_in_one_line(
    env: dict[str, str],
    expected: str,
    certs: Certificates,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A combination that cannot connect exits 2 with one line naming the variable, no secret."""
    for name, value in env.items():
        path = value.format(ca=certs.ca_cert, key=certs.client_key)
        monkeypatch.setenv(f"AGENTLEDGER_KAFKA_{name}", path)
    assert run(["stack", "status"]) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert expected in lines[0]
    assert SECRET not in err
    assert "Traceback" not in err


def test_redis_cafile_with_a_plaintext_url_stops(
    certs: Certificates,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """AGENTLEDGER_REDIS_SSL_CAFILE with a redis:// URL is refused, naming both, password hidden."""
    monkeypatch.setenv("AGENTLEDGER_REDIS_URL", f"redis://app:{SECRET}@127.0.0.1:1/0")
    monkeypatch.setenv("AGENTLEDGER_REDIS_SSL_CAFILE", str(certs.ca_cert))
    assert run(["stack", "status"]) == 2
    err = capsys.readouterr().err
    assert "AGENTLEDGER_REDIS_SSL_CAFILE is set but AGENTLEDGER_REDIS_URL is not TLS" in err
    assert SECRET not in err


def test_plaintext_is_the_default() -> None:
    """Without security settings every client connects in plaintext, faust without credentials."""
    settings = Given()
    assert kafka_options(settings) == {"security_protocol": "PLAINTEXT"}
    assert kafka_options(None) == {"security_protocol": "PLAINTEXT"}
    assert faust_credentials(settings) is None
    assert redis_options(settings, "redis://127.0.0.1:6379/0") == {}


def test_sasl_ssl_options_carry_a_verifying_context(certs: Certificates) -> None:
    """SASL_SSL/SCRAM gives aiokafka the mechanism, the user, the password and a CA-verifying
    TLS context with the client certificate loaded; the settings' repr hides the password."""
    settings = Given(
        kafka_security_protocol="sasl_ssl",
        kafka_sasl_mechanism="scram-sha-512",
        kafka_sasl_username="app",
        kafka_sasl_password=SECRET,
        kafka_ssl_cafile=certs.ca_cert,
        kafka_ssl_certfile=certs.client_cert,
        kafka_ssl_keyfile=certs.client_key,
    )
    options = kafka_options(settings)
    context = options.pop("ssl_context")
    assert options == {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "app",
        "sasl_plain_password": SECRET,
    }
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname
    assert SECRET not in repr(settings)
    assert SECRET not in str(settings.model_dump())
    credentials = faust_credentials(settings)
    assert credentials.protocol.value == "SASL_SSL"
    assert credentials.mechanism.value == "SCRAM-SHA-512"


def test_a_key_that_does_not_match_is_a_configuration_error(certs: Certificates) -> None:
    """A client certificate with another certificate's key fails naming the two settings."""
    settings = Given(
        kafka_security_protocol="SSL",
        kafka_ssl_cafile=certs.ca_cert,
        kafka_ssl_certfile=certs.client_cert,
        kafka_ssl_keyfile=certs.server_key,
    )
    with pytest.raises(ConfigurationError, match="AGENTLEDGER_KAFKA_SSL_CERTFILE"):
        kafka_options(settings)


def test_redis_tls_options_name_the_ca(certs: Certificates) -> None:
    """A rediss:// URL with AGENTLEDGER_REDIS_SSL_CAFILE verifies the server against that CA."""
    url = f"rediss://app:{SECRET}@127.0.0.1:6380/0"
    settings = Given(redis_url=url, redis_ssl_cafile=certs.ca_cert)
    assert redis_options(settings, url) == {
        "ssl_ca_certs": str(certs.ca_cert),
        "ssl_cert_reqs": "required",
    }
