"""The reconciler's pure decisions: findings, due intents, and the writes planned for a run."""

from __future__ import annotations

import json
import uuid

from agentledger.errors import (
    ProviderIdentityConflictError,
    ProviderRequestError,
    ProviderUnavailableError,
)
from agentledger.events.models import (
    EffectIntended,
    EffectReconciled,
    EffectRecorded,
    RunEvent,
    RunFinished,
    RunPaused,
    RunStarted,
    StepStarted,
)
from agentledger.leases import Lease
from agentledger.providers.protocol import LookupResult, ProviderResult
from agentledger.reconciler.decide import (
    EFFECT_UNKNOWN_REASON,
    Resolution,
    decide,
    intent_due,
    plan_run,
)
from agentledger.views import RunView, fold

IDENT = "a" * 64


def run_view(*extra: RunEvent, keys: tuple[str, ...] = ("k1",), at: int = 1_000) -> RunView:
    """A running run (fence 1) at step 0 with one intent per key, plus ``extra`` events."""
    events: list[RunEvent] = [
        RunStarted(
            run_id="r", seq=1, fence=1, worker_id="w", agent="a", plan=["s0"], occurred_at=at
        ),
        StepStarted(run_id="r", seq=2, fence=1, worker_id="w", step=0, step_name="s0", attempt=1),
    ]
    for n, key in enumerate(keys):
        events.append(
            EffectIntended(
                run_id="r",
                seq=3 + n,
                fence=1,
                worker_id="w",
                step=0,
                ordinal=n,
                effect=f"e{n}",
                provider="sandbox",
                kind="payments",
                idempotency_key=key,
                identity_hash=IDENT,
                payload_hash="p",
                occurred_at=at,
            )
        )
    seq = len(events)
    for e in extra:
        seq += 1
        events.append(e.model_copy(update={"seq": seq}))
    result = fold(RunView(run_id="r"), events)
    assert not result.parked
    assert not result.stale
    return result.view


def found(identity_hash: str = IDENT) -> LookupResult:
    """A lookup that found pay_1 with this identity hash."""
    return LookupResult.of(ProviderResult.of({"id": "pay_1", "identity_hash": identity_hash}))


def test_found_with_same_identity_is_landed() -> None:
    """A lookup that finds the key with the intent's identity is LANDED with the provider's ref."""
    view = run_view()
    res = decide(view.effects["k1"], found())
    assert res.finding == "LANDED"
    assert res.external_ref == "pay_1"
    assert res.response_hash


def test_missing_is_not_landed() -> None:
    """A lookup that finds nothing is NOT_LANDED: safe to send with the same key."""
    res = decide(run_view().effects["k1"], LookupResult.missing())
    assert res.finding == "NOT_LANDED"
    assert res.external_ref is None


def test_unreachable_is_unknown() -> None:
    """A provider that cannot answer gives UNKNOWN, never a guess."""
    res = decide(run_view().effects["k1"], ProviderUnavailableError("down", status=503))
    assert res.finding == "UNKNOWN"
    assert not res.identity_mismatch


def test_other_identity_under_the_key_is_a_mismatch() -> None:
    """The key found holding another identity is UNKNOWN and flagged as an identity mismatch."""
    res = decide(run_view().effects["k1"], found(identity_hash="b" * 64))
    assert res.finding == "UNKNOWN"
    assert res.identity_mismatch
    assert "b" * 64 in res.detail
    assert IDENT in res.detail


def test_conflict_and_request_errors_are_unknown() -> None:
    """A 409 is a mismatch and a 4xx an unknown: neither is treated as landed or not landed."""
    intent = run_view().effects["k1"]
    conflict = ProviderIdentityConflictError("409", key="k1", recorded_hash="x", new_hash="y")
    assert decide(intent, conflict).identity_mismatch
    assert decide(intent, ProviderRequestError("bad kind")).finding == "UNKNOWN"


def test_intent_due_needs_no_live_writer_and_age() -> None:
    """An intent is due only past the grace period and when nobody holds the run's lease."""
    view = run_view(at=1_000)
    intent = view.effects["k1"]
    lease = Lease("r", "w", 1, 99_999)
    assert intent_due(intent, view, None, 7_000, 5_000)
    assert not intent_due(intent, view, None, 5_999, 5_000)
    assert not intent_due(intent, view, lease, 7_000, 5_000)


def test_unknown_intent_of_finished_run_is_left_to_a_person() -> None:
    """Once a run finished, an intent already found UNKNOWN is not looked up again."""
    unknown = EffectReconciled(
        run_id="r",
        seq=1,
        fence=1,
        worker_id="x",
        step=0,
        effect="e0",
        idempotency_key="k1",
        finding="UNKNOWN",
    )
    done = RunFinished(run_id="r", seq=1, fence=1, worker_id="w", status="cancelled")
    view = run_view(unknown, done)
    assert not intent_due(view.effects["k1"], view, None, 99_000, 0)


def test_plan_landed_writes_finding_and_requests_resume() -> None:
    """LANDED on a running run: EffectReconciled after the view's seq under our fence,; resume."""
    view = run_view()
    res = decide(view.effects["k1"], found())
    plan = plan_run(view, [res], fence=7, writer="rec", now=5)
    [event] = plan.events
    assert isinstance(event, EffectReconciled)
    assert (event.seq, event.fence, event.worker_id) == (view.applied_seq + 1, 7, "rec")
    assert event.finding == "LANDED"
    assert event.external_ref == "pay_1"
    assert [r.run_id for r in plan.requests] == ["r"]
    assert not plan.raise_
    assert "effect.unknown|r|k1||" in plan.clear
    after = fold(view, plan.events)
    assert after.applied == plan.events
    assert after.view.effects["k1"].state == "landed"


def test_plan_unknown_pauses_and_alerts_without_resume() -> None:
    """UNKNOWN on a running run: the finding, a RunPaused(effect_unknown), one alert, no resume."""
    view = run_view()
    res = decide(view.effects["k1"], ProviderUnavailableError("down"))
    plan = plan_run(view, [res], fence=7, writer="rec", now=5)
    assert [type(e) for e in plan.events] == [EffectReconciled, RunPaused]
    pause = plan.events[1]
    assert isinstance(pause, RunPaused)
    assert pause.reason == EFFECT_UNKNOWN_REASON
    assert json.loads(pause.payload_json)["idempotency_keys"] == ["k1"]
    assert [c.code for c in plan.raise_] == ["effect.unknown"]
    assert not plan.requests
    after = fold(view, plan.events).view
    assert after.status == "paused"
    assert after.effects["k1"].state == "unknown"


def test_planned_events_carry_fresh_version_4_ids() -> None:
    """Every event and request plan_run makes has its own id, the hex of a version-4 UUID."""
    view = run_view(keys=("k1", "k2"))
    landed = decide(view.effects["k1"], found())
    unknown = decide(view.effects["k2"], ProviderUnavailableError("down"))
    paused = plan_run(view, [landed, unknown], fence=7, writer="rec", now=5)
    resumed = plan_run(view, [landed, decide(view.effects["k2"], found())], fence=7, writer="rec",
                       now=5)  # fmt: skip
    made = [*paused.events, *resumed.events, *resumed.requests]
    assert [type(e).__name__ for e in made] == [
        "EffectReconciled", "EffectReconciled", "RunPaused",
        "EffectReconciled", "EffectReconciled", "ResumeRequested",
    ]  # fmt: skip
    ids = [e.event_id for e in made]
    assert len(set(ids)) == len(ids)
    for text in ids:
        assert uuid.UUID(hex=text).version == 4
        assert uuid.UUID(hex=text).hex == text


def test_repeated_unknown_writes_nothing_new() -> None:
    """An intent already UNKNOWN in a run already paused gets no new events, only the sighting."""
    first = run_view()
    plan = plan_run(
        first, [Resolution("k1", "UNKNOWN", detail="down")], fence=7, writer="rec", now=5
    )
    view = fold(first, plan.events).view
    again = plan_run(
        view, [Resolution("k1", "UNKNOWN", detail="down")], fence=8, writer="rec", now=6
    )
    assert again.events == []
    assert again.requests == []
    assert [c.code for c in again.raise_] == ["effect.unknown"]


def test_resolution_of_paused_run_resumes_only_effect_pauses() -> None:
    """A run paused for an unknown effect resumes once resolved; one paused for approval not."""
    landed = Resolution("k1", "LANDED", external_ref="pay_1")
    for reason, resumes in ((EFFECT_UNKNOWN_REASON, 1), ("approval", 0)):
        pause = RunPaused(run_id="r", seq=1, fence=1, worker_id="w", reason=reason)
        plan = plan_run(run_view(pause), [landed], fence=7, writer="rec", now=5)
        assert len(plan.requests) == resumes


def test_one_unknown_among_resolved_pauses_the_run() -> None:
    """With one intent landed and another unknown, the run is paused and not resumed."""
    view = run_view(keys=("k1", "k2"))
    plan = plan_run(
        view,
        [Resolution("k1", "LANDED", external_ref="x"), Resolution("k2", "UNKNOWN", detail="?")],
        fence=7,
        writer="rec",
        now=5,
    )
    assert [type(e) for e in plan.events] == [EffectReconciled, EffectReconciled, RunPaused]
    assert not plan.requests


def test_findings_for_settled_intents_are_dropped() -> None:
    """A finding about an intent the view already shows settled is not written."""
    recorded = EffectRecorded(
        run_id="r",
        seq=1,
        fence=1,
        worker_id="w",
        step=0,
        effect="e0",
        idempotency_key="k1",
        outcome="succeeded",
        external_ref="pay_1",
    )
    plan = plan_run(
        run_view(recorded), [Resolution("k1", "NOT_LANDED")], fence=7, writer="rec", now=5
    )
    assert plan.events == []
    assert plan.requests == []
