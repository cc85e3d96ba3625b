"""AgentLedgerSaver: a LangGraph checkpointer whose checkpoints are agentledger events on Kafka.

One LangGraph thread is one agentledger run (``SaverSettings.thread_run_prefix`` + thread id);
each checkpoint is a step of it (CheckpointSaved), each task's pending writes a WritesSaved,
deletions a CheckpointsDeleted — all written through the group-commit transactional log under
the run's lease, so they carry a gapless seq and the writer's fence like every run event.
Reads come from the thread this process holds, else from the projector's Redis view, else from
the run's events folded from Kafka.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import AsyncExitStack
from types import TracebackType
from typing import Any, NoReturn

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from agentledger._core.killswitch import KillSwitch
from agentledger._core.payloads import Payloads
from agentledger._core.session import Services
from agentledger._core.spec import EffectResult
from agentledger.bus.port import EventLog
from agentledger.errors import ConfigurationError
from agentledger.events.models import WritesSaved, now_ms
from agentledger.integrations.langgraph import admin
from agentledger.integrations.langgraph.effects import EffectCall, perform_effect
from agentledger.integrations.langgraph.ports import SaverPorts
from agentledger.integrations.langgraph.reading import ThreadReader, checkpoint_config
from agentledger.integrations.langgraph.runindex import MemoryRunIndex, RunIndex
from agentledger.integrations.langgraph.session import ThreadSession
from agentledger.integrations.langgraph.settings import SaverSettings
from agentledger.integrations.langgraph.threads import Threads
from agentledger.integrations.langgraph.values import ValueCodec
from agentledger.integrations.langgraph.writing import (
    LastValues,
    checkpoint_fields,
    write_fields,
)
from agentledger.leases import LeaseStore
from agentledger.logdefaults import logs_on_stderr_by_default, warnings_on_stderr_by_default
from agentledger.providers.hashing import EffectHasher
from agentledger.providers.named import check_given, open_provider
from agentledger.providers.protocol import EffectRequest, Provider
from agentledger.redaction import DEFAULT_REDACTOR, Redactor
from agentledger.stack.resolve import resolve_settings
from agentledger.views.graph_fold import version_text
from agentledger.views.store import ViewReader

_SYNC = (
    "AgentLedgerSaver is async-only: run the graph with ainvoke/astream (its writes go "
    "through an asyncio Kafka producer)"
)


class AgentLedgerSaver(BaseCheckpointSaver[str]):
    """A LangGraph ``BaseCheckpointSaver`` on agentledger; use it inside ``async with``.

    Build it with :meth:`from_settings` (it opens Kafka, Redis and the views itself, on the
    local stack unless endpoints are set), or hand it ports directly (tests: the in-memory log
    and leases). ``providers`` are the effect providers :func:`effect_tool` calls, by name: a
    Provider, an ``http(s)://`` URL or ``"sandbox"``, as for ``agentledger.connect``;
    ``kill_switch`` (chaos tests) defaults to the settings' kill point.
    """

    def __init__(
        self,
        settings: SaverSettings,
        *,
        log: EventLog | None = None,
        leases: LeaseStore | None = None,
        views: ViewReader | None = None,
        run_index: RunIndex | None = None,
        providers: Mapping[str, Provider | str] | None = None,
        serde: SerializerProtocol | None = None,
        redactor: Redactor = DEFAULT_REDACTOR,
        kill_switch: KillSwitch | None = None,
    ) -> None:
        super().__init__(serde=serde)
        logs_on_stderr_by_default()  # never on the program's stdout
        self._kill = kill_switch or KillSwitch(settings.kill_point, settings.kill_hit)
        self.settings = settings
        self._ports: SaverPorts | None = None
        self._given = (log, leases, views, run_index)
        check_given(providers or {})  # a mistyped provider fails before anything starts
        self._given_providers = dict(providers or {})
        self._providers: dict[str, Provider] = {}
        self._owned = AsyncExitStack()  # the providers this saver started from their names
        self.codec = ValueCodec(self.serde, redactor)
        self._payloads = Payloads(
            redactor, hasher=EffectHasher(settings.hash_key.get_secret_value())
        )
        self._threads: Threads | None = None
        self._services: Services | None = None
        self._run_index: RunIndex = run_index or MemoryRunIndex()
        self._reaper: asyncio.Task[None] | None = None
        self._stopped = False

    @classmethod
    def from_settings(
        cls,
        settings: SaverSettings,
        *,
        providers: Mapping[str, Provider | str] | None = None,
        serde: SerializerProtocol | None = None,
    ) -> AgentLedgerSaver:
        """A saver that opens its own Kafka log, Redis leases, views and run index on
        ``async with`` (on the local stack when ``settings`` names no endpoints). Logging
        that nobody configured is set as ``agentledger.connect`` sets it: warnings on stderr."""
        warnings_on_stderr_by_default()
        return cls(settings, providers=providers, serde=serde)

    # --- lifecycle ------------------------------------------------------------------------

    async def __aenter__(self) -> AgentLedgerSaver:
        try:
            await self.start()
        except BaseException:
            await self.stop()  # what started before the failure (ports, providers) is closed
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def start(self) -> None:
        """Open the ports (if this saver owns them) and start releasing idle threads."""
        if self._threads is not None:
            return
        log, leases, views, run_index = self._given
        if log is None or leases is None:
            self.settings = await resolve_settings(self.settings)
            ports = self._ports = SaverPorts(self.settings)
            await ports.start()
            log, leases, views, run_index = ports.log, ports.leases, ports.views, ports.run_index
        self._run_index = run_index or self._run_index
        settings = self.settings
        for name, given in self._given_providers.items():
            self._providers[name] = (
                given
                if isinstance(given, Provider)  # the caller's: started and stopped by the caller
                else await open_provider(self._owned, name, given, settings.state_dir)
            )
        self._services = Services(
            log=log,
            leases=leases,
            providers=self._providers,
            payloads=self._payloads,
            kill=self._kill,
            clock=now_ms,
            worker_id=settings.worker_id,
            lease_ttl_ms=settings.lease_ttl_ms,
            views=views,
            barrier_s=settings.resume_barrier_s,
        )
        self._threads = Threads(self._services, settings)
        self._reaper = asyncio.get_running_loop().create_task(
            self._threads.reap_forever(), name="agentledger-langgraph-reaper"
        )

    async def stop(self) -> None:
        """Release every held thread, stop the reaper, close owned ports (idempotent)."""
        if self._stopped:
            return
        self._stopped = True
        if self._reaper is not None:
            self._reaper.cancel()
            await asyncio.gather(self._reaper, return_exceptions=True)
        try:
            if self._threads is not None:
                await self._threads.release_all()
        finally:
            try:
                await self._owned.aclose()
            finally:
                if self._ports is not None:
                    await self._ports.stop()

    @property
    def threads(self) -> Threads:
        """The threads this saver holds (started savers only)."""
        if self._threads is None:
            raise ConfigurationError("use the saver inside `async with` (it is not started)")
        return self._threads

    @property
    def services(self) -> Services:
        """Log, leases, providers … (started savers only)."""
        if self._services is None:
            raise ConfigurationError("use the saver inside `async with` (it is not started)")
        return self._services

    async def release(self, thread_id: str) -> None:
        """Let go of a thread now (pause it, release its lease) instead of when it idles."""
        await self.threads.release(thread_id)

    # --- writes ---------------------------------------------------------------------------

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Save ``checkpoint`` (the channels in ``new_versions``, lists as deltas) durably."""
        thread_id = config["configurable"]["thread_id"]
        async with self.threads.using(thread_id) as session:
            fields = checkpoint_fields(
                self.codec,
                session.last,
                config=config,
                checkpoint=checkpoint,
                metadata=metadata,
                new_versions=new_versions,
            )
            session.append_checkpoint(fields)
            await session.flush()
            await self._index(session, [fields["metadata_json"]])
        return checkpoint_config(thread_id, fields["checkpoint_ns"], checkpoint["id"])

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Save a task's writes against the checkpoint in ``config`` (waiting for it if LangGraph
        is still saving it); a regular write already saved for (task, index) is not saved twice."""
        conf = config["configurable"]
        async with self.threads.using(conf["thread_id"]) as session:
            step = await session.step_of(conf["checkpoint_id"])
            fields = write_fields(self.codec, session.graph(step), writes, task_id, task_path)
            if fields is not None:
                session.append(WritesSaved, step=step, **fields)
                await session.flush()

    # --- reads ----------------------------------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint in ``config`` (or the thread's newest in its namespace), or None."""
        conf = config["configurable"]
        thread_id: str = conf["thread_id"]
        ns: str = conf.get("checkpoint_ns", "")
        session = self.threads.session(thread_id)
        view = (
            session.view
            if session is not None
            else await self.threads.load(self.threads.run_id(thread_id))
        )
        reader = ThreadReader(thread_id, view, self.codec)
        graph = reader.get(ns, get_checkpoint_id(config))
        if graph is None:
            return None
        found = reader.to_tuple(graph)
        last = session.last if session is not None else LastValues()
        versions = found.checkpoint["channel_versions"]
        for channel, value in found.checkpoint["channel_values"].items():
            last.remember(ns, channel, version_text(versions[channel]), value)
        if session is None:
            self.threads.remember_read(thread_id, view, last)
        return found

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """A thread's checkpoints, newest first, filtered as LangGraph's ``list`` describes."""
        if config is None:
            msg = "AgentLedgerSaver lists one thread at a time: pass a config with a thread_id"
            raise ConfigurationError(msg)
        conf = config["configurable"]
        thread_id: str = conf["thread_id"]
        reader = ThreadReader(thread_id, await self.threads.view(thread_id), self.codec)
        chosen = reader.select(
            ns=conf.get("checkpoint_ns"),
            checkpoint_id=get_checkpoint_id(config),
            before=get_checkpoint_id(before) if before is not None else None,
            filter=filter,
            limit=limit,
        )
        for graph in chosen:
            yield reader.to_tuple(graph)

    # --- deletes, copies, prunes (admin.py) -----------------------------------------------

    async def adelete_thread(self, thread_id: str) -> None:
        """Delete every checkpoint and write of the thread from the views."""
        await admin.delete_thread(self.threads, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints (and their writes) that the given LangGraph runs saved."""
        await admin.delete_for_runs(self.threads, self._run_index, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint and write of one thread to another (blobs as stored)."""
        metadata = await admin.copy_thread(self.threads, source_thread_id, target_thread_id)
        if metadata:
            async with self.threads.using(target_thread_id) as session:
                await self._index(session, metadata)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``keep_latest`` keeps each namespace's newest checkpoint; ``delete`` drops them all."""
        await admin.prune(self.threads, thread_ids, strategy)

    # --- effects --------------------------------------------------------------------------

    async def perform_effect(
        self, call: EffectCall, *, name: str, request: EffectRequest, provider: str | None
    ) -> EffectResult:
        """Perform an effect for a task of this thread (what :func:`effect_tool` calls)."""
        ordinal = self.threads.next_ordinal(call.task_id, call.attempt)
        async with self.threads.using(call.thread_id) as session:
            return await perform_effect(
                self.services,
                session,
                call,
                ordinal=ordinal,
                name=name,
                request=request,
                provider_name=provider,
            )

    # --- LangGraph details ----------------------------------------------------------------

    def get_next_version(self, current: str | None, channel: None) -> str:
        """A zero-padded counter plus a random suffix: increasing, and unique across forks."""
        del channel
        if current is None:
            number = 0
        elif isinstance(current, int):
            number = current
        else:
            number = int(str(current).split(".")[0])
        return f"{number + 1:012d}.{random.getrandbits(32):08x}"

    async def _index(self, session: ThreadSession, metadata: Sequence[str]) -> None:
        """Note the LangGraph run ids of saved checkpoints (for ``delete_for_runs``)."""
        for text in metadata:
            run_id = json.loads(text).get("run_id")
            if isinstance(run_id, str) and run_id not in session.run_ids_indexed:
                await self._run_index.add(run_id, session.thread_id)
                session.run_ids_indexed.add(run_id)

    # The sync API of BaseCheckpointSaver: this saver is async-only.

    def get_tuple(self, config: RunnableConfig) -> NoReturn:
        """Not supported: use ``aget_tuple``."""
        raise ConfigurationError(_SYNC)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Not supported: use ``alist``."""
        raise ConfigurationError(_SYNC)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> NoReturn:
        """Not supported: use ``aput``."""
        raise ConfigurationError(_SYNC)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> NoReturn:
        """Not supported: use ``aput_writes``."""
        raise ConfigurationError(_SYNC)

    def delete_thread(self, thread_id: str) -> NoReturn:
        """Not supported: use ``adelete_thread``."""
        raise ConfigurationError(_SYNC)

    def delete_for_runs(self, run_ids: Sequence[str]) -> NoReturn:
        """Not supported: use ``adelete_for_runs``."""
        raise ConfigurationError(_SYNC)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> NoReturn:
        """Not supported: use ``acopy_thread``."""
        raise ConfigurationError(_SYNC)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> NoReturn:
        """Not supported: use ``aprune``."""
        raise ConfigurationError(_SYNC)
