"""Fork: a new run from a checkpoint of another, in a new generation (DESIGN.md §5, inv. 8).

The fork starts with RunStarted (the parent's agent, plan, input, versions and limits;
generation = parent's + 1) and RunForked carrying the parent's steps 0..N with their results and
the effects those steps emitted with their external references. Its cursor is N+1: inherited
steps replay their recorded results, so an inherited effect is never sent again. The parent's
approvals are not carried over (and the new generation voids them anyway).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from agentledger._core.keys import check_run_id
from agentledger._core.loader import load_view
from agentledger._core.writer import RunWriter
from agentledger.errors import RunError
from agentledger.events.models import ResumeRequested, RunForked, RunStarted
from agentledger.fleet.stable import StableBarrier
from agentledger.views import OPEN_EFFECT_STATES, RunView
from agentledger.worker import Ledger


def inherited_of(parent: RunView, from_step: int) -> dict[str, list[dict[str, Any]]]:
    """The steps 0..``from_step`` of ``parent`` and their effects, as RunForked carries them.

    Every inherited step must be checkpointed and every inherited effect resolved: a fork never
    starts from a guess.
    """
    run_id = parent.run_id
    if from_step < 0:
        raise RunError(f"--from-step must be 0 or more, got {from_step}", run_id=run_id)
    if from_step >= len(parent.plan):
        msg = f"step {from_step} is beyond the plan ({len(parent.plan)} steps)"
        raise RunError(msg, run_id=run_id)
    steps = []
    for index in range(from_step + 1):
        step = parent.steps.get(index)
        if step is None or step.status != "checkpointed":
            state = "not run" if step is None else step.status
            msg = f"cannot fork from step {from_step}: step {index} is {state}, not checkpointed"
            raise RunError(msg, run_id=run_id)
        steps.append(step.model_dump(mode="json"))
    effects = []
    for effect in sorted(parent.effects.values(), key=lambda e: (e.step, e.ordinal)):
        if effect.step > from_step:
            continue
        if effect.state in OPEN_EFFECT_STATES:
            msg = (
                f"cannot fork from step {from_step}: effect {effect.effect} of step {effect.step} "
                f"is {effect.state}; reconcile it first"
            )
            raise RunError(msg, run_id=run_id)
        effects.append(effect.model_dump(mode="json"))
    return {"steps": steps, "effects": effects}


def fork_id(parent_run_id: str) -> str:
    """A fresh id for a fork of ``parent_run_id``."""
    return f"{parent_run_id}.fork-{uuid.uuid4().hex[:8]}"


async def fork_run(
    ledger: Ledger,
    parent_run_id: str,
    from_step: int,
    *,
    run_id: str | None = None,
    resume: bool = True,
    barrier: StableBarrier | None = None,
) -> RunView:
    """Start a fork of ``parent_run_id`` at step ``from_step``; return the fork's first view.

    With ``resume`` a ResumeRequested for the fork rides in the same transaction, so a worker
    of the fleet continues it at step ``from_step + 1``.
    """
    services = ledger.services
    if barrier is not None:
        await barrier.wait(parent_run_id)
    parent = (
        await load_view(
            services.log, parent_run_id, reader=services.views, barrier_s=services.barrier_s
        )
    ).view
    if parent.status == "new":
        raise RunError("no such run (it has no events)", run_id=parent_run_id)
    inherited = inherited_of(parent, from_step)
    child_id = check_run_id(run_id or fork_id(parent_run_id))
    if barrier is not None:
        await barrier.wait(child_id)
    child = (
        await load_view(services.log, child_id, reader=services.views, barrier_s=services.barrier_s)
    ).view
    if child.status != "new":
        raise RunError(f"run {child_id} already exists ({child.status})", run_id=child_id)
    lease = await services.leases.acquire(
        child_id, services.worker_id, services.lease_ttl_ms, floor=child.fence
    )
    try:
        writer = RunWriter(
            services.log, child, fence=lease.fence, worker_id=services.worker_id,
            clock=services.clock,
        )  # fmt: skip
        generation = parent.generation + 1
        budget = parent.budget
        writer.append(
            RunStarted,
            agent=parent.agent,
            plan=list(parent.plan),
            plan_version=parent.plan_version,
            input_json=parent.input_json,
            code_version=parent.versions.code,
            prompt_version=parent.versions.prompt,
            tool_schema_version=parent.versions.tool_schema,
            model_version=parent.versions.model,
            version_policy=parent.version_policy,
            generation=generation,
            max_tokens=budget.max_tokens,
            max_usd=budget.max_usd,
            max_steps=budget.max_steps,
            max_consecutive_errors=budget.max_consecutive_errors,
            deadline_at=budget.deadline_at,
        )
        writer.append(
            RunForked,
            parent_run_id=parent_run_id,
            from_step=from_step,
            generation=generation,
            inherited_json=json.dumps(inherited, separators=(",", ":")),
        )
        if resume:
            writer.pending.append(
                ResumeRequested(
                    run_id=child_id,
                    reason=f"forked from {parent_run_id} at step {from_step}",
                    requested_by=services.worker_id,
                )
            )
        await writer.flush()
    finally:
        await services.leases.release(lease)
    return writer.view
