"""What ``runs list`` and ``runs show`` print: plain functions of a view and its lease."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from agentledger.events.models import now_ms
from agentledger.leases import Lease
from agentledger.views import RunView


def _owner(view: RunView, lease: Lease | None) -> dict[str, Any]:
    return {
        "fence": view.fence,
        "last_writer": view.worker_id,
        "owner": lease.owner if lease is not None else None,
        "lease_fence": lease.fence if lease is not None else None,
        "lease_expires_at": lease.expires_at if lease is not None else None,
    }


def pending_approval(view: RunView) -> dict[str, Any] | None:
    """What a run paused for approval asks, of whom, until when (None if it waits for none)."""
    pause = view.pause
    if view.status != "paused" or pause is None or pause.reason != "approval":
        return None
    payload = json.loads(pause.payload_json) if pause.payload_json else None
    return {
        "step": pause.step,
        "intent_hash": pause.intent_hash,
        "expires_at": pause.expires_at,
        "paused_at": pause.paused_at,
        "ask": payload.get("ask") if isinstance(payload, dict) else None,
        "approver": payload.get("approver") if isinstance(payload, dict) else None,
        "intent": payload.get("intent") if isinstance(payload, dict) else None,
    }


def run_summary(view: RunView, lease: Lease | None, source: str = "views") -> dict[str, Any]:
    """One row of ``runs list``."""
    return {
        "run_id": view.run_id,
        "status": view.status,
        "agent": view.agent,
        "cursor": view.cursor,
        "plan_steps": len(view.plan),
        "generation": view.generation,
        "parent_run_id": view.parent_run_id,
        **_owner(view, lease),
        "pending_approval": pending_approval(view) is not None,
        "updated_at": view.updated_at,
        "source": source,
    }


def run_detail(view: RunView, lease: Lease | None, source: str = "views") -> dict[str, Any]:
    """Everything ``runs show`` prints."""
    b = view.budget
    return {
        **run_summary(view, lease, source),
        "plan": list(view.plan),
        "plan_version": view.plan_version,
        "forked_from_step": view.forked_from_step,
        "versions": view.versions.model_dump(),
        "version_policy": view.version_policy,
        "budget": b.model_dump(),
        "pause": view.pause.model_dump() if view.pause is not None else None,
        "approval": pending_approval(view),
        "approvals": [a.model_dump() for a in view.approvals],
        "result_json": view.result_json,
        "error": view.error,
        "steps": [
            {
                "step": s.step,
                "name": s.name,
                "status": s.status,
                "attempt": s.attempt,
                "attempts": s.attempts,
                "inherited": s.inherited,
                "result_json": s.result_json,
                "result_ref_uri": s.result_ref_uri,
                "last_reason": s.last_reason,
            }
            for s in sorted(view.steps.values(), key=lambda s: s.step)
        ],
        "effects": [
            {
                "step": e.step,
                "ordinal": e.ordinal,
                "effect": e.effect,
                "kind": e.kind,
                "provider": e.provider,
                "state": e.state,
                "idempotency_key": e.idempotency_key,
                "external_ref": e.external_ref,
                "inherited": e.inherited,
            }
            for e in sorted(view.effects.values(), key=lambda e: (e.step, e.ordinal))
        ],
    }


def _ago(ms: int | None, now: int) -> str:
    if not ms:
        return "-"
    seconds = (now - ms) / 1000
    return f"{seconds:.0f}s ago" if seconds >= 0 else f"in {-seconds:.0f}s"


def render_list(rows: Sequence[dict[str, Any]]) -> str:
    """The table of ``runs list``."""
    if not rows:
        return "no runs"
    now = now_ms()
    header = ("RUN", "STATUS", "AGENT", "CURSOR", "FENCE", "OWNER", "APPROVAL", "UPDATED")
    table = [header] + [
        (
            r["run_id"],
            r["status"],
            r["agent"],
            f"{r['cursor']}/{r['plan_steps']}",
            str(r["fence"]),
            r["owner"] or "-",
            "waiting" if r["pending_approval"] else "-",
            _ago(r["updated_at"], now),
        )
        for r in rows
    ]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in table
    )


def render_show(d: dict[str, Any]) -> str:
    """The page of ``runs show``."""
    now = now_ms()
    b = d["budget"]
    v = d["versions"]
    lines = [
        f"run        {d['run_id']}  ({d['agent']}, generation {d['generation']}, "
        f"from {d['source']})",
        f"status     {d['status']}" + (f"  error: {d['error']}" if d["error"] else ""),
        f"cursor     {d['cursor']}/{d['plan_steps']}  plan v{d['plan_version']}: "
        + ", ".join(d["plan"]),
        f"fence      {d['fence']} (last writer {d['last_writer'] or '-'}); lease: "
        + (
            f"{d['owner']} fence {d['lease_fence']}, expires {_ago(d['lease_expires_at'], now)}"
            if d["owner"]
            else "free"
        ),
        f"budget     tokens {b['tokens']}/{b['max_tokens'] or '∞'}, usd {b['usd']:.6f}/"
        f"{b['max_usd'] or '∞'}, steps {b['steps']}/{b['max_steps'] or '∞'}, "
        f"consecutive errors {b['consecutive_errors']}",
        f"versions   code {v['code']}, prompt {v['prompt']}, tools {v['tool_schema']}, "
        f"model {v['model']} (policy {d['version_policy']})",
    ]
    if d["parent_run_id"]:
        lines.append(f"forked     from {d['parent_run_id']} at step {d['forked_from_step']}")
    approval = d["approval"]
    if approval is not None:
        lines.append(
            f"approval   waiting: {approval['ask']!r} (step {approval['step']}, intent "
            f"{approval['intent_hash']}, expires {_ago(approval['expires_at'], now)})"
        )
    for a in d["approvals"]:
        lines.append(
            f"decision   {a['decision']} by {a['approver'] or '?'} (generation {a['generation']}, "
            f"intent {a['intent_hash']}, expires {_ago(a['expires_at'], now)})"
        )
    lines.append("steps")
    for s in d["steps"]:
        tag = " inherited" if s["inherited"] else ""
        lines.append(
            f"  {s['step']:>3} {s['name']:<16} {s['status']:<12} attempts {s['attempts']}{tag}  "
            f"{_clip(s['result_json'])}"
        )
    lines.append("effects")
    for e in d["effects"]:
        tag = " inherited" if e["inherited"] else ""
        lines.append(
            f"  step {e['step']} {e['effect']:<16} {e['state']:<11} ref {e['external_ref'] or '-'}"
            f"  key {e['idempotency_key']}{tag}"
        )
    return "\n".join(lines)


def _clip(text: str, width: int = 60) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
