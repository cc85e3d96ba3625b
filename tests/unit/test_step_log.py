"""A step's log lines: the run's checkpoint lines carry the step's fields as ``step.log``'s
own lines do, and ``step.log`` is the run's logger with the step bound."""

from __future__ import annotations

from typing import Any

import pytest
from structlog.testing import capture_logs

from agentledger.testing import LedgerEnvironment
from agentledger.worker import RunSpec, Step


@pytest.mark.parametrize("checkpoints", ["each_step", "with_next_commit"])
async def test_the_checkpoint_line_carries_the_steps_fields_as_step_log_does(
    checkpoints: str,
) -> None:
    """The debug line of a checkpoint has exactly the fields, in the order, of a line the step
    logs through ``step.log`` (the run's, then the step's, then the event), and ``step.log`` is
    bound once per step."""
    bound: list[Any] = []

    async def body(step: Step) -> int:
        bound.append(step.log)
        assert step.log is bound[-1]
        step.log.debug(
            "step_checkpointed" if checkpoints == "each_step" else "step_checkpoint_queued"
        )
        return step.index

    plan = ["first", "second"]
    async with LedgerEnvironment() as env:
        with capture_logs() as logs:
            ledger = env.ledger(checkpoints=checkpoints, worker_id="w1")  # type: ignore[arg-type]
            async with ledger.run(RunSpec(run_id="r1", agent="t", plan=plan)) as run:
                for name in plan:
                    await run.step(name, body)
    wanted = "step_checkpointed" if checkpoints == "each_step" else "step_checkpoint_queued"
    lines = [list(line.items()) for line in logs if line["event"] == wanted]
    assert len(lines) == 4
    for index in range(2):
        through_step, through_run = lines[2 * index], lines[2 * index + 1]
        assert through_run == through_step
        assert through_step == [
            ("run_id", "r1"),
            ("worker_id", "w1"),
            ("step", index),
            ("step_name", plan[index]),
            ("attempt", 1),
            ("event", wanted),
            ("log_level", "debug"),
        ]
    assert bound[0] is not bound[1]
