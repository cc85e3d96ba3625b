"""The demo's worker process: runs (or resumes) every demo run; may SIGKILL itself on purpose."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import structlog

from agentledger._core.ports import WorkerPorts
from agentledger._core.settings import WorkerSettings
from agentledger.demo.agent import refund_agent, spec_for
from agentledger.errors import AgentLedgerError, UnreachableError
from agentledger.providers.http import HttpProvider
from agentledger.worker import Ledger

_log = structlog.get_logger("agentledger.demo")


def parse_targets(items: Sequence[str], default_seed: int) -> list[tuple[str, int]]:
    """``run_id`` or ``run_id@seed`` items as (run id, seed) pairs."""
    targets = []
    for item in items:
        run_id, sep, seed = item.partition("@")
        targets.append((run_id, int(seed) if sep else default_seed))
    return targets


async def work(
    settings: WorkerSettings,
    targets: Sequence[tuple[str, int]],
    *,
    provider_url: str,
    concurrency: int = 16,
) -> dict[str, str]:
    """Open every (run, seed) (start or resume) and walk it to the end; return each status.

    Runs go concurrently (they share one producer, so their commits are grouped); the kill
    switch of ``settings`` is armed when the demo asked for a kill. A run that failed because
    Kafka or Redis stayed unreachable past the outage budget fails the whole worker with that
    UnreachableError once every run has stopped (the CLI prints it as one line, exit 2); the
    runs stay resumable.
    """
    outcome: dict[str, str] = {}
    unreachable: list[UnreachableError] = []
    async with (
        WorkerPorts(settings) as ports,
        HttpProvider.from_settings(settings, url=provider_url, name="sandbox") as provider,
    ):
        ledger = Ledger.from_settings(
            settings,
            log=ports.log,
            leases=ports.leases,
            providers={"sandbox": provider},
            views=ports.views,
            runs=ports.runs,
        )
        gate = asyncio.Semaphore(concurrency)

        async def one(run_id: str, seed: int) -> None:
            async with gate:
                try:
                    async with ledger.run(spec_for(run_id, seed)) as run:
                        await refund_agent(run, seed)
                        outcome[run_id] = f"{run.status} ({run.resumed_from})"
                except UnreachableError as e:
                    unreachable.append(e)
                    outcome[run_id] = f"error: {e}"
                except AgentLedgerError as e:
                    _log.error("demo_run_failed", run_id=run_id, error=str(e))
                    outcome[run_id] = f"error: {e}"

        async with asyncio.TaskGroup() as group:
            for run_id, seed in targets:
                group.create_task(one(run_id, seed))
    if unreachable:
        raise unreachable[0]
    return outcome
