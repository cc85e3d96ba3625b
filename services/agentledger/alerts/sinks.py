"""Where alerts go besides the alerts topic: structured logs and HTTP webhooks.

A webhook POSTs :func:`alert_body` by default, or another body (PagerDuty's, Slack's: see
:mod:`agentledger.alerts.vendors`).

The webhook sink retries a failing receiver with backoff and, once its attempts are spent (or the
receiver refuses the alert with a 4xx that retrying cannot fix), keeps the alert in its own dead
letter. Every POST carries ``Idempotency-Key: <event id>`` so a receiver can drop the duplicate a
timeout may cause.
"""

from __future__ import annotations

import asyncio
import json
import random
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from types import TracebackType
from typing import Any, Self

import aiohttp
import structlog

from agentledger.alerts.delivery import SinkDeadLetter, UndeliveredAlert
from agentledger.alerts.retry import Backoff
from agentledger.events.models import Alert, now_ms

_log = structlog.get_logger(__name__)
_RETRYABLE_STATUSES = frozenset({408, 425, 429})


def alert_body(alert: Alert) -> dict[str, Any]:
    """The JSON a receiver gets: every Alert field plus ``detail`` decoded from ``detail_json``."""
    body: dict[str, Any] = alert.model_dump(mode="json")
    body["detail"] = json.loads(alert.detail_json)
    return body


class AlertSink(ABC):
    """Delivers alert events somewhere; ``deliver`` returns True once delivered."""

    name: str

    async def start(self) -> None:  # noqa: B027  # optional hook: the log sink holds nothing
        """Acquire resources; none by default."""

    async def stop(self) -> None:  # noqa: B027  # optional hook, as start
        """Release resources (idempotent); none by default."""

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
    async def deliver(self, alert: Alert) -> bool:
        """Deliver ``alert``; False when given up (and dead-lettered)."""


class LogSink(AlertSink):
    """One structured log line per alert event (warning when open, info when closed)."""

    name = "log"

    async def deliver(self, alert: Alert) -> bool:
        """Log it."""
        log = _log.warning if alert.state == "open" else _log.info
        log(
            "alert",
            code=alert.code,
            severity=alert.severity,
            state=alert.state,
            alert_id=alert.alert_id,
            run_id=alert.run_id,
            step=alert.step,
            effect=alert.effect,
            idempotency_key=alert.idempotency_key,
            worker_id=alert.worker_id,
            count=alert.count,
            summary=alert.summary,
            action=alert.action,
            detail=alert.detail_json,
        )
        return True


class WebhookSink(AlertSink):
    """POSTs each alert as JSON to ``url``; retries with backoff; dead-letters what never lands."""

    name = "webhook"

    def __init__(
        self,
        url: str,
        *,
        dead_letter: SinkDeadLetter,
        name: str = "webhook",
        body: Callable[[Alert], dict[str, Any]] = alert_body,
        attempts: int = 8,
        backoff: Backoff | None = None,
        timeout_s: float = 5.0,
        headers: Mapping[str, str] | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        jitter: Callable[[], float] = random.random,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self.url = url
        self.name = name
        self._body = body
        self._dead_letter = dead_letter
        self._attempts = max(attempts, 1)
        self._backoff = backoff or Backoff(base_ms=200, max_ms=10_000)
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._headers = dict(headers or {})
        self._sleep = sleep
        self._jitter = jitter
        self._clock = clock
        self._session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        """Open the connection pool (idempotent)."""
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self._timeout, headers=self._headers)

    async def stop(self) -> None:
        """Close the connection pool (idempotent)."""
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    async def deliver(self, alert: Alert) -> bool:
        """POST until a 2xx, a refusal, or the last attempt; then dead-letter on failure."""
        await self.start()
        error = ""
        attempt = 0
        for attempt in range(1, self._attempts + 1):
            retry, error = await self._post(alert)
            if not error:
                return True
            _log.warning(
                "webhook_delivery_failed",
                alert_id=alert.alert_id,
                event_id=alert.event_id,
                attempt=attempt,
                retry=retry,
                error=error,
            )
            if not retry:
                break
            if attempt < self._attempts:
                await self._sleep(self._backoff.delay_ms(attempt, self._jitter()) / 1000)
        await self._dead_letter.add(
            UndeliveredAlert(
                sink=self.name, alert=alert, attempts=attempt, error=error, failed_at=self._clock()
            )
        )
        _log.error(
            "webhook_dead_lettered", alert_id=alert.alert_id, event_id=alert.event_id, error=error
        )
        return False

    async def _post(self, alert: Alert) -> tuple[bool, str]:
        """One POST: ``(retryable, error)`` with an empty error on success."""
        if self._session is None:
            return False, "the webhook sink is stopped"
        headers = {"Idempotency-Key": alert.event_id, "X-Agentledger-Alert-Code": alert.code}
        try:
            async with self._session.post(
                self.url, json=self._body(alert), headers=headers
            ) as response:
                status = response.status
                text = (await response.read())[:300].decode("utf-8", "replace")
        except (aiohttp.ClientError, TimeoutError) as e:
            return True, f"{type(e).__name__}: {e}"
        if 200 <= status < 300:
            return False, ""
        retry = status >= 500 or status in _RETRYABLE_STATUSES
        return retry, f"HTTP {status}: {text}"
