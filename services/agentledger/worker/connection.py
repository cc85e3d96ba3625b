"""``async with agentledger.connect(...) as ledger``: the one way in for an agent author.

It reads the settings (``AGENTLEDGER_*``; endpoints left unset start or reuse the embedded
local stack), makes sure the topics exist, opens the ports, starts the named providers (a URL
string is an HTTP provider, ``"sandbox"`` a sandbox served in this process over a file in the
stack's state directory) and hands back a :class:`Connection` that runs agents.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import ParamSpec, TypeVar, cast

from agentledger._core.ports import WorkerPorts
from agentledger._core.settings import WorkerSettings
from agentledger._core.spec import RunSpec
from agentledger._core.versions import Policy
from agentledger.bus.admin import ensure_topics
from agentledger.errors import RunClosedError
from agentledger.events.models import FINISHED_STATUSES
from agentledger.events.topics import topic_specs
from agentledger.logdefaults import warnings_on_stderr_by_default
from agentledger.providers.named import check_given, open_providers
from agentledger.providers.protocol import Provider
from agentledger.stack.resolve import resolve_settings
from agentledger.worker.define import AgentFn, input_of
from agentledger.worker.ledger import Ledger
from agentledger.worker.run import Run

P = ParamSpec("P")
R = TypeVar("R")


class Connection:
    """Runs agents on one worker's ports; made by :func:`connect`."""

    def __init__(self, ledger: Ledger, settings: WorkerSettings | None = None) -> None:
        self.ledger = ledger
        self.settings = settings

    async def run(
        self, run_id: str, agent: AgentFn[P, R], /, *args: P.args, **kwargs: P.kwargs
    ) -> R:
        """Start run ``run_id`` of ``agent`` with these arguments, or resume it where it stopped;
        return its result. A finished run returns its recorded result without running anything.

        A run another process still holds (its lease alive, or its holder just died) is waited
        for up to ``lease_wait_s``. A run that ended otherwise than succeeded raises
        RunClosedError; a paused one raises what paused it.
        """
        value = input_of(args, kwargs)
        async with self.ledger.run(agent.spec(run_id, value)) as run:
            result = await agent.body(run, value)
            status, error = run.status, run.view.error
        if status != "succeeded" and status in FINISHED_STATUSES:
            raise RunClosedError(f"run {run_id} ended {status}: {error or '-'}", run_id=run_id)
        return cast(R, result)  # the agent's recorded return value

    def open(
        self, spec: RunSpec, *, on_version_drift: Policy | None = None
    ) -> AbstractAsyncContextManager[Run]:
        """The explicit form: a :class:`Run` handle for ``spec`` to walk step by step."""
        return self.ledger.run(spec, on_version_drift=on_version_drift)


@asynccontextmanager
async def connect(
    providers: Mapping[str, Provider | str] | None = None,
    *,
    settings: WorkerSettings | None = None,
) -> AsyncIterator[Connection]:
    """Open a :class:`Connection`; ``providers`` maps names (``@effect(provider=…)``) to a
    Provider, an ``http(s)://`` URL, or ``"sandbox"``. ``settings`` default to the environment."""
    check_given(providers or {})  # a mistyped provider fails before anything starts
    warnings_on_stderr_by_default()
    resolved = await resolve_settings(settings or WorkerSettings())
    await ensure_topics(resolved, topic_specs(resolved))
    async with AsyncExitStack() as stack:
        # the topics were just checked: the producer's start may go on while a first resume
        # reads Redis (each call of the log waits for it)
        ports = await stack.enter_async_context(WorkerPorts(resolved, kafka_in_background=True))
        started = await open_providers(stack, providers or {}, resolved.state_dir)
        ledger = Ledger.from_settings(
            resolved, log=ports.log, leases=ports.leases, providers=started, views=ports.views
        )
        yield Connection(ledger, resolved)
