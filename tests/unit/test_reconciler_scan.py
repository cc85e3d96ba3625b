"""Run-level findings: orphans, expired pauses, overruns, cleared conditions, compensations."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agentledger.alerts.model import AlertCondition, AlertRecord, new_record
from agentledger.leases import Lease
from agentledger.reconciler.scan import (
    alerts_for,
    budget_overruns,
    cleared,
    compensation_key,
    compensations_due,
    is_orphan,
)
from agentledger.reconciler.settings import ProviderPolicy, ReconcilerSettings
from agentledger.views.model import Budget, EffectView, Pause, RunView, StepView

LEASE = Lease("r", "w1", 3, 10**15)


def view(status: str = "running", updated_at: int = 0, **kw: object) -> RunView:
    """A run view in ``status``, last written at ``updated_at``."""
    return RunView(run_id="r", status=status, updated_at=updated_at, worker_id="w1", **kw)


def effect(state: str, step: int = 0, **kw: object) -> EffectView:
    """An effect of step ``step`` in ``state``."""
    return EffectView(
        idempotency_key=f"k{step}",
        step=step,
        ordinal=0,
        effect="refund",
        provider="p",
        kind="payments",
        identity_hash="i",
        payload_hash="h",
        state=state,
        external_ref="pay_1",
        **kw,
    )


def test_orphan_needs_running_no_lease_no_open_intent_and_idle() -> None:
    """Only a running run with no lease, no open intent and idle past grace is an orphan."""
    assert is_orphan(view(updated_at=0), None, 31_000, 30_000)
    assert not is_orphan(view(updated_at=0), LEASE, 31_000, 30_000)
    assert not is_orphan(view(updated_at=2_000), None, 31_000, 30_000)
    assert not is_orphan(view("paused"), None, 31_000, 30_000)
    busy = view(effects={"k0": effect("intended")})
    assert not is_orphan(busy, None, 31_000, 30_000)


def test_alerts_for_orphan_pause_and_budget() -> None:
    """Each run-level condition is reported with its stable code."""
    orphan = alerts_for(view(), 40_000, None, orphan_grace_ms=30_000)
    assert [c.code for c in orphan] == ["run.orphaned"]
    paused = view("paused", pause=Pause(reason="approval", expires_at=1_000))
    assert [c.code for c in alerts_for(paused, 2_000, None, orphan_grace_ms=0)] == [
        "run.pause_expired"
    ]
    assert alerts_for(paused, 500, None, orphan_grace_ms=0) == []
    spent = view(updated_at=10**12, budget=Budget(max_tokens=10, tokens=11))
    assert [c.code for c in alerts_for(spent, 0, LEASE, orphan_grace_ms=0)] == [
        "run.budget_overrun"
    ]


def test_budget_overruns_name_each_limit_and_stop_at_finish() -> None:
    """Every limit past is named; a finished run has no overrun to report."""
    b = Budget(max_usd=1.0, usd=1.5, max_steps=2, steps=3, deadline_at=100)
    over = budget_overruns(view(budget=b), 200)
    assert len(over) == 3
    assert over[0].startswith("usd")
    assert budget_overruns(view("budget_exceeded", budget=b), 200) == []


def record(
    code: str, key: str | None = None, run: str | None = "r", scope: str | None = None
) -> AlertRecord:
    """A stored record of ``code``."""
    cond = AlertCondition(code=code, run_id=run, idempotency_key=key, scope=scope, summary="s")
    return new_record(cond, source="t", now=0)


def test_cleared_effect_alert_when_effect_settles() -> None:
    """effect.unknown holds while the intent is open and clears once it is landed."""
    rec = record("effect.unknown", key="k0")
    assert cleared(rec, view(effects={"k0": effect("unknown")}), None, 0, orphan_grace_ms=0) is None
    why = cleared(rec, view(effects={"k0": effect("landed")}), None, 0, orphan_grace_ms=0)
    assert why is not None
    assert "landed" in why


def test_cleared_orphan_when_a_worker_holds_the_lease() -> None:
    """run.orphaned clears once a worker holds the run's lease again."""
    rec = record("run.orphaned")
    assert cleared(rec, view(), None, 40_000, orphan_grace_ms=30_000) is None
    why = cleared(rec, view(), LEASE, 40_000, orphan_grace_ms=30_000)
    assert why is not None
    assert "w1" in why


def test_dead_letters_and_vanished_runs() -> None:
    """A dead-letter alert only ends by ack; a run-scoped alert ends when its run is gone."""
    dl = record("deadletter.record", run=None, scope="t.runs.steps")
    assert cleared(dl, None, None, 0, orphan_grace_ms=0) is None
    assert cleared(record("run.orphaned"), None, None, 0, orphan_grace_ms=0) is not None


def test_compensations_due_only_after_final_rejection() -> None:
    """Performed effects of rejected steps are undone only once the run ended without success."""
    steps = {0: StepView(step=0, name="s", status="rejected"), 1: StepView(step=1, name="t")}
    effects = {
        "k0": effect("succeeded", 0),
        "k1": effect("succeeded", 1),
    }
    failed = view("failed", steps=steps, effects=effects)
    assert [e.idempotency_key for e in compensations_due(failed)] == ["k0"]
    assert compensations_due(view("running", steps=steps, effects=effects)) == []
    assert compensations_due(view("succeeded", steps=steps, effects=effects)) == []
    done = {"k0": effect("succeeded", 0, compensation_key="k0:compensate")}
    assert compensations_due(view("failed", steps=steps, effects=done)) == []


def test_compensation_key_is_deterministic_and_fits_a_header() -> None:
    """The compensation key derives from the effect's key alone and stays within 255 chars."""
    assert compensation_key("run:1:refund:0") == "run:1:refund:0:compensate"
    long = compensation_key("x" * 250)
    assert long == compensation_key("x" * 250)
    assert len(long) <= 255


def test_settings_refuse_a_lease_shorter_than_a_lookup() -> None:
    """A lease ttl below the worst-case lookup time is refused with the setting to change."""
    with pytest.raises(ValidationError, match="AGENTLEDGER_RECONCILER_LEASE_TTL_MS"):
        ReconcilerSettings(
            reconciler_lease_ttl_ms=1_000,
            reconciler_default_provider=ProviderPolicy(attempts=3, timeout_s=1.0),
        )
    with pytest.raises(ValidationError, match="AGENTLEDGER_WEBHOOK_URL"):
        ReconcilerSettings(webhook_url="ftp://x")
    ok = ReconcilerSettings(reconciler_providers={"pay": ProviderPolicy(concurrency=2)})
    assert ok.policy("pay").concurrency == 2
    assert ok.policy("other").concurrency == 16
