"""Small pure helpers the view stores share: retention TTLs and intent index members."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from agentledger.events.models import FINISHED_STATUSES
from agentledger.views.model import RunView

if TYPE_CHECKING:
    from agentledger.views.store import FreshRun


def retention_ttl(view: RunView, retention_ms: int | None, now: int) -> int | None:
    """Milliseconds a finished run's keys still live (<= 0: already past), None = keep."""
    ended = view.finished_at if view.finished_at is not None else view.updated_at
    return ttl_after(view.status, ended, retention_ms, now)


def ttl_after(status: str, ended: int, retention_ms: int | None, now: int) -> int | None:
    """:func:`retention_ttl` of a run with ``status`` that ended at ``ended`` (its
    ``finished_at``, else its ``updated_at``)."""
    if retention_ms is None or status not in FINISHED_STATUSES:
        return None
    return ended + retention_ms - now


def unexpired(
    runs: Iterable[FreshRun], retention_ms: int | None, now: int, expired: set[str]
) -> Iterator[tuple[FreshRun, int | None]]:
    """Each run of a fresh namespace still inside its retention, with its TTL (None = keep);
    the ids of the others are added to ``expired`` (stored nowhere, indexed nowhere)."""
    for run in runs:
        ttl = ttl_after(run.status, run.ended_at, retention_ms, now)
        if ttl is not None and ttl <= 0:
            expired.add(run.run_id)
            continue
        yield run, ttl


def intent_member(run_id: str, idempotency_key: str) -> str:
    """The open-intents index member of one effect (JSON: unambiguous for any ids)."""
    return json.dumps([run_id, idempotency_key], separators=(",", ":"))


def parse_intent_member(member: str) -> tuple[str, str]:
    """Inverse of :func:`intent_member`."""
    run_id, key = json.loads(member)
    return str(run_id), str(key)
