"""Small pure helpers the view stores share: retention TTLs and intent index members."""

from __future__ import annotations

import json

from agentledger.events.models import FINISHED_STATUSES
from agentledger.views.model import RunView


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


def intent_member(run_id: str, idempotency_key: str) -> str:
    """The open-intents index member of one effect (JSON: unambiguous for any ids)."""
    return json.dumps([run_id, idempotency_key], separators=(",", ":"))


def parse_intent_member(member: str) -> tuple[str, str]:
    """Inverse of :func:`intent_member`."""
    run_id, key = json.loads(member)
    return str(run_id), str(key)
