"""``agentledger effects resolve`` on the real stack: an operator settles an effect by hand."""

from __future__ import annotations

import asyncio
import sys

import pytest

from agentledger._core.keys import effect_key
from agentledger.errors import LeaseHeldError, RunError
from agentledger.events.models import (
    EffectReconciled,
    EffectRecorded,
    RunEvent,
    RunStarted,
    StepStarted,
)
from agentledger.providers.faults import FaultRule
from agentledger.reconciler.resolve import Verdict
from agentledger.reconciler.settle import Settled, open_settler
from tests.integration.test_reconciler import (
    EFFECT,
    Env,
    env,
    intent,
    module_settings,
    reconcile_once,
    requests_for,
    topic_events,
)
from tests.integration.test_reconciler_cli import cli, environment

pytestmark = pytest.mark.integration
__all__ = ["env", "module_settings"]

NOT_LANDED = Verdict(landed=False, external_ref=None, note="not in the dashboard", by="oncall")


async def settle(e: Env, run_id: str, effect: str, v: Verdict = NOT_LANDED) -> Settled:
    """Resolve in-process through the command's own wiring."""
    async with open_settler(e.settings("rec-resolve")) as settler:
        return await settler.settle(run_id, effect, v)


async def refused(e: Env, *args: str) -> tuple[int, str]:
    """Run ``agentledger ARGS`` expecting a refusal; its exit code and standard error."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentledger.cli", "--log-level", "WARNING", *args,
        env=environment(e), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert out == b""
    return proc.returncode or 0, err.decode()


async def reconciled(e: Env, run_id: str) -> list[EffectReconciled]:
    """The EffectReconciled events of ``run_id`` on the effects topic."""
    events = await topic_events(e.common, "effects")
    return [x for x in events if isinstance(x, EffectReconciled) and x.run_id == run_id]


async def test_landed_by_hand_closes_the_alert_and_the_resume_returns_the_ref(env: Env) -> None:
    """An UNKNOWN effect resolved --landed: view landed with the ref, alert closed, no resend."""
    run_id = "run-res-landed"
    key = await env.dying_worker(run_id, perform=True)
    [performed] = await env.effects(key)
    await env.client.set_faults(FaultRule(mode="down"))
    try:
        assert (await reconcile_once(env))["unknown"] == 1
    finally:
        await env.client.clear_faults()
    assert (await env.view(run_id)).effects[key].state == "unknown"
    out = await cli(
        env, "effects", "resolve", run_id, key, "--landed", "--ref", performed.id,
        "--note", "INC-7: seen in the dashboard", "--by", "ana", "--json",
    )  # fmt: skip
    assert (out["finding"], out["external_ref"], out["worker_id"]) == (
        "LANDED",
        performed.id,
        "operator:ana",
    )
    assert out["resume_requested"] is True
    assert len(out["alerts_closed"]) == 1
    effect = (await env.view(run_id)).effects[key]
    assert (effect.state, effect.external_ref) == ("landed", performed.id)
    assert "resolved by operator ana" in effect.detail
    assert "INC-7" in effect.detail
    open_alerts = await cli(env, "alerts", "list", "--json")
    assert [a for a in open_alerts if a["run_id"] == run_id] == []
    assert await requests_for(env, run_id) == 1
    result = await env.resume(run_id)
    assert result == {"external_ref": performed.id, "replayed": True}
    assert len(await env.effects(key)) == 1


async def test_not_landed_by_hand_lets_the_resume_send_once(env: Env) -> None:
    """An intent resolved --not-landed: view not_landed, then the resumed run sends exactly once."""
    run_id = "run-res-missing"
    key = await env.dying_worker(run_id, perform=False)
    settled = await settle(env, run_id, key)
    assert (settled.reconciled.finding, settled.reconciled.external_ref) == ("NOT_LANDED", None)
    [event] = await reconciled(env, run_id)
    assert (event.worker_id, event.fence) == ("operator:oncall", settled.reconciled.fence)
    effect = (await env.view(run_id)).effects[key]
    assert effect.state == "not_landed"
    assert "not in the dashboard" in effect.detail
    assert await env.effects(key) == []
    result = await env.resume(run_id)
    assert result["replayed"] is False
    [sent] = await env.effects(key)
    assert result["external_ref"] == sent.id


async def test_an_effect_with_an_outcome_is_refused(env: Env) -> None:
    """A second verdict on a settled effect is refused and writes nothing more."""
    run_id = "run-res-twice"
    key = await env.dying_worker(run_id, perform=False)
    await settle(env, run_id, key)
    await env.view(run_id)
    with pytest.raises(RunError, match="already has an outcome: not_landed"):
        await settle(env, run_id, key)
    assert len(await reconciled(env, run_id)) == 1


async def test_unknown_run_and_effect_are_refused(env: Env) -> None:
    """A run nobody wrote, or a key the run does not have, is refused by name."""
    with pytest.raises(RunError, match="run run-res-nobody: no such run"):
        await settle(env, "run-res-nobody", "k")
    run_id = "run-res-nokey"
    await env.dying_worker(run_id, perform=False)
    with pytest.raises(RunError, match="no effect named or keyed 'no-such-key'"):
        await settle(env, run_id, "no-such-key")
    assert await reconciled(env, run_id) == []


async def test_a_live_worker_keeps_its_run(env: Env) -> None:
    """While a live worker holds the lease: refused naming the worker, its lease untouched."""
    run_id = "run-res-live"
    lease = await env.leases.acquire(run_id, "w-live", 60_000)
    key = effect_key(run_id, 0, EFFECT, 0)
    common = {"run_id": run_id, "fence": lease.fence, "worker_id": "w-live"}
    events: list[RunEvent] = [
        RunStarted(**common, seq=1, agent="test", plan=[EFFECT]),
        StepStarted(**common, seq=2, step=0, step_name=EFFECT, attempt=1),
        intent(run_id, key, seq=3, fence=lease.fence, worker="w-live"),
    ]
    try:
        await env.log.publish(events)
        await env.view(run_id)
        with pytest.raises(LeaseHeldError, match=r"held by 'w-live'.*wait until it finishes"):
            await settle(env, run_id, key)
        code, err = await refused(env, "effects", "resolve", run_id, key, "--not-landed")
        assert code == 2
        assert "held by 'w-live'" in err
        assert await env.leases.current(run_id) == lease
        assert (await env.view(run_id)).effects[key].state == "intended"
    finally:
        await env.leases.release(lease)


async def test_cli_refusals_exit_non_zero_with_the_reason(env: Env) -> None:
    """--landed without --ref, an unknown run, and an effect with an outcome: exit 2, reason."""
    run_id = "run-res-cli"
    key = effect_key(run_id, 0, EFFECT, 0)
    lease = await env.leases.acquire(run_id, "w-1", 60_000)
    common = {"run_id": run_id, "fence": lease.fence, "worker_id": "w-1"}
    await env.log.publish(
        [
            RunStarted(**common, seq=1, agent="test", plan=[EFFECT]),
            StepStarted(**common, seq=2, step=0, step_name=EFFECT, attempt=1),
            intent(run_id, key, seq=3, fence=lease.fence, worker="w-1"),
            EffectRecorded(
                **common, seq=4, step=0, effect=EFFECT, idempotency_key=key,
                outcome="succeeded", external_ref="pay_done",
            ),
        ]
    )  # fmt: skip
    await env.leases.release(lease)
    await env.view(run_id)
    no_ref, no_run, done = await asyncio.gather(
        refused(env, "effects", "resolve", run_id, key, "--landed"),
        refused(env, "effects", "resolve", "run-res-ghost", key, "--not-landed"),
        refused(env, "effects", "resolve", run_id, key, "--landed", "--ref", "pay_x"),
    )
    assert no_ref[0] == 2
    assert "--landed needs --ref EXTERNAL_REF" in no_ref[1]
    assert no_run[0] == 2
    assert "run run-res-ghost: no such run" in no_run[1]
    assert done[0] == 2
    assert "already has an outcome: succeeded as pay_done" in done[1]
    assert await reconciled(env, run_id) == []
