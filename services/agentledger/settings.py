"""Settings shared by every service: where Kafka and Redis are, and how topics are named.

Each service has one pydantic-settings class (``WorkerSettings``, ``ProjectorSettings`` …) that
extends :class:`CommonSettings`; it is built once at the edge (the CLI) and passed down. Nothing
else reads ``os.environ``.
"""

from __future__ import annotations

import difflib
import importlib.util
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, Self

from pydantic import (
    AliasChoices,
    Field,
    SecretStr,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from agentledger.errors import ConfigurationError
from agentledger.redaction import redacted_url
from agentledger.variables import VARIABLES

DEFAULT_STATE_DIR = Path(".agentledger")
DEFAULT_TOPIC_PREFIX = "agentledger."
ENV_PREFIX = "AGENTLEDGER_"
#: The key of the local stack and of tests. A deployment sets its own (AGENTLEDGER_HASH_KEY):
#: with a known key, a hash in the log can be tested against guesses of what it hides.
DEFAULT_HASH_KEY = "agentledger-local-stack"

SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
KafkaCompression = Literal["none", "gzip", "zstd", "lz4"]
KAFKA_COMPRESSIONS: tuple[str, ...] = ("none", "gzip", "zstd", "lz4")
SaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
SECURITY_PROTOCOLS: tuple[str, ...] = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


class _CheckedEnvironment(PydanticBaseSettingsSource):
    """The environment source, refusing an ``AGENTLEDGER_*`` variable no setting has (a typo)."""

    def __init__(self, settings_cls: type[BaseSettings], env: EnvSettingsSource) -> None:
        super().__init__(settings_cls)
        self._env = env

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        """As the environment source."""
        return self._env.get_field_value(field, field_name)

    def __call__(self) -> dict[str, Any]:
        """The environment's values; ConfigurationError naming each unknown variable."""
        # The source lower-cases names unless case-sensitive: name them as a person set them.
        typo = unknown_variables({k.upper(): v for k, v in self._env.env_vars.items()})
        if typo is not None:
            raise ConfigurationError(typo)
        if not self._reads_any():
            return {}
        return self._env()

    def _reads_any(self) -> bool:
        """Whether the environment holds a variable some field reads: without one, the source
        would walk every field's annotation to find nothing (most of a fresh process's first
        settings build, inside a resume's time). Nested variables need the walk."""
        if self._env.env_nested_delimiter:
            return True
        present = {k.upper() for k in self._env.env_vars}
        return not present.isdisjoint(_fields_of(self.settings_cls))


class CommonSettings(BaseSettings):
    """Endpoints and topic layout; empty endpoints mean "use the embedded local stack"."""

    # hide_input_in_errors: a rejected value may be a URL with its password (the validators
    # name the variable and show the value redacted instead).
    model_config = SettingsConfigDict(
        env_prefix="AGENTLEDGER_", extra="ignore", frozen=True, hide_input_in_errors=True
    )

    kafka_bootstrap: str | None = Field(
        default=None,
        description="host:port[,host:port]; unset = the local stack (agentledger stack up)",
    )
    redis_url: str | None = Field(
        default=None, description="redis://host:port/db; unset = the local stack"
    )
    redis_cluster: bool = Field(
        default=False,
        description=(
            "true for a Redis Cluster (AGENTLEDGER_REDIS_URL names any one node): every client "
            "is cluster-aware and the views are laid out by partition slot (docs/DESIGN.md §14)"
        ),
    )
    state_dir: Path = Field(
        default=DEFAULT_STATE_DIR, description="where the local stack keeps its data"
    )
    topic_prefix: str = Field(
        default=DEFAULT_TOPIC_PREFIX, description="prefix of every topic name"
    )
    hash_key: SecretStr = Field(
        default=SecretStr(DEFAULT_HASH_KEY),
        description=(
            "secret key of the identity and payload hashes recorded in the log (HMAC-SHA256); "
            "the default suits the local stack only: set your own in a deployment, the same "
            "for every worker and reconciler"
        ),
    )
    key_prefix: str = Field(default="al", description="prefix of every Redis key")
    run_partitions: int = Field(
        default=4, ge=1, le=1024, description="partitions of every run topic (co-partitioned)"
    )
    replication_factor: int | None = Field(
        default=None,
        ge=1,
        le=16,
        description=(
            "replication factor of the topics `topics ensure` creates; unset = min(3, brokers "
            "in the cluster); min.insync.replicas follows it (2 from 3 replicas, else 1)"
        ),
    )
    run_retention_ms: int = Field(
        default=-1, ge=-1, description="steps/acceptance topics; -1 keeps them forever"
    )
    effects_retention_ms: int = Field(
        default=-1, ge=-1, description="effects topic (the audit trail); -1 keeps it forever"
    )
    requests_retention_ms: int = Field(default=7 * 24 * 3600 * 1000, ge=-1)
    alerts_retention_ms: int = Field(default=30 * 24 * 3600 * 1000, ge=-1)
    deadletter_retention_ms: int = Field(default=30 * 24 * 3600 * 1000, ge=-1)
    service_partitions: int = Field(
        default=1, ge=1, le=1024, description="partitions of the alerts and deadletter topics"
    )
    log_level: str = Field(default="INFO")
    kafka_connect_timeout_ms: int = Field(
        default=10_000, ge=100, description="how long to wait for a broker before giving up"
    )
    kafka_transaction_timeout_ms: int = Field(
        default=10_000,
        ge=1_000,
        le=900_000,
        description=(
            "Kafka transaction.timeout.ms of event writers: bounds how long a SIGKILLed writer's "
            "open transaction blocks read_committed consumers on its partitions (plus the "
            "broker's transaction.abort.timed.out.transaction.cleanup.interval.ms)"
        ),
    )
    kafka_publish_timeout_ms: int = Field(
        default=30_000,
        ge=1_000,
        description="how long a publish waits for its commit before failing (outcome unknown)",
    )
    outage_budget_s: float = Field(
        default=120.0,
        ge=0,
        le=86_400,
        description=(
            "how long a lost Kafka or Redis connection is waited out (with backoff) before the "
            "component fails with UnreachableError; 0 fails at the first failure"
        ),
    )
    kafka_txn_retry_backoff_ms: float = Field(
        default=1.0,
        gt=0,
        le=100,
        description=(
            "wait before retrying AddPartitionsToTxn or InitProducerId after "
            "CONCURRENT_TRANSACTIONS (KAFKA-5477; aiokafka's built-in 20 ms dominates "
            "back-to-back commits, its 100 ms a restarted writer's start)"
        ),
    )
    kafka_compression: KafkaCompression = Field(
        default="zstd",
        description=(
            "compression of the record batches agentledger's producers write: zstd (through "
            "cramjam, a dependency), lz4, gzip, or none; readers decode any of them"
        ),
    )

    kafka_security_protocol: SecurityProtocol = Field(
        default="PLAINTEXT",
        description="how Kafka clients connect: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL",
    )
    kafka_sasl_mechanism: SaslMechanism | None = Field(
        default=None, description="PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (SASL_* protocols)"
    )
    kafka_sasl_username: str | None = Field(default=None, description="the SASL user")
    kafka_sasl_password: SecretStr | None = Field(
        default=None, description="the SASL user's password (never logged)"
    )
    kafka_ssl_cafile: Path | None = Field(
        default=None,
        description="PEM file of the CA(s) that signed the brokers' certificates (SSL, "
        "SASL_SSL); unset = the system's trusted CAs",
    )
    kafka_ssl_certfile: Path | None = Field(
        default=None, description="PEM client certificate for mTLS (SSL, SASL_SSL)"
    )
    kafka_ssl_keyfile: Path | None = Field(
        default=None,
        description="PEM private key of AGENTLEDGER_KAFKA_SSL_CERTFILE (unencrypted); unset = "
        "the key is in the certificate file",
    )
    redis_ssl_cafile: Path | None = Field(
        default=None,
        description="PEM file of the CA that signed Redis's certificate (rediss:// URLs); "
        "unset = the system's trusted CAs",
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """The usual sources; the environment refuses a typo'd ``AGENTLEDGER_*`` variable, which
        would otherwise be ignored (a typo'd endpoint then quietly means the local stack)."""
        env = (
            _CheckedEnvironment(settings_cls, env_settings)
            if isinstance(env_settings, EnvSettingsSource)
            else env_settings
        )
        # Without an env file the dotenv source reads nothing, but still walks every field (a
        # few ms of a fresh process's first settings, inside a resume's time).
        dotenv = () if getattr(dotenv_settings, "env_file", None) is None else (dotenv_settings,)
        return (init_settings, env, *dotenv, file_secret_settings)

    @field_validator("kafka_bootstrap", "redis_url")
    @classmethod
    def _endpoint_shape(cls, value: str | None, info: ValidationInfo) -> str | None:
        """Unset or empty means the local stack; otherwise the endpoint must have its shape."""
        if value is None or value == "":
            return None
        problem = (
            _bootstrap_problem(value)
            if info.field_name == "kafka_bootstrap"
            else _redis_url_problem(value)
        )
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("kafka_security_protocol", "kafka_sasl_mechanism", mode="before")
    @classmethod
    def _known_choice(cls, value: object, info: ValidationInfo) -> object:
        name = str(info.field_name)
        if not isinstance(value, str):
            return value
        if not value.strip():
            return "PLAINTEXT" if name == "kafka_security_protocol" else None
        upper = value.strip().upper()
        choices = SECURITY_PROTOCOLS if name == "kafka_security_protocol" else SASL_MECHANISMS
        if upper not in choices:
            msg = f"{ENV_PREFIX}{name.upper()}={value!r}: use {', '.join(choices)}"
            raise ValueError(msg)
        return upper

    @field_validator("kafka_compression", mode="before")
    @classmethod
    def _known_compression(cls, value: object) -> object:
        """One of the codecs, and its package importable: else the start fails naming it."""
        if not isinstance(value, str):
            return value
        lower = value.strip().lower() or "zstd"
        name = f"{ENV_PREFIX}KAFKA_COMPRESSION"
        if lower not in KAFKA_COMPRESSIONS:
            msg = f"{name}={value!r}: use {', '.join(KAFKA_COMPRESSIONS)}"
            raise ValueError(msg)
        if lower in {"zstd", "lz4"} and importlib.util.find_spec("cramjam") is None:
            msg = f"{name}={value!r} needs the cramjam package (pip install cramjam), or use gzip"
            raise ValueError(msg)
        return lower

    @model_validator(mode="after")
    def _security_consistent(self) -> Self:
        problem = security_problem(self)
        if problem is not None:
            raise ValueError(problem)
        return self

    @field_validator("log_level")
    @classmethod
    def _known_level(cls, value: str) -> str:
        upper = value.upper()
        if upper not in {"DEBUG", "INFO", "WARNING", "ERROR"}:
            msg = f"AGENTLEDGER_LOG_LEVEL={value!r}: use DEBUG, INFO, WARNING or ERROR"
            raise ValueError(msg)
        return upper


def _bootstrap_problem(value: str) -> str | None:
    for part in value.split(","):
        host, sep, port = part.strip().rpartition(":")
        if not sep or not host or not port.isdigit():
            return (
                f"AGENTLEDGER_KAFKA_BOOTSTRAP={value!r}: each entry must be host:port, "
                "e.g. 127.0.0.1:9092"
            )
    return None


def _redis_url_problem(value: str) -> str | None:
    if value.startswith(("redis://", "rediss://", "unix://")):
        return None
    return (
        f"AGENTLEDGER_REDIS_URL={redacted_url(value)!r}: must start with redis://, "
        "rediss:// or unix://, e.g. redis://127.0.0.1:6379/0"
    )


def security_problem(s: CommonSettings) -> str | None:
    """One line naming the security setting to fix when they do not fit together, else None.

    Checked when settings are built, so a service refuses to start before any connection. The
    line never contains the password.
    """
    return _sasl_problem(s) or _kafka_tls_problem(s) or _redis_tls_problem(s)


_KAFKA = ENV_PREFIX + "KAFKA_"


def _sasl_problem(s: CommonSettings) -> str | None:
    protocol = s.kafka_security_protocol
    values = (
        ("SASL_MECHANISM", s.kafka_sasl_mechanism),
        ("SASL_USERNAME", s.kafka_sasl_username),
        ("SASL_PASSWORD", s.kafka_sasl_password),
    )
    if protocol.startswith("SASL_"):
        missing = [name for name, value in values if not value]
        if missing:
            return (
                f"{_KAFKA}{missing[0]} is not set: {_KAFKA}SECURITY_PROTOCOL={protocol} needs "
                f"{_KAFKA}SASL_MECHANISM, {_KAFKA}SASL_USERNAME and {_KAFKA}SASL_PASSWORD"
            )
        return None
    extra = [name for name, value in values if value]
    if extra:
        return (
            f"{_KAFKA}{extra[0]} is set but {_KAFKA}SECURITY_PROTOCOL={protocol} uses no SASL: "
            f"set {_KAFKA}SECURITY_PROTOCOL=SASL_SSL (or SASL_PLAINTEXT), or unset "
            f"{_KAFKA}{extra[0]}"
        )
    return None


def _kafka_tls_problem(s: CommonSettings) -> str | None:
    protocol = s.kafka_security_protocol
    files = (
        ("SSL_CAFILE", s.kafka_ssl_cafile),
        ("SSL_CERTFILE", s.kafka_ssl_certfile),
        ("SSL_KEYFILE", s.kafka_ssl_keyfile),
    )
    for name, path in files:
        if path is None:
            continue
        if protocol not in ("SSL", "SASL_SSL"):
            return (
                f"{_KAFKA}{name} is set but {_KAFKA}SECURITY_PROTOCOL={protocol} uses no TLS: "
                f"set {_KAFKA}SECURITY_PROTOCOL=SSL or SASL_SSL, or unset {_KAFKA}{name}"
            )
        if not path.is_file():
            return f"{_KAFKA}{name}={str(path)!r}: no such file (give the path of a PEM file)"
    if s.kafka_ssl_keyfile is not None and s.kafka_ssl_certfile is None:
        return f"{_KAFKA}SSL_KEYFILE is set without {_KAFKA}SSL_CERTFILE: set the certificate too"
    return None


def _redis_tls_problem(s: CommonSettings) -> str | None:
    if s.redis_ssl_cafile is None:
        return None
    name = f"{ENV_PREFIX}REDIS_SSL_CAFILE"
    if not s.redis_ssl_cafile.is_file():
        return f"{name}={str(s.redis_ssl_cafile)!r}: no such file (give the path of a PEM file)"
    if s.redis_url is not None and not s.redis_url.startswith("rediss://"):
        return (
            f"{name} is set but {ENV_PREFIX}REDIS_URL is not TLS: use "
            f"rediss://USER:PASSWORD@host:port/0, or unset {name}"
        )
    return None


def _settings_classes() -> list[type[BaseSettings]]:
    """Every settings class imported so far (the CLI imports every command's)."""
    found: list[type[BaseSettings]] = []
    todo: list[type[BaseSettings]] = [BaseSettings]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in found:
                found.append(sub)
                todo.append(sub)
    return found


def _fields_of(cls: type[BaseSettings]) -> dict[str, FieldInfo]:
    """Each environment variable ``cls`` reads, with the field it sets."""
    prefix = str(cls.model_config.get("env_prefix") or "")
    fields: dict[str, FieldInfo] = {}
    for name, info in cls.model_fields.items():
        alias = info.validation_alias
        if isinstance(alias, str):
            fields[alias.upper()] = info
        elif isinstance(alias, AliasChoices):
            fields.update((c.upper(), info) for c in alias.choices if isinstance(c, str))
        else:
            fields[f"{prefix}{name}".upper()] = info
    return fields


def environment_of(settings: BaseSettings) -> dict[str, str]:
    """``settings`` as the AGENTLEDGER_* variables a child process reads them from (secrets in
    clear: the child needs them; unset fields left out)."""
    env: dict[str, str] = {}
    for name, value in settings.model_dump().items():
        if value is None:
            continue
        if isinstance(value, SecretStr):  # str() of a SecretStr is its mask
            text = value.get_secret_value()
        else:
            text = str(value).lower() if isinstance(value, bool) else str(value)
        env[f"AGENTLEDGER_{name.upper()}"] = text
    return env


def declared_fields() -> dict[str, FieldInfo]:
    """Every ``AGENTLEDGER_*`` variable that some imported settings class reads, with its field
    (the first class to declare it: a subclass that narrows a field comes later)."""
    fields: dict[str, FieldInfo] = {}
    for cls in _settings_classes():
        for name, info in _fields_of(cls).items():
            if name.startswith(ENV_PREFIX):
                fields.setdefault(name, info)
    return fields


def declared_variables() -> frozenset[str]:
    """Every ``AGENTLEDGER_*`` variable that some imported settings class reads."""
    return frozenset(declared_fields())


def known_variables() -> frozenset[str]:
    """Every ``AGENTLEDGER_*`` variable of agentledger, its services' included (imported or not)."""
    return VARIABLES | declared_variables()


def unknown_variables(environ: Mapping[str, str | None]) -> str | None:
    """One line naming each ``AGENTLEDGER_*`` variable nothing reads (a typo), or None.

    pydantic-settings ignores such a variable, and a typo'd endpoint would then quietly mean
    "the local stack": every entry point refuses to start instead.
    """
    # The static list knows nearly every variable set: the imported classes' fields are walked
    # only for a variable it does not know.
    unlisted = [
        k for k in environ if k.upper().startswith(ENV_PREFIX) and k.upper() not in VARIABLES
    ]
    if not unlisted:
        return None
    known = known_variables()
    unknown = sorted(k for k in unlisted if k.upper() not in known)
    if not unknown:
        return None
    parts = []
    for name in unknown:
        close = difflib.get_close_matches(name.upper(), sorted(known), n=1)
        parts.append(f"{name} (did you mean {close[0]}?)" if close else name)
    return f"unknown setting {', '.join(parts)}: no agentledger setting has this name"


class ArgumentsOnly:
    """Mixin for a settings class built from its constructor's arguments only, never from the
    environment (test instances on another test's endpoints; put it first among the bases)."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Use the constructor's arguments only."""
        return (init_settings,)
