"""The hang report names the await a stuck task is parked on."""

from __future__ import annotations

import asyncio

from tests.hang_report import running_loops, tasks_report


def headings(report: str) -> str:
    """The report's lines naming a task (its stacks quote this file's source)."""
    return "\n".join(line for line in report.splitlines() if line.startswith("--- "))


async def test_the_report_shows_each_pending_task_and_where_it_waits() -> None:
    gate = asyncio.Event()

    async def parked_on_the_gate() -> None:
        await gate.wait()

    task = asyncio.get_running_loop().create_task(parked_on_the_gate(), name="parked")
    await asyncio.sleep(0)
    try:
        report = tasks_report(asyncio.get_running_loop())
        assert "--- parked:" in headings(report)
        assert "parked_on_the_gate" in report
        assert "await gate.wait()" in report
        assert asyncio.get_running_loop() in running_loops()
    finally:
        gate.set()
        await task
    assert "--- parked:" not in headings(tasks_report(asyncio.get_running_loop()))
