"""``runs list|show|approve`` on the projector's Redis views, with a real projector process."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentledger.bus.publisher import KafkaPublisher
from agentledger.fleet import FleetSettings, submit_run
from agentledger.fleet.examples import gated_refund, refund
from agentledger.fleet.testing import running_worker, wait_until
from agentledger.projector.testing import ProjectorProcess, projector_settings
from agentledger.settings import CommonSettings
from agentledger.views import RunView
from agentledger.views.redis_store import RedisViewStore
from tests.integration.fleet_support import cli

pytestmark = pytest.mark.integration
WAIT_S = 90.0


@pytest.fixture
def fleet_overrides() -> dict[str, Any]:
    """These runs resume from the projector's views, behind a barrier."""
    return {"use_views": True, "resume_barrier_s": 2.0}


async def test_runs_list_show_and_approve_work_on_the_views(
    ledger_settings: CommonSettings, fleet: FleetSettings
) -> None:
    """``runs list`` shows a finished and a paused run from the views (the paused one waiting
    for approval); ``runs show`` prints what it asks; ``runs approve`` lets it finish."""
    done, gated = f"{fleet.key_prefix}-done", f"{fleet.key_prefix}-gated"
    proj = projector_settings(ledger_settings, projector_group=f"{fleet.key_prefix}-projector")
    assert fleet.redis_url is not None
    async with (
        ProjectorProcess(proj) as projector,
        RedisViewStore.from_url(fleet.redis_url, key_prefix=fleet.key_prefix) as views,
        running_worker(fleet, refund(fleet)),
        running_worker(
            fleet.model_copy(update={"worker_id": f"{fleet.worker_id}-g"}), gated_refund(fleet)
        ),
    ):
        await projector.wait_ready()
        async with KafkaPublisher(fleet) as publisher:
            await submit_run(publisher, "refund-demo", {"seed": 1}, run_id=done)
            await submit_run(publisher, "refund-gated", {"seed": 1}, run_id=gated)

        async def statuses() -> dict[str, str]:
            found = {r: await views.load(r) for r in (done, gated)}
            return {r: v.status for r, v in found.items() if isinstance(v, RunView)}

        seen = await wait_until(
            statuses, lambda s: s == {done: "succeeded", gated: "paused"}, timeout_s=WAIT_S
        )
        assert seen == {done: "succeeded", gated: "paused"}
        rows = {r["run_id"]: r for r in json.loads(await cli(fleet, "runs", "list", "--json"))}
        assert rows[done]["status"] == "succeeded"
        assert rows[done]["cursor"] == rows[done]["plan_steps"] == 5
        assert rows[gated]["status"] == "paused"
        assert rows[gated]["pending_approval"] is True
        paused = json.loads(await cli(fleet, "runs", "show", gated, "--json"))
        assert paused["source"] == "views"
        assert paused["approval"]["ask"].startswith("refund ")
        assert paused["cursor"] == 2
        approve = ["runs", "approve", gated, "--approver", "alice", "--expires-in", "10m"]
        text = await cli(fleet, *approve)
        assert "approved by alice" in text
        final = await wait_until(statuses, lambda s: s.get(gated) == "succeeded", timeout_s=WAIT_S)
        assert final[gated] == "succeeded"
    shown = json.loads(await cli(fleet, "runs", "show", gated, "--json"))
    assert [a["approver"] for a in shown["approvals"]] == ["alice"]
    assert {e["kind"] for e in shown["effects"]} == {"payments", "emails"}
