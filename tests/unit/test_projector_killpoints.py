"""The projector's kill points (DESIGN.md §16): inert unless armed, armed ones die on the hit."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import pytest
from pydantic import ValidationError

from agentledger.cli import describe_validation_error
from agentledger.projector.applier import Applier
from agentledger.projector.killpoints import PROJECTOR_KILL_POINTS, ProjectorKillSwitch
from agentledger.projector.metrics import Metrics
from agentledger.projector.runner import Projector
from agentledger.projector.settings import ProjectorSettings
from tests.unit.test_fold_into_store import CODEC, PARTS, World, expected, run_events

_DIE_ON_THIRD = textwrap.dedent(
    """
    from agentledger.projector.killpoints import ProjectorKillSwitch
    switch = ProjectorKillSwitch("batch_committed", 3)
    for n in range(1, 6):
        switch.reached("slice_committed")
        switch.reached("batch_committed")
        print(f"survived {n}", flush=True)
    """
)


def test_an_unarmed_switch_only_counts() -> None:
    """An unarmed switch counts every point reached and never kills (this test survives)."""
    switch = ProjectorKillSwitch()
    for _ in range(3):
        switch.reached("batch_committed")
    switch.reached("slice_committed")
    assert not switch.armed
    assert switch.counts == {"batch_committed": 3, "slice_committed": 1}


def test_an_armed_switch_sigkills_its_process_on_the_hit_th_reach() -> None:
    """Armed at batch_committed hit 3, a process survives two reaches (and any number of other
    points) and dies by its own SIGKILL on the third, printing nothing after it."""
    done = subprocess.run(
        [sys.executable, "-c", _DIE_ON_THIRD],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == -signal.SIGKILL
    assert done.stdout.split("\n") == ["survived 1", "survived 2", ""]


@pytest.mark.parametrize(
    ("values", "variable"),
    [
        ({"projector_kill_point": "mid_batch"}, "AGENTLEDGER_PROJECTOR_KILL_POINT"),
        ({"projector_kill_hit": 0}, "AGENTLEDGER_PROJECTOR_KILL_HIT"),
    ],
)
def test_an_invalid_kill_point_fails_at_start_in_one_line_naming_the_variable(
    values: dict[str, object], variable: str
) -> None:
    """A kill point that is not one of the projector's, or a hit below 1, fails the settings
    with one line that names the variable (and, for the point, the ones to use)."""
    with pytest.raises(ValidationError) as caught:
        ProjectorSettings.model_validate(values)
    line = describe_validation_error(caught.value)
    assert "\n" not in line
    assert variable in line
    if "projector_kill_point" in values:
        assert all(p in line for p in PROJECTOR_KILL_POINTS)


async def test_the_projector_reaches_each_point_once_per_batch_and_per_slice() -> None:
    """An applied batch reaches batch_committed once, after its slices' commits each reached
    slice_committed (a batch cut into slices reaches it once per slice); views are unchanged."""
    world = World()
    switch = ProjectorKillSwitch()
    metrics = Metrics()
    applier = Applier(
        world.store,
        world.published,
        CODEC,
        metrics=metrics,
        partitions=PARTS,
        slice_records=1,
        kill=switch,
    )
    projector = Projector(
        world.store,
        world.log,
        world.published,
        applier,
        metrics=metrics,
        partitions=PARTS,
        kill=switch,
    )
    runs = {f"r{i}": run_events(f"r{i}") for i in range(8)}
    records = [r for events in runs.values() for r in world.write(events)]
    partitions = {r.partition for r in records}
    assert len(partitions) == PARTS  # the batch spans both partitions: two slices
    projector.assign({(r.topic, r.partition) for r in records})
    await projector.process(records)
    assert switch.counts == {"slice_committed": PARTS, "batch_committed": 1}
    for run_id, events in runs.items():
        assert await world.store.load(run_id) == expected(events)
