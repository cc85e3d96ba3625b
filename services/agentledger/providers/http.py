"""Generic adapter for HTTP APIs that honour an ``Idempotency-Key`` header and look up by key.

Wire shape (the sandbox provider implements exactly this):

- perform: ``POST {base}/v1/{kind}``, headers ``Idempotency-Key: K`` and
  ``X-Identity-Fields: amount,currency`` (the identity field names, sorted), body the flat JSON
  object ``{**identity, **free_text}``. 2xx answers the object; its ``id`` is the external ref.
- lookup: ``GET {base}/v1/{kind}?idempotency_key=K``. 2xx with the object is found; 404, ``null``,
  ``{}``, ``[]`` or ``{"data": []}`` is not found.
- compensate: ``POST {base}/v1/{kind}/{ref}/compensate`` with its own ``Idempotency-Key``.

Errors: connection refused/dropped, timeout, 408, 429 and 5xx raise
:class:`ProviderUnavailableError` (outcome UNKNOWN, never retried here); 409 raises
:class:`ProviderConflictError` (with both identity hashes when the body names them); other 4xx
raise :class:`ProviderRequestError`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import structlog

from agentledger.errors import (
    ProviderConflictError,
    ProviderError,
    ProviderIdentityConflictError,
    ProviderRequestError,
    ProviderUnavailableError,
)
from agentledger.providers.protocol import (
    CompensatingProvider,
    EffectRequest,
    LookupResult,
    ProviderResult,
    check_key,
    check_kind,
)
from agentledger.providers.settings import ProviderSettings
from agentledger.providers.wire import HttpPool, WireError, WireUnavailable
from agentledger.telemetry.tracing import inject_traceparent

IDEMPOTENCY_HEADER = "Idempotency-Key"
IDENTITY_FIELDS_HEADER = "X-Identity-Fields"
_UNAVAILABLE_STATUSES = frozenset({408, 429})
_log = structlog.get_logger(__name__)


class HttpProvider(CompensatingProvider):
    """Talks to one Idempotency-Key API over keep-alive connections (``providers/wire.py``);
    ``async with`` it."""

    def __init__(
        self,
        base_url: str,
        *,
        name: str | None = None,
        timeout_s: float = 10.0,
        connect_timeout_s: float = 2.0,
        headers: Mapping[str, str] | None = None,
        id_field: str = "id",
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            msg = f"provider url {base_url!r} must start with http:// or https://"
            raise ProviderRequestError(msg)
        self.base_url = base_url.rstrip("/")
        self.name = name or self.base_url
        self._timeout_s = timeout_s
        self._connect_timeout_s = connect_timeout_s
        self._headers = {"Accept": "application/json", **(headers or {})}
        self._id_field = id_field
        self._pool: HttpPool | None = None

    @property
    def timeout_s(self) -> float:
        """The bound of one whole call (connecting, sending, reading the answer)."""
        return self._timeout_s

    @classmethod
    def from_settings(
        cls, settings: ProviderSettings, *, url: str | None = None, name: str | None = None
    ) -> HttpProvider:
        """Build from settings; ``url`` overrides ``settings.provider_url``."""
        base = url or settings.provider_url
        if base is None:
            msg = "no provider url: set AGENTLEDGER_PROVIDER_URL or start a sandbox"
            raise ProviderRequestError(msg)
        return cls(
            base,
            name=name,
            timeout_s=settings.provider_timeout_s,
            connect_timeout_s=settings.provider_connect_timeout_s,
        )

    async def start(self) -> None:
        """Open the connection pool (idempotent)."""
        if self._pool is None:
            try:
                self._pool = HttpPool(self.base_url, connect_timeout_s=self._connect_timeout_s)
            except WireError as e:
                raise ProviderRequestError(str(e)) from e

    async def stop(self) -> None:
        """Close the connection pool (idempotent)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    async def perform(self, request: EffectRequest, key: str) -> ProviderResult:
        """POST the effect with its key; the answer to a repeat is the first object."""
        check_key(key)
        headers = {
            IDEMPOTENCY_HEADER: key,
            IDENTITY_FIELDS_HEADER: ",".join(sorted(request.identity)),
        }
        path = f"/v1/{request.kind}"
        status, body = await self._call("POST", path, key, headers=headers, payload=request.body())
        self._raise_for(status, body, key)
        return self._result(body, key)

    async def lookup(self, kind: str, key: str) -> LookupResult:
        """GET by key; 404 or an empty answer means the provider never performed it."""
        check_kind(kind)
        check_key(key)
        path = f"/v1/{kind}?idempotency_key={quote(key, safe='')}"
        status, body = await self._call("GET", path, key)
        if status == 404:
            return LookupResult.missing()
        self._raise_for(status, body, key)
        if isinstance(body, dict) and isinstance(body.get("data"), list):
            body = body["data"]
        if isinstance(body, list):
            if len(body) > 1:
                msg = f"{self.name} answered {len(body)} objects for key {key}"
                raise ProviderError(msg, status=status)
            body = body[0] if body else None
        if body is None or body == {}:
            return LookupResult.missing()
        return LookupResult.of(self._result(body, key))

    async def compensate(self, kind: str, external_ref: str, key: str) -> ProviderResult:
        """POST a compensation of ``external_ref`` under its own key."""
        check_kind(kind)
        check_key(key)
        path = f"/v1/{kind}/{quote(external_ref, safe='')}/compensate"
        headers = {IDEMPOTENCY_HEADER: key}
        status, body = await self._call("POST", path, key, headers=headers, payload={})
        self._raise_for(status, body, key)
        return self._result(body, key)

    async def _call(
        self,
        method: str,
        path: str,
        key: str,
        *,
        headers: Mapping[str, str] | None = None,
        payload: Mapping[str, Any] | None = None,
    ) -> tuple[int, Any]:
        """One request, no retries; connectivity failures become ProviderUnavailableError."""
        pool = self._pool
        if pool is None:
            msg = f"{type(self).__name__} is not started: use `async with` or await start()"
            raise ProviderError(msg)
        sent = {**self._headers, **(headers or {})}
        inject_traceparent(sent)  # the provider's traces join the run's (W3C trace context)
        body = None
        if payload is not None:
            body = json.dumps(payload).encode()
            sent["Content-Type"] = "application/json"
        try:
            data = pool.request_bytes(method, pool.prefix + path, sent, body)
            async with asyncio.timeout(self._timeout_s):
                answer = await pool.request(method, data)
        except (WireUnavailable, TimeoutError) as e:
            url = self.base_url + path
            _log.warning(
                "provider_unavailable", provider=self.name, method=method, key=key, error=repr(e)
            )
            msg = f"{self.name} gave no answer to {method} {url} (key {key}): {e!r}"
            raise ProviderUnavailableError(msg) from e
        except WireError as e:
            msg = f"{self.name} could not be asked {method} {self.base_url}{path}: {e}"
            raise ProviderError(msg) from e
        return answer.status, _decode(answer.body, answer.status, self.name)

    def _raise_for(self, status: int, body: Any, key: str) -> None:
        """Translate a non-2xx status into the port's error types."""
        if 200 <= status < 300:
            return
        detail = _error_message(body)
        if status >= 500 or status in _UNAVAILABLE_STATUSES:
            msg = f"{self.name} answered {status} for key {key}: {detail}"
            raise ProviderUnavailableError(msg, status=status)
        if status == 409:
            error = body.get("error") if isinstance(body, dict) else None
            if isinstance(error, dict) and "recorded_identity_hash" in error:
                raise ProviderIdentityConflictError(
                    f"{self.name}: {detail}",
                    key=key,
                    recorded_hash=_str_or_none(error.get("recorded_identity_hash")),
                    new_hash=_str_or_none(error.get("request_identity_hash")),
                )
            msg = f"{self.name} refused key {key} (409): {detail}"
            raise ProviderConflictError(msg, status=409)
        msg = f"{self.name} answered {status} for key {key}: {detail}"
        raise ProviderRequestError(msg, status=status)

    def _result(self, body: Any, key: str) -> ProviderResult:
        """A 2xx body as a result; an unreadable one leaves the outcome unknown."""
        if not isinstance(body, dict) or not _has_id(body, self._id_field):
            msg = (
                f"{self.name} answered key {key} without a JSON object carrying "
                f"{self._id_field!r}; the outcome is unknown"
            )
            raise ProviderUnavailableError(msg)
        return ProviderResult.of(body, id_field=self._id_field)


def _decode(raw: bytes, status: int, name: str) -> Any:
    """JSON body, or the text itself for error pages; an unreadable 2xx stays unreadable."""
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        if 200 <= status < 300:
            _log.warning("provider_unreadable_body", provider=name, status=status)
        return raw[:500].decode("utf-8", "replace")


def _has_id(body: dict[str, Any], id_field: str) -> bool:
    ref = body.get(id_field)
    return isinstance(ref, str | int) and not isinstance(ref, bool) and ref != ""


def _error_message(body: Any) -> str:
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
        if isinstance(error, str):
            return error
    return str(body)[:500]


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None
