"""The state of one open run shared by the Run and Step facades: services, writer, view, cursor."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from agentledger._core import budget
from agentledger._core.killswitch import KillPoint, KillSwitch
from agentledger._core.payloads import Payloads
from agentledger._core.replay import effect_index
from agentledger._core.spec import RunSpec
from agentledger._core.writer import Checkpoints, RunWriter
from agentledger.alerts.codes import RUN_BUDGET_EXCEEDED
from agentledger.bus.port import EventLog
from agentledger.errors import (
    BudgetExceededError,
    ConfigurationError,
    RunClosedError,
    StaleFenceError,
)
from agentledger.events.models import FINISHED_STATUSES, RunFinished, RunPaused
from agentledger.leases import LeaseStore
from agentledger.leasing import LeaseKeeper
from agentledger.leasing.run_index import RunIndex
from agentledger.providers.protocol import Provider
from agentledger.telemetry.worker_metrics import WorkerMetrics
from agentledger.views import RunView
from agentledger.views.store import ViewReader


@dataclass
class Services:
    """What every run of one worker shares (built once by :class:`~agentledger.Ledger`)."""

    log: EventLog
    leases: LeaseStore
    providers: Mapping[str, Provider]
    payloads: Payloads
    kill: KillSwitch
    clock: Callable[[], int]
    worker_id: str
    lease_ttl_ms: int
    views: ViewReader | None = None
    barrier_s: float = 0.0
    checkpoints: Checkpoints = "each_step"
    #: Opening a new run asks it instead of reading the log (None: always read the log).
    runs: RunIndex | None = None
    #: Set once the log was found written to: the run index is not vouched for again.
    log_written: bool = False
    metrics: WorkerMetrics | None = None
    lease_wait_s: float = 0.0

    def provider(self, name: str | None, *, run_id: str) -> tuple[str, Provider]:
        """The provider called ``name`` (or the only one configured)."""
        if name is None:
            if len(self.providers) != 1:
                msg = (
                    f"name the provider of this effect: {len(self.providers)} are configured "
                    f"({', '.join(sorted(self.providers)) or 'none'})"
                )
                raise ConfigurationError(msg)
            ((only, provider),) = self.providers.items()
            return only, provider
        named = self.providers.get(name)
        if named is None:
            msg = (
                f"run {run_id} needs provider {name!r}; configured: "
                f"{', '.join(sorted(self.providers)) or 'none'}"
            )
            raise ConfigurationError(msg)
        return name, named


class RunSession:
    """One open run: the writer (None when read-only), the lease keeper, and the step cursor."""

    def __init__(
        self,
        services: Services,
        spec: RunSpec,
        view: RunView,
        *,
        writer: RunWriter | None,
        keeper: LeaseKeeper | None,
        source: str,
    ) -> None:
        self.services = services
        self.spec = spec
        self._view = view
        self.writer = writer
        self.keeper = keeper
        self.source = source
        self.next_index = 0
        self.in_step = False
        self.last_result: Any = None
        #: The inline JSON ``last_result`` was recorded as (None when stored by reference).
        self.last_result_json: str | None = None
        self.places = effect_index(view)
        self.log = structlog.get_logger("agentledger.worker").bind(
            run_id=spec.run_id, worker_id=services.worker_id
        )

    @property
    def run_id(self) -> str:
        """The run's id."""
        return self.spec.run_id

    @property
    def view(self) -> RunView:
        """The run as this writer knows it: the loaded view plus every event it appended, for
        the SDK's own reads (``recent_digests`` may trail: :attr:`RunWriter.folded`)."""
        return self.writer.folded if self.writer is not None else self._view

    @property
    def settled_view(self) -> RunView:
        """:attr:`view` with every field current, ``recent_digests`` included: what is handed
        out of the SDK (``Run.view``)."""
        return self.writer.view if self.writer is not None else self._view

    @property
    def finished(self) -> bool:
        """True once the run has a RunFinished event."""
        return self.view.status in FINISHED_STATUSES

    def now(self) -> int:
        """The clock, epoch ms."""
        return self.services.clock()

    def kill_point(self, point: KillPoint) -> None:
        """Tell the kill switch where we are (inert unless armed)."""
        self.services.kill.reached(point, self.run_id)

    def writable(self) -> RunWriter:
        """The writer, if this run can still be written to by this handle."""
        if self.writer is None or self.finished:
            msg = f"the run is {self.view.status}; nothing more can be written"
            raise RunClosedError(msg, run_id=self.run_id)
        if self.view.status == "paused":
            reason = self.view.pause.reason if self.view.pause else "?"
            msg = f"the run is paused ({reason}); resume it to continue"
            raise RunClosedError(msg, run_id=self.run_id)
        if self.keeper is not None and self.keeper.lost.is_set():
            msg = f"lease with fence {self.writer.fence} was lost; another writer owns the run"
            raise StaleFenceError(msg, run_id=self.run_id)
        return self.writer

    def ensure_lease(self) -> None:
        """Raise StaleFenceError before publishing if the keeper knows the lease is gone."""
        if self.keeper is not None:
            self.keeper.ensure_held()

    async def exceed(self, overrun: budget.Overrun, step: int | None) -> BudgetExceededError:
        """Finish the run as budget_exceeded (with an alert) and return the error to raise."""
        writer = self.writable()
        message = overrun.describe()
        writer.append(RunFinished, status="budget_exceeded", error=message)
        writer.alert(
            RUN_BUDGET_EXCEEDED,
            f"run {self.run_id} stopped: {message}",
            severity="warning",
            step=step,
            action="raise the limit and fork or restart the run if the work must go on",
        )
        await writer.flush()
        self.log.warning("budget_exceeded", step=step, limit=overrun.limit, detail=message)
        return BudgetExceededError(message, run_id=self.run_id, step=step)

    async def check_spending(self, step: int | None) -> None:
        """Raise BudgetExceededError (after recording it) if a spending limit is reached."""
        overrun = budget.before_spending(self.view.budget, self.now())
        if overrun is not None:
            raise await self.exceed(overrun, step)

    async def check_spent(self, step: int | None) -> None:
        """Raise BudgetExceededError (after recording it) if what was spent went over a limit."""
        overrun = budget.after_spending(self.view.budget)
        if overrun is not None:
            raise await self.exceed(overrun, step)

    def pause(
        self,
        reason: str,
        *,
        step: int | None,
        payload: Any = None,
        intent_hash: str | None = None,
        expires_at: int | None = None,
    ) -> None:
        """Queue a RunPaused event (the caller flushes, usually with an alert)."""
        writer = self.writable()
        writer.append(
            RunPaused,
            reason=reason,
            step=step,
            payload_json=self.services.payloads.inline(payload),
            intent_hash=intent_hash,
            expires_at=expires_at,
        )
