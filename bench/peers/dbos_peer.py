"""DBOS Transact on PostgreSQL: one async ``@DBOS.workflow`` per run, one ``@DBOS.step`` per
step (its output — the message and the effect's reference — is DBOS's checkpoint)."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar

from bench.peers.base import Peer, PeerUnavailableError, Probe
from bench.peers.pg import ensure_database, schema_bytes
from bench.workload import effect_key, external_ref, message

try:
    from dbos import DBOS, SetWorkflowID
except ImportError as e:  # pragma: no cover - depends on the bench extra
    msg = f"dbos is not installed ({e}); pip install -e '.[bench]'"
    raise PeerUnavailableError(msg) from e

SCHEMA = "dbos"
RESUME_WAIT_S = 120.0


class _Hooks:
    """What the measuring process wants to see of one workflow."""

    def __init__(self, probe: Probe | None) -> None:
        self.probe = probe
        self.latencies: list[float] = []


_HOOKS: dict[str, _Hooks] = {}


@DBOS.step()
async def agent_step(run_id: str, k: int) -> dict[str, Any]:
    """One step: the message it appends and the effect it performed, recorded by DBOS."""
    key = effect_key(run_id, k)
    return {"message": message(run_id, k), "effect": {"key": key, "ref": external_ref(key)}}


@DBOS.workflow()
async def agent_run(run_id: str, steps: int) -> int:
    """A run of ``steps`` steps; the state is the list of step outputs (replayed on recovery)."""
    state: list[dict[str, Any]] = []
    for k in range(1, steps + 1):
        hooks = _HOOKS.get(run_id)
        if hooks is not None and hooks.probe is not None:
            await hooks.probe(k - 1)
        start = time.perf_counter()
        state.append(await agent_step(run_id, k))
        if hooks is not None:
            hooks.latencies.append(time.perf_counter() - start)
    return len(state)


class DbosPeer(Peer):
    """DBOS launched against its own database on the bench's PostgreSQL."""

    name: ClassVar[str] = "dbos-postgres"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._launched = False
        self._dsn = ""

    async def start(self) -> None:
        """Create the database (when fresh) and DBOS's instance, but launch lazily: launching
        is what recovers pending workflows, which ``resume`` must time."""
        self._dsn = await ensure_database(self.env, self.store_name, fresh=self.fresh)

    def _launch(self) -> None:
        DBOS(
            config={
                "name": "agentledger-bench",
                "system_database_url": self._dsn.replace("postgresql://", "postgresql+psycopg://"),
                "application_version": "bench",
                "log_level": "WARNING",
            }
        )
        DBOS.launch()
        self._launched = True

    async def stop(self) -> None:
        """Shut DBOS down (its registry of workflows stays for the next namespace)."""
        if self._launched:
            self._launched = False
            loop = asyncio.get_running_loop()
            await asyncio.to_thread(DBOS.destroy)
            # DBOS made its executor the loop's default one and has just shut it down.
            loop.set_default_executor(ThreadPoolExecutor(thread_name_prefix="bench"))

    async def _ensure_launched(self) -> None:
        if not self._launched:
            await asyncio.to_thread(self._launch)

    async def run(self, run_id: str, steps: int, probe: Probe | None = None) -> list[float]:
        """Run the workflow inline under ``run_id`` as its workflow id."""
        await self._ensure_launched()
        hooks = _HOOKS[run_id] = _Hooks(probe)
        try:
            with SetWorkflowID(run_id):
                await agent_run(run_id, steps)
        finally:
            del _HOOKS[run_id]
        return hooks.latencies

    async def resume(self, run_id: str, steps_done: int, probe: Probe) -> None:
        """Launch DBOS: its startup recovery replays the pending workflow up to the next step."""
        _HOOKS[run_id] = _Hooks(probe)
        await self._ensure_launched()
        await asyncio.sleep(RESUME_WAIT_S)
        msg = f"DBOS did not recover workflow {run_id} within {RESUME_WAIT_S:.0f} s"
        raise PeerUnavailableError(msg)

    async def stored_bytes(self) -> int:
        """pg_total_relation_size of every table of DBOS's system schema."""
        await self._ensure_launched()  # the schema exists once DBOS has migrated it
        return await schema_bytes(self._dsn, SCHEMA)

    def notes(self) -> list[str]:
        """Durability of DBOS's side."""
        return ["PostgreSQL fsync=on synchronous_commit=on, DBOS default pool (20)"]
