"""What the console's pages show: runs filtered and searched, one run's detail, open alerts.

Plain functions of views (``matches``, ``run_row``) plus :class:`ConsoleReads`, which reads them
the way ``runs list|show`` and ``alerts list`` do: Redis views first, Kafka's fold for a run the
projector has not seen, the leases for the owner, the alert store for alerts.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis

from agentledger.alerts.model import AlertRecord
from agentledger.alerts.redis_store import RedisAlertStore
from agentledger.events.models import now_ms
from agentledger.fleet import RunLookup, run_detail, run_summary
from agentledger.redisclient import redis_client
from agentledger.views.keys import STATUSES
from agentledger.views.model import RunView

from .settings import ConsoleSettings


@dataclass(frozen=True)
class RunFilter:
    """The runs list's filters; empty fields match every run."""

    status: str = ""
    agent: str = ""
    max_age_s: float | None = None  # updated at most this long ago
    min_usd: float | None = None  # spent at least this much
    open_effects: bool = False  # only runs with an intended/unknown effect
    q: str = ""  # run id (substring), idempotency key or external reference (exact)

    @classmethod
    def from_query(cls, query: dict[str, str]) -> RunFilter:
        """The filter named by a page's query string (unparsable numbers are ignored)."""
        return cls(
            status=query.get("status", "") if query.get("status", "") in STATUSES else "",
            agent=query.get("agent", "").strip(),
            max_age_s=_number(query.get("max_age_s", "")),
            min_usd=_number(query.get("min_usd", "")),
            open_effects=query.get("open_effects", "") in {"1", "on", "true"},
            q=query.get("q", "").strip(),
        )


def _number(text: str) -> float | None:
    try:
        return float(text) if text.strip() else None
    except ValueError:
        return None


def search_hit(view: RunView, q: str) -> bool:
    """``q`` is part of the run id, or one of its effects' idempotency keys or external refs."""
    if not q:
        return True
    if q in view.run_id:
        return True
    return any(q in {e.idempotency_key, e.external_ref} for e in view.effects.values())


def matches(view: RunView, f: RunFilter, now: int) -> bool:
    """Whether the run passes every filter of ``f`` at time ``now`` (ms)."""
    if f.status and view.status != f.status:
        return False
    if f.agent and view.agent != f.agent:
        return False
    if f.max_age_s is not None and now - view.updated_at > f.max_age_s * 1000:
        return False
    if f.min_usd is not None and view.budget.usd < f.min_usd:
        return False
    if f.open_effects and not view.open_effects():
        return False
    return search_hit(view, f.q)


def run_row(view: RunView) -> dict[str, Any]:
    """One row of the runs list: ``runs list``'s summary plus cost and open effects."""
    return {
        **run_summary(view, None),
        "usd": view.budget.usd,
        "max_usd": view.budget.max_usd,
        "open_effects": len(view.open_effects()),
        "unknown_effects": sum(1 for e in view.effects.values() if e.state == "unknown"),
    }


class ConsoleReads:
    """The console's reads; an async context manager over a :class:`RunLookup` and Redis."""

    def __init__(self, settings: ConsoleSettings) -> None:
        self._settings = settings
        self._lookup = RunLookup(settings)  # refuses settings without Redis and Kafka
        self._redis: Redis = redis_client(settings.redis_url or "", settings=settings)
        self._alerts = RedisAlertStore(self._redis, settings.key_prefix)

    async def __aenter__(self) -> ConsoleReads:
        try:
            await self._lookup.__aenter__()
        except BaseException:
            await self._redis.aclose()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._lookup.__aexit__(*exc)
        await self._redis.aclose()

    async def runs(self, f: RunFilter) -> list[dict[str, Any]]:
        """The runs passing ``f``, most recently updated first."""
        now = now_ms()
        rows = []
        for status in (f.status,) if f.status else STATUSES:
            ids = await self._lookup.views.runs_by_status(
                status, limit=self._settings.console_list_limit
            )
            for run_id in ids:
                view = await self._lookup.views.load(run_id)
                if view is not None and matches(view, f, now):
                    rows.append(run_row(view))
        rows.sort(key=lambda r: r["updated_at"], reverse=True)
        return rows

    async def run(self, run_id: str) -> tuple[RunView, dict[str, Any]] | None:
        """The run's view and ``runs show``'s detail of it (None when it has no events)."""
        view, source = await self._lookup.view(run_id)
        if view is None:
            return None
        return view, run_detail(view, await self._lookup.leases.current(run_id), source)

    async def forks(self, run_id: str) -> list[dict[str, Any]]:
        """The runs in the views forked from ``run_id``."""
        return [r for r in await self.runs(RunFilter()) if r["parent_run_id"] == run_id]

    async def alerts(self) -> list[AlertRecord]:
        """Open and acknowledged alerts, as ``alerts list`` shows them."""
        records = await self._alerts.active()
        return sorted(records, key=lambda r: r.last_seen_at, reverse=True)

    async def fingerprint(self, run_id: str | None) -> str:
        """Changes whenever what a live page shows changes (its run, or any run and alert)."""
        if run_id is not None:
            view, _ = await self._lookup.view(run_id)
            return "-" if view is None else f"{view.applied_seq}:{view.updated_at}:{view.status}"
        runs = [(r["run_id"], r["updated_at"], r["status"]) for r in await self.runs(RunFilter())]
        alerts = [(a.alert_id, a.state, a.count) for a in await self.alerts()]
        text = json.dumps([runs, alerts])
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    async def counts(self) -> tuple[int, dict[str, int]]:
        """Open intents and runs per status (each up to the list limit), for the gauges."""
        limit = self._settings.console_list_limit
        intents = len(await self._lookup.views.open_intents(limit=limit))
        runs = {s: len(await self._lookup.views.runs_by_status(s, limit=limit)) for s in STATUSES}
        return intents, runs
