"""The reconciler's view of the providers: one adapter per name, bounded and patient per provider.

Each provider gets its own concurrency limit, per-call timeout, retries with backoff inside a
pass, and a circuit: after a lookup ends UNKNOWN the provider is left alone for a backoff that
grows with consecutive failures, so a provider that is down is not hammered every poll.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass
from types import TracebackType
from typing import Self, TypeVar, overload

import structlog

from agentledger.errors import ProviderError, ProviderRequestError, ProviderUnavailableError
from agentledger.events.models import now_ms
from agentledger.providers.http import HttpProvider
from agentledger.providers.protocol import (
    LookupResult,
    Provider,
    ProviderResult,
    supports_compensation,
)
from agentledger.reconciler.settings import ProviderPolicy, ReconcilerSettings

T = TypeVar("T")
_log = structlog.get_logger(__name__)


@dataclass
class ProviderHealth:
    """Consecutive UNKNOWN outcomes of one provider, and when to try it again (epoch ms)."""

    failures: int = 0
    retry_at: int = 0

    def available(self, now: int) -> bool:
        """True when the provider may be called now."""
        return now >= self.retry_at

    def failed(self, now: int, policy: ProviderPolicy, jitter: float) -> None:
        """One more pass found the provider unavailable: back off further."""
        self.failures += 1
        self.retry_at = now + policy.backoff.delay_ms(self.failures, jitter)

    def succeeded(self) -> None:
        """The provider answered: call it freely again."""
        self.failures = 0
        self.retry_at = 0


class ProviderPool:
    """Adapters by provider name (an unnamed fallback serves any other name), with policies."""

    def __init__(
        self,
        adapters: Mapping[str, Provider],
        *,
        policy: Callable[[str], ProviderPolicy],
        fallback: Provider | None = None,
        clock: Callable[[], int] = now_ms,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self._adapters = dict(adapters)
        self._policy = policy
        self._fallback = fallback
        self._clock = clock
        self._sleep = sleep
        self._jitter = jitter
        self._limits: dict[str, asyncio.Semaphore] = {}
        self._health: dict[str, ProviderHealth] = {}
        self._stack: AsyncExitStack | None = None

    @classmethod
    def from_settings(
        cls, settings: ReconcilerSettings, adapters: Mapping[str, Provider] | None = None
    ) -> ProviderPool:
        """HTTP adapters for every provider with a URL in settings; ``adapters`` take precedence."""
        built: dict[str, Provider] = {}
        for name, policy in settings.reconciler_providers.items():
            if policy.url is not None:
                built[name] = HttpProvider(
                    policy.url,
                    name=name,
                    timeout_s=policy.timeout_s,
                    connect_timeout_s=settings.provider_connect_timeout_s,
                )
        built.update(adapters or {})
        fallback = None
        if settings.provider_url is not None:
            default = settings.reconciler_default_provider
            fallback = HttpProvider(
                settings.provider_url,
                timeout_s=default.timeout_s,
                connect_timeout_s=settings.provider_connect_timeout_s,
            )
        return cls(built, policy=settings.policy, fallback=fallback)

    async def start(self) -> None:
        """Start every adapter (idempotent)."""
        if self._stack is not None:
            return
        stack = AsyncExitStack()
        try:
            for adapter in self._all():
                await stack.enter_async_context(adapter)
        except BaseException:
            await stack.aclose()  # the adapters started before the one that failed
            raise
        self._stack = stack

    async def stop(self) -> None:
        """Stop every adapter (idempotent)."""
        stack, self._stack = self._stack, None
        if stack is not None:
            await stack.aclose()

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

    def adapter(self, name: str) -> Provider | None:
        """The adapter serving provider ``name``, or None."""
        return self._adapters.get(name, self._fallback)

    def available(self, name: str) -> bool:
        """False while provider ``name`` is backed off after an UNKNOWN."""
        return self._health_of(name).available(self._clock())

    def health(self, name: str) -> ProviderHealth:
        """The circuit state of provider ``name``."""
        return self._health_of(name)

    async def lookup(
        self, name: str, kind: str, key: str, *, unless: asyncio.Event | None = None
    ) -> LookupResult | ProviderError | None:
        """Ask provider ``name`` about ``key``: the answer, or the error that ended the tries;
        None when ``unless`` was set before a try got its turn (nothing was asked, nothing is
        known: the caller writes no finding)."""
        adapter = self.adapter(name)
        if adapter is None:
            return self._no_adapter(name)
        return await self._call(
            name, lambda: adapter.lookup(kind, key), timed=self._timed(adapter, name), unless=unless
        )

    async def compensate(
        self, name: str, kind: str, external_ref: str, key: str
    ) -> ProviderResult | ProviderError:
        """Undo ``external_ref`` at provider ``name`` under ``key`` (idempotent, so retried)."""
        adapter = self.adapter(name)
        if adapter is None:
            return self._no_adapter(name)
        if not supports_compensation(adapter):
            msg = f"the adapter of provider {name!r} cannot compensate effects"
            return ProviderRequestError(msg)
        return await self._call(name, lambda: adapter.compensate(kind, external_ref, key))

    def can_compensate(self, name: str) -> bool:
        """True when provider ``name`` has an adapter that can undo effects."""
        adapter = self.adapter(name)
        return adapter is not None and supports_compensation(adapter)

    def _timed(self, adapter: Provider, name: str) -> bool:
        """True when ``adapter`` bounds its own calls within the policy's timeout (an HTTP
        adapter built with it): no second timer per call is needed."""
        return (
            isinstance(adapter, HttpProvider) and adapter.timeout_s <= self._policy(name).timeout_s
        )

    @overload
    async def _call(
        self, name: str, call: Callable[[], Awaitable[T]], *, timed: bool = ...
    ) -> T | ProviderError: ...

    @overload
    async def _call(
        self,
        name: str,
        call: Callable[[], Awaitable[T]],
        *,
        timed: bool = ...,
        unless: asyncio.Event | None,
    ) -> T | ProviderError | None: ...

    async def _call(
        self,
        name: str,
        call: Callable[[], Awaitable[T]],
        *,
        timed: bool = False,
        unless: asyncio.Event | None = None,
    ) -> T | ProviderError | None:
        """``call`` within the provider's concurrency, timeout (the adapter's own when ``timed``)
        and tries; the error that ended the tries instead of raising it; None when ``unless``
        was set when a try got its turn (it is not made)."""
        policy = self._policy(name)
        limit = self._limits.get(name)
        if limit is None:
            limit = self._limits[name] = asyncio.Semaphore(policy.concurrency)
        health = self._health_of(name)
        # Built only once a try failed: this path runs once per lookup.
        last: ProviderError | None = None
        for attempt in range(1, policy.attempts + 1):
            try:
                async with limit:
                    if unless is not None and unless.is_set():
                        return None
                    if timed:
                        result = await call()
                    else:
                        async with asyncio.timeout(policy.timeout_s):
                            result = await call()
            except TimeoutError:
                last = ProviderUnavailableError(f"{name} did not answer in {policy.timeout_s}s")
            except ProviderUnavailableError as e:
                last = e
            except ProviderError as e:
                return e
            else:
                health.succeeded()
                return result
            if attempt < policy.attempts:
                await self._sleep(policy.backoff.delay_ms(attempt, self._jitter()) / 1000)
        if last is None:  # no try was made (attempts >= 1 makes it unreachable)
            last = ProviderUnavailableError(f"{name} was not called")
        health.failed(self._clock(), policy, self._jitter())
        _log.warning(
            "provider_unavailable", provider=name, error=str(last), failures=health.failures
        )
        return last

    def _health_of(self, name: str) -> ProviderHealth:
        health = self._health.get(name)
        if health is None:
            health = self._health[name] = ProviderHealth()
        return health

    def _all(self) -> list[Provider]:
        adapters = list(self._adapters.values())
        if self._fallback is not None:
            adapters.append(self._fallback)
        unique: dict[int, Provider] = {id(a): a for a in adapters}
        return list(unique.values())

    @staticmethod
    def _no_adapter(name: str) -> ProviderError:
        msg = (
            f"no adapter for provider {name!r}: set AGENTLEDGER_PROVIDER_URL or add it to "
            'AGENTLEDGER_RECONCILER_PROVIDERS (JSON: {"' + name + '": {"url": "http://…"}})'
        )
        return ProviderRequestError(msg)
