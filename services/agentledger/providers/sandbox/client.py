"""Client of the sandbox's inspection and fault endpoints, for tests, chaos runs and the demo."""

from __future__ import annotations

from types import TracebackType
from typing import Any, Self

import aiohttp
from pydantic import BaseModel, ConfigDict, JsonValue, TypeAdapter

from agentledger.errors import ProviderError, ProviderUnavailableError
from agentledger.providers.faults import FaultRule


class SandboxEffect(BaseModel):
    """One effect the sandbox performed, as ``GET /v1/effects`` lists it."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    id: str
    kind: str
    idempotency_key: str
    identity_hash: str
    payload: dict[str, JsonValue]
    created_at: str
    compensates: str | None = None


_EFFECTS = TypeAdapter(list[SandboxEffect])
_LOOKUPS = TypeAdapter(dict[str, int])
_RULES = TypeAdapter(list[FaultRule])


class SandboxClient:
    """Reads what the sandbox did and arms its faults; an async context manager."""

    def __init__(self, url: str, *, timeout_s: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._session: aiohttp.ClientSession | None = None

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

    async def start(self) -> None:
        """Open the connection pool (idempotent)."""
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self._timeout)

    async def stop(self) -> None:
        """Close the connection pool (idempotent)."""
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    async def healthy(self) -> bool:
        """True when ``GET /healthz`` answers 200."""
        try:
            await self._json("GET", "/healthz")
        except ProviderError:
            return False
        return True

    async def effects(self, kind: str | None = None) -> list[SandboxEffect]:
        """Every effect performed (of ``kind``), oldest first."""
        params = {"kind": kind} if kind is not None else None
        return _EFFECTS.validate_python(await self._json("GET", "/v1/effects", params=params))

    async def lookups(self) -> dict[str, int]:
        """How many lookups were answered, per idempotency key."""
        return _LOOKUPS.validate_python(await self._json("GET", "/v1/lookups"))

    async def faults(self) -> list[FaultRule]:
        """The armed fault rules, ``times`` showing the uses left."""
        return _RULES.validate_python(await self._json("GET", "/v1/_faults"))

    async def set_faults(self, *rules: FaultRule) -> list[FaultRule]:
        """Replace the armed fault rules; returns them as armed."""
        body = [rule.model_dump(mode="json", exclude_none=True) for rule in rules]
        return _RULES.validate_python(await self._json("POST", "/v1/_faults", body=body))

    async def clear_faults(self) -> None:
        """Disarm every fault rule."""
        await self._json("DELETE", "/v1/_faults")

    async def _json(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: dict[str, str] | None = None,
    ) -> Any:
        if self._session is None:
            msg = "SandboxClient is not started: use `async with`"
            raise ProviderError(msg)
        try:
            async with self._session.request(
                method, self.url + path, json=body, params=params
            ) as response:
                if response.status != 200:
                    text = await response.text()
                    msg = f"sandbox {method} {path} answered {response.status}: {text[:300]}"
                    raise ProviderError(msg, status=response.status)
                return await response.json()
        except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, TimeoutError) as e:
            msg = f"sandbox at {self.url} gave no answer to {method} {path}: {e!r}"
            raise ProviderUnavailableError(msg) from e
