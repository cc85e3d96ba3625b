"""The fleet's request executor on the in-memory ports: what each request leads to, and when
its offset may be committed."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agentledger.bus.port import EventLog, Position
from agentledger.demo.agent import refund_agent, spec_for
from agentledger.errors import PublishError
from agentledger.events import ResumeRequested, RunRequested
from agentledger.events.models import Event, RunEvent
from agentledger.fleet import Agent, FleetSettings, RunExecutor
from agentledger.fleet.tap import DurableTap
from agentledger.fleet.testing import fleet_settings
from agentledger.settings import CommonSettings
from agentledger.testing import LedgerEnvironment
from agentledger.worker import Ledger, Run, RunSpec, Step

SETTINGS: FleetSettings = fleet_settings(
    CommonSettings.model_construct(),
    fleet_run_retries=1,
    fleet_retry_backoff_ms=1,
    lease_ttl_ms=1_000,
    resume_barrier_s=0.0,
)


def refund_demo(env: LedgerEnvironment) -> Agent:
    """The demo's refund agent on the environment's provider."""

    async def body(run: Run, value: Any) -> Any:
        return await refund_agent(run, value["seed"])

    return Agent(
        name="refund-demo",
        spec=lambda run_id, value: spec_for(run_id, value["seed"]),
        body=body,
        providers=lambda: env.providers,
    )


def executor(env: LedgerEnvironment, agent: Agent, log: EventLog | None = None) -> RunExecutor:
    """An executor writing as worker ``w1`` through ``log`` (default: the environment's)."""
    tap = DurableTap(log or env.log)
    ledger = Ledger(
        log=tap, leases=env.leases, providers=env.providers, worker_id="w1",
        lease_ttl_ms=SETTINGS.lease_ttl_ms, clock=env.clock,
    )  # fmt: skip
    return RunExecutor(
        SETTINGS, agent=agent, ledger=ledger, tap=tap, leases=env.leases, publisher=env.log
    )


def request(run_id: str = "r1", seed: int = 1, agent: str = "refund-demo") -> RunRequested:
    """A RunRequested of the refund demo."""
    return RunRequested(run_id=run_id, agent=agent, input_json=f'{{"seed": {seed}}}')


class Settled:
    """Counts calls of the settle callback."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1


async def test_a_request_starts_the_run_and_finishes_it() -> None:
    """RunRequested starts the run, walks it to success and settles the request."""
    async with LedgerEnvironment() as env:
        settled = Settled()
        outcome = await executor(env, refund_demo(env)).execute(request(), settled)
        assert outcome.status == "succeeded"
        assert settled.calls >= 1
        assert (await env.view("r1")).status == "succeeded"


async def test_requests_that_need_nothing_are_settled_and_skipped() -> None:
    """A finished run, a run of another agent and a resume of an unknown run do nothing."""
    async with LedgerEnvironment() as env:
        run = executor(env, refund_demo(env))
        await run.execute(request(), Settled())
        performed = len(env.provider.effects)
        settled = Settled()
        again = await run.execute(request(), settled)
        other = await run.execute(request("r2", agent="someone-else"), settled)
        unknown = await run.execute(ResumeRequested(run_id="nobody"), settled)
        assert (again.status, other.status, unknown.status) == ("done", "skipped", "skipped")
        assert settled.calls >= 3
        assert len(env.provider.effects) == performed


async def test_a_run_held_by_a_live_worker_is_left_to_it() -> None:
    """A duplicate request for a run another worker holds changes nothing."""
    async with LedgerEnvironment() as env:
        started = env.ledger(worker_id="w0")
        async with started.run(spec_for("r1", 1)) as handle:
            await handle.step("fetch_order", _order)
            outcome = await executor(env, refund_demo(env)).execute(request(), Settled())
        assert outcome.status == "held"
        assert "w0" in outcome.detail


async def test_an_agent_bug_fails_the_run_for_good() -> None:
    """An exception from the agent's own code ends the run as failed, with the error."""
    async with LedgerEnvironment() as env:

        async def broken(run: Run, value: Any) -> Any:
            async def boom(step: Step) -> Any:
                raise KeyError("missing field")

            return await run.step("only", boom)

        agent = Agent(
            name="broken",
            spec=lambda run_id, value: RunSpec(run_id=run_id, agent="broken", plan=("only",)),
            body=broken,
            providers=lambda: {},
        )
        outcome = await executor(env, agent).execute(request(agent="broken"), Settled())
        view = await env.view("r1")
        assert outcome.status == "failed"
        assert view.status == "failed"
        assert "KeyError" in (view.error or "")


async def test_the_request_is_settled_only_once_the_run_has_a_durable_write() -> None:
    """While the run's first commit is in flight the request is not settled; after it, it is."""
    async with LedgerEnvironment() as env:
        settled = Settled()
        env.memory_log.hold_commits()
        task = asyncio.get_running_loop().create_task(
            executor(env, refund_demo(env)).execute(request(), settled)
        )
        async with asyncio.timeout(10):
            await _until(lambda: env.memory_log.held > 0)
            assert settled.calls == 0
            await env.memory_log.release_commits()
            assert (await task).status == "succeeded"
        assert settled.calls >= 1


class RefusingLog(EventLog):
    """A log whose run-event commits always fail (a broker that keeps aborting)."""

    def __init__(self, inner: EventLog) -> None:
        self.inner = inner

    async def publish(self, events: Sequence[Event]) -> None:
        """Fail every publish that carries run events."""
        if any(isinstance(e, RunEvent) for e in events):
            raise PublishError("the transaction was aborted")
        await self.inner.publish(events)

    async def read_run(
        self, run_id: str, *, since: Mapping[tuple[str, int], int] | None = None
    ) -> list[RunEvent]:
        """The inner log's events of the run."""
        return await self.inner.read_run(run_id, since=since)

    async def run_end_positions(self, run_id: str) -> list[Position]:
        """The inner log's end positions."""
        return await self.inner.run_end_positions(run_id)


async def test_a_run_that_keeps_failing_is_requeued_for_the_fleet() -> None:
    """After its local retries a transiently failing request is published again and settled."""
    async with LedgerEnvironment() as env:
        settled = Settled()
        run = executor(env, refund_demo(env), log=RefusingLog(env.log))
        outcome = await run.execute(request(), settled)
        requeued = env.memory_log.events(env.memory_log.topics.requests)
        assert outcome.status == "requeued"
        assert settled.calls == 1
        assert [type(e).__name__ for e in requeued] == ["RunRequested"]
        assert requeued[0].run_id == "r1"  # type: ignore[attr-defined]


async def _until(condition: Callable[[], bool]) -> None:
    for _ in range(100_000):
        if condition():
            return
        await asyncio.sleep(0)


async def _order(step: Step) -> Any:
    return {"order_id": "ord-r1"}
