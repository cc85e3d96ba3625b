"""Bad credentials stop a command at start: exit 2, one line naming the setting to fix, neither
the password nor a traceback (Kafka: a wrong password (SCRAM, PLAIN), a wrong CA, a plaintext
client against a TLS or a SASL listener, TLS without SASL against SASL_SSL, no or an untrusted
client certificate against mTLS; Redis: a wrong password or user, a wrong CA, redis:// against
TLS, a cluster client against a single Redis)."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentledger.stack.certs import ensure_certificates
from agentledger.stack.secure import SecureStack

from .conftest import mode_values

pytestmark = pytest.mark.integration

WRONG = "not-the-Password-42"


def env_of(values: dict[str, Any], state_dir: Path) -> dict[str, str]:
    """The environment of a CLI call with exactly these AGENTLEDGER_* settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLEDGER_")}
    env.update({f"AGENTLEDGER_{k.upper()}": str(v) for k, v in values.items() if v is not None})
    env["AGENTLEDGER_STATE_DIR"] = str(state_dir)
    env["AGENTLEDGER_KAFKA_CONNECT_TIMEOUT_MS"] = "5000"
    return env


async def cli_stderr(env: dict[str, str], *args: str) -> tuple[int | None, str]:
    """Run ``agentledger ARGS``; its exit code and standard error."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentledger.cli", *args,
        env=env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await asyncio.wait_for(proc.communicate(), 120)
    return proc.returncode, err.decode()


def other_ca(tmp_path: Path) -> Path:
    """A CA that signed nothing the secured stack presents."""
    return ensure_certificates(tmp_path / "other").ca_cert


Change = Callable[[SecureStack, dict[str, Any], Path], None]


def wrong_password(s: SecureStack, v: dict[str, Any], tmp: Path) -> None:
    v["kafka_sasl_password"] = WRONG


def wrong_plain_password(s: SecureStack, v: dict[str, Any], tmp: Path) -> None:
    v["kafka_sasl_mechanism"] = "PLAIN"
    v["kafka_sasl_password"] = WRONG


def wrong_kafka_ca(s: SecureStack, v: dict[str, Any], tmp: Path) -> None:
    v["kafka_ssl_cafile"] = other_ca(tmp)


def plaintext_client(s: SecureStack, v: dict[str, Any], tmp: Path) -> None:
    for key in ("kafka_sasl_mechanism", "kafka_sasl_username", "kafka_sasl_password"):
        v.pop(key)
    v.pop("kafka_ssl_cafile")
    v["kafka_security_protocol"] = "PLAINTEXT"


def plaintext_against_sasl(s: SecureStack, v: dict[str, Any], tmp: Path) -> None:
    plaintext_client(s, v, tmp)
    v["kafka_bootstrap"] = s.sasl_plaintext_bootstrap


def sasl_plaintext_against_tls(s: SecureStack, v: dict[str, Any], tmp: Path) -> None:
    v.pop("kafka_ssl_cafile")
    v["kafka_security_protocol"] = "SASL_PLAINTEXT"


def tls_without_sasl(s: SecureStack, v: dict[str, Any], tmp: Path) -> None:
    for key in ("kafka_sasl_mechanism", "kafka_sasl_username", "kafka_sasl_password"):
        v.pop(key)
    v.update({**s.mtls_settings(), "kafka_bootstrap": s.sasl_bootstrap})


def untrusted_client_certificate(s: SecureStack, v: dict[str, Any], tmp: Path) -> None:
    no_client_certificate(s, v, tmp)
    other = ensure_certificates(tmp / "other")
    v["kafka_ssl_certfile"] = other.client_cert
    v["kafka_ssl_keyfile"] = other.client_key


def no_client_certificate(s: SecureStack, v: dict[str, Any], tmp: Path) -> None:
    v.update(s.mtls_settings())
    v.pop("kafka_ssl_certfile")
    v.pop("kafka_ssl_keyfile")
    for key in ("kafka_sasl_mechanism", "kafka_sasl_username", "kafka_sasl_password"):
        v.pop(key, None)


KAFKA_CASES: list[tuple[Change, str]] = [
    (wrong_password, "AGENTLEDGER_KAFKA_SASL_PASSWORD"),
    (wrong_plain_password, "AGENTLEDGER_KAFKA_SASL_PASSWORD"),
    (wrong_kafka_ca, "AGENTLEDGER_KAFKA_SSL_CAFILE"),
    (plaintext_client, "AGENTLEDGER_KAFKA_SECURITY_PROTOCOL"),
    (plaintext_against_sasl, "AGENTLEDGER_KAFKA_SECURITY_PROTOCOL"),
    (sasl_plaintext_against_tls, "AGENTLEDGER_KAFKA_SECURITY_PROTOCOL"),
    (tls_without_sasl, "AGENTLEDGER_KAFKA_SECURITY_PROTOCOL"),
    (no_client_certificate, "AGENTLEDGER_KAFKA_SSL_CERTFILE"),
    (untrusted_client_certificate, "AGENTLEDGER_KAFKA_SSL_CERTFILE"),
]


def wrong_redis_password(s: SecureStack, v: dict[str, Any], tmp: Path) -> None:
    v["redis_url"] = s.redis_url.replace(s.password, WRONG)


def wrong_redis_user(s: SecureStack, v: dict[str, Any], tmp: Path) -> None:
    v["redis_url"] = s.redis_url.replace("rediss://agentledger:", "rediss://nobody:")


def wrong_redis_ca(s: SecureStack, v: dict[str, Any], tmp: Path) -> None:
    v["redis_ssl_cafile"] = other_ca(tmp)


def plaintext_redis(s: SecureStack, v: dict[str, Any], tmp: Path) -> None:
    v["redis_url"] = s.redis_url.replace("rediss://", "redis://")
    v.pop("redis_ssl_cafile")


def cluster_against_single(s: SecureStack, v: dict[str, Any], tmp: Path) -> None:
    v["redis_cluster"] = "true"


REDIS_CASES: list[tuple[Change, str]] = [
    (wrong_redis_password, "AGENTLEDGER_REDIS_URL"),
    (wrong_redis_ca, "AGENTLEDGER_REDIS_SSL_CAFILE"),
    (plaintext_redis, "AGENTLEDGER_REDIS_URL"),
    (wrong_redis_user, "AGENTLEDGER_REDIS_URL"),
    (cluster_against_single, "AGENTLEDGER_REDIS_CLUSTER"),
]


def check_one_line(code: int | None, err: str, setting: str, secrets: tuple[str, ...]) -> None:
    """Exit 2, one error line naming ``setting``, no secret, no traceback."""
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("agentledger: error: "), err
    assert setting in lines[0], err
    assert "Traceback" not in err
    for secret in secrets:
        assert secret not in err


@pytest.mark.parametrize(
    ("change", "setting"), KAFKA_CASES, ids=lambda c: getattr(c, "__name__", "")
)
async def test_bad_kafka_credentials_name_the_setting(
    secure: SecureStack, tmp_path: Path, change: Change, setting: str
) -> None:
    """`agentledger topics ensure` with bad Kafka credentials exits 2 naming the setting."""
    values = mode_values(secure, "SCRAM-SHA-256")
    change(secure, values, tmp_path)
    code, err = await cli_stderr(env_of(values, tmp_path), "topics", "ensure")
    check_one_line(code, err, setting, (secure.password, WRONG))


@pytest.mark.parametrize(
    ("change", "setting"), REDIS_CASES, ids=lambda c: getattr(c, "__name__", "")
)
async def test_bad_redis_credentials_name_the_setting(
    secure: SecureStack, tmp_path: Path, change: Change, setting: str
) -> None:
    """`agentledger effects list` with bad Redis credentials exits 2 naming the setting."""
    values = mode_values(secure, "SCRAM-SHA-256")
    change(secure, values, tmp_path)
    code, err = await cli_stderr(env_of(values, tmp_path), "effects", "list", "--json")
    check_one_line(code, err, setting, (secure.password, WRONG))
