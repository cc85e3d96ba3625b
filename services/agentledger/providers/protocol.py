"""The provider port: what the SDK and the reconciler need from anything that performs effects.

A provider performs an effect at most once per idempotency key and can be asked, by key, whether
it did. Errors are the contract:

- :class:`~agentledger.errors.ProviderUnavailableError` — timeout, refused or dropped connection,
  5xx: the outcome is UNKNOWN. Adapters never retry on their own; the SDK records ``unknown`` and
  resolves it with :meth:`Provider.lookup`.
- :class:`~agentledger.errors.ProviderConflictError` — the key is already taken by an effect with
  another identity (HTTP 409); :class:`~agentledger.errors.ProviderIdentityConflictError` names
  both hashes when the provider tells them.
- :class:`~agentledger.errors.ProviderRequestError` — the request itself is wrong (HTTP 4xx).
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Mapping
from types import TracebackType
from typing import Any, Self, TypeGuard

from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator

from agentledger.errors import ProviderError, ProviderRequestError
from agentledger.providers.hashing import identity_hash, payload_hash, response_hash

JsonScalar = str | int | float | bool | None

KIND_PATTERN = r"^[a-z][a-z0-9_-]{0,62}$"
MAX_KEY_LENGTH = 255
_KEY_RE = re.compile(r"^[\x21-\x7e]{1,255}$")
_FIELD_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,127}$")


def check_key(key: str) -> str:
    """Return ``key`` if it can travel as an ``Idempotency-Key`` header, else raise."""
    if not _KEY_RE.fullmatch(key):
        msg = (
            f"idempotency key {key[:80]!r} must be 1-{MAX_KEY_LENGTH} printable ASCII "
            "characters without spaces"
        )
        raise ProviderRequestError(msg)
    return key


def check_kind(kind: str) -> str:
    """Return ``kind`` if it is a lower-case path segment such as ``payments``, else raise."""
    if not re.fullmatch(KIND_PATTERN, kind):
        msg = f"effect kind {kind[:80]!r} must match {KIND_PATTERN} (e.g. 'payments')"
        raise ProviderRequestError(msg)
    return kind


class EffectRequest(BaseModel):
    """One effect to perform: its kind, the fields that define it, and free text that does not.

    ``identity`` (recipient, amount, currency …) decides whether two calls are the same effect;
    ``free_text`` (an email body …) may differ on a retry without making it a different effect.
    A field name may appear in only one of the two.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    kind: str = Field(pattern=KIND_PATTERN)
    identity: dict[str, JsonScalar]
    free_text: dict[str, JsonValue] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _fields_disjoint(self) -> Self:
        bad = sorted(name for name in self.identity if not _FIELD_RE.fullmatch(name))
        if bad:
            msg = f"identity field names {bad} must match {_FIELD_RE.pattern} (e.g. 'amount')"
            raise ValueError(msg)
        both = sorted(set(self.identity) & set(self.free_text))
        if both:
            msg = f"fields {both} are both identity and free text; a field must be one or the other"
            raise ValueError(msg)
        return self

    @property
    def identity_hash(self) -> str:
        """sha256 of the canonical identity (see :func:`agentledger.providers.hashing`)."""
        return identity_hash(self.identity)

    @property
    def payload_hash(self) -> str:
        """sha256 of identity and free text together."""
        return payload_hash(self.identity, self.free_text)

    def body(self) -> dict[str, JsonValue]:
        """The flat JSON body an HTTP provider receives: identity fields, then free-text fields."""
        return {**self.identity, **self.free_text}


class ProviderResult(BaseModel):
    """What a provider answered: its id for the object, and the response with its hash."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    external_ref: str = Field(min_length=1)
    response_hash: str
    response: dict[str, JsonValue]

    @classmethod
    def of(cls, response: Mapping[str, Any], *, id_field: str = "id") -> ProviderResult:
        """Build from a response object whose ``id_field`` is the provider's object id."""
        ref = response.get(id_field)
        if not isinstance(ref, str | int) or isinstance(ref, bool) or ref == "":
            msg = f"provider response has no usable {id_field!r} field"
            raise ProviderError(msg)
        body = dict(response)
        digest = response_hash(body)  # raises unless the body is plain JSON with string keys
        # Validated above (a non-empty ref, a JSON object): no second walk of the body.
        return cls.model_construct(external_ref=str(ref), response_hash=digest, response=body)


class LookupResult(BaseModel):
    """The answer to "did you perform the effect with this key?": yes (with the result) or no.

    "Cannot tell" is not a value here: it is :class:`~agentledger.errors.ProviderUnavailableError`.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    found: bool
    result: ProviderResult | None = None

    @model_validator(mode="after")
    def _result_iff_found(self) -> Self:
        if self.found != (self.result is not None):
            msg = "a lookup result carries a ProviderResult exactly when found is true"
            raise ValueError(msg)
        return self

    @classmethod
    def missing(cls) -> LookupResult:
        """The provider never performed an effect with this key."""
        return cls(found=False)

    @classmethod
    def of(cls, result: ProviderResult) -> LookupResult:
        """The provider performed it; this is what it answered."""
        return cls(found=True, result=result)


class Provider(ABC):
    """Port to something that performs effects idempotently and answers lookups by key.

    Implementations are async context managers; ``stop`` is idempotent.
    """

    name: str

    async def start(self) -> None:  # noqa: B027  # optional hook: many providers hold nothing
        """Acquire connections; the default has none."""

    async def stop(self) -> None:  # noqa: B027  # optional hook, as start
        """Release connections; safe to call twice."""

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    @abstractmethod
    async def perform(self, request: EffectRequest, key: str) -> ProviderResult:
        """Perform ``request`` once under ``key``; a repeat returns the first result unchanged."""

    @abstractmethod
    async def lookup(self, kind: str, key: str) -> LookupResult:
        """Tell whether an effect of ``kind`` was performed under ``key``; never performs one."""


class CompensatingProvider(Provider):
    """A provider that can also undo an effect (refund a payment, cancel a ticket)."""

    @abstractmethod
    async def compensate(self, kind: str, external_ref: str, key: str) -> ProviderResult:
        """Undo the effect ``external_ref`` once under its own ``key``; repeats are no-ops."""


def supports_compensation(provider: Provider) -> TypeGuard[CompensatingProvider]:
    """True when ``provider`` can undo effects."""
    return isinstance(provider, CompensatingProvider)
