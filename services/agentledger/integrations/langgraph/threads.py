"""The threads one saver holds: taken (lease + writer) on the first write, released when idle.

Taking a thread: acquire its lease, load its view (the projector's, behind the resume barrier,
else the run's events folded from Kafka), re-acquire above the view's fence if Redis forgot it,
and queue RunStarted (new thread) or RunResumed (a new fence takes over). Releasing it: queue
RunPaused (waiting for an interrupt's answer or for the next input), flush, release the lease —
so another process can continue the thread, and the reconciler does not see an orphan.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import OrderedDict
from collections.abc import AsyncIterator

import structlog

from agentledger._core.keys import check_run_id
from agentledger._core.leasewait import acquire_waiting
from agentledger._core.loader import fold_log, load_view
from agentledger._core.session import Services
from agentledger._core.writer import RunWriter
from agentledger.events.models import RunResumed, RunStarted
from agentledger.integrations.langgraph.session import ThreadSession
from agentledger.integrations.langgraph.settings import SaverSettings
from agentledger.integrations.langgraph.writing import LastValues
from agentledger.leases import Lease
from agentledger.leasing import LeaseKeeper
from agentledger.views.model import RunView
from agentledger.views.store import ViewStore

_log = structlog.get_logger("agentledger.langgraph")
AGENT = "langgraph"
RECENT_READS = 256
MAX_TASKS_REMEMBERED = 10_000


class Threads:
    """Sessions by thread id, with the lock that orders taking and releasing each thread."""

    def __init__(self, services: Services, settings: SaverSettings) -> None:
        self._services = services
        self._settings = settings
        self._sessions: dict[str, ThreadSession] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._reads: OrderedDict[str, tuple[int, int, LastValues]] = OrderedDict()
        self._ordinals: OrderedDict[str, tuple[int, int]] = OrderedDict()

    def run_id(self, thread_id: str) -> str:
        """The run a thread is recorded as (RunError for a thread id no run id can hold)."""
        return check_run_id(self._settings.thread_run_prefix + thread_id)

    def held(self) -> list[str]:
        """Thread ids this saver holds now."""
        return list(self._sessions)

    def session(self, thread_id: str) -> ThreadSession | None:
        """The usable session of a held thread, else None."""
        session = self._sessions.get(thread_id)
        return session if session is not None and session.usable else None

    async def view(self, thread_id: str) -> RunView:
        """The thread's run as it is now: the held session's view, else loaded."""
        session = self.session(thread_id)
        if session is not None:
            return session.view
        return await self.load(self.run_id(thread_id))

    async def load(self, run_id: str) -> RunView:
        """The run's view: the projector's, completed from Kafka where it is behind (see
        :func:`load_view`); without a projector, the run folded from Kafka."""
        log, views = self._services.log, self._services.views
        if isinstance(views, ViewStore) and await views.live_namespace() is None:
            views = None  # no projector has ever run here: do not wait for one
        if views is None:
            return await fold_log(log, run_id)
        loaded = await load_view(log, run_id, reader=views, barrier_s=self._services.barrier_s)
        return loaded.view

    def next_ordinal(self, task_id: str, attempt: int) -> int:
        """The 0-based number of this effect call within the task's current attempt.

        Kept per process, not per session: a thread released while a node waits between two
        effect calls is taken again for the second one, which must still be number 1.
        """
        seen_attempt, used = self._ordinals.pop(task_id, (attempt, 0))
        if seen_attempt != attempt:
            used = 0
        self._ordinals[task_id] = (attempt, used + 1)
        while len(self._ordinals) > MAX_TASKS_REMEMBERED:
            self._ordinals.popitem(last=False)
        return used

    def remember_read(self, thread_id: str, view: RunView, last: LastValues) -> None:
        """Keep the lists a reader rebuilt, for deltas if this process takes the thread next."""
        self._reads[thread_id] = (view.applied_seq, view.fence, last)
        self._reads.move_to_end(thread_id)
        while len(self._reads) > RECENT_READS:
            self._reads.popitem(last=False)

    @contextlib.asynccontextmanager
    async def using(self, thread_id: str) -> AsyncIterator[ThreadSession]:
        """The thread's session, taken if needed, kept from the idle reaper while in use."""
        session = self.session(thread_id)
        if session is None:
            session = await self._take(thread_id)
        session.busy += 1
        try:
            yield session
        finally:
            session.busy -= 1
            session.touch()

    async def _take(self, thread_id: str) -> ThreadSession:
        lock = self._locks.setdefault(thread_id, asyncio.Lock())
        async with lock:
            session = self.session(thread_id)
            if session is not None:
                return session
            stale = self._sessions.pop(thread_id, None)
            if stale is not None:
                await stale.close("null", "writer_lost")
            session = await self._open(thread_id)
            self._sessions[thread_id] = session
            return session

    async def _open(self, thread_id: str) -> ThreadSession:
        services, settings = self._services, self._settings
        run_id = self.run_id(thread_id)
        # The lease is kept alive from the moment it is taken: loading the view can take longer
        # than its ttl when many threads are opened at once.
        keeper = await self._keep(await self._acquire(run_id, floor=0))
        try:
            view = await self.load(run_id)
            if keeper.lease.fence <= view.fence:  # Redis forgot the lease: go above every fence
                higher = await self._acquire(run_id, floor=view.fence)
                await keeper.stop()  # its release is a no-op now: the fence has moved on
                keeper = await self._keep(higher)
            keeper.ensure_held()
        except BaseException:
            await keeper.stop()
            raise
        lease = keeper.lease
        previous_fence, status = view.fence, view.status
        writer = RunWriter(
            services.log,
            view,
            fence=lease.fence,
            worker_id=services.worker_id,
            clock=services.clock,
            before_publish=keeper.ensure_held,
        )
        session = ThreadSession(
            thread_id, writer, keeper, checkpoint_wait_s=settings.checkpoint_wait_ms / 1000
        )
        read = self._reads.pop(thread_id, None)
        if read is not None and read[:2] == (view.applied_seq, view.fence):
            session.last = read[2]  # nothing was written since that read: its lists still stand
        if status == "new":
            session.append(
                RunStarted, agent=AGENT, plan=[], input_json=json.dumps({"thread_id": thread_id})
            )
        else:
            session.append(
                RunResumed, previous_fence=previous_fence, reason="a LangGraph thread continued"
            )
        session.log.info("thread_taken", fence=lease.fence, was=status)
        return session

    async def _keep(self, lease: Lease) -> LeaseKeeper:
        keeper = LeaseKeeper(self._services.leases, lease, self._services.lease_ttl_ms)
        await keeper.__aenter__()
        return keeper

    async def _acquire(self, run_id: str, *, floor: int) -> Lease:
        """Take the lease, waiting up to ``lease_wait_s`` (as the SDK does) for another holder."""
        services = self._services
        return await acquire_waiting(
            services.leases,
            run_id,
            services.worker_id,
            services.lease_ttl_ms,
            floor=floor,
            wait_s=self._settings.lease_wait_s,
            log=_log,
        )

    async def release(self, thread_id: str) -> None:
        """Pause the thread (why it waits) and release its lease now, if held and not in use."""
        lock = self._locks.setdefault(thread_id, asyncio.Lock())
        async with lock:
            session = self._sessions.get(thread_id)
            if session is None or session.busy:
                return
            del self._sessions[thread_id]
            reason, payload = session.pause_reason()
            await session.close(self._services.payloads.inline(payload), reason)
        self._locks.pop(thread_id, None)

    async def release_all(self) -> None:
        """Release every held thread (on shutdown), concurrently: their pauses share commits."""
        await asyncio.gather(*(self.release(t) for t in list(self._sessions)))

    async def reap_forever(self) -> None:
        """Release threads nobody used for ``idle_release_ms`` (and drop broken sessions)."""
        idle_s = self._settings.idle_release_ms / 1000
        while True:
            await asyncio.sleep(max(idle_s / 4, 0.005))
            now = time.monotonic()
            for thread_id, session in list(self._sessions.items()):
                if session.busy == 0 and (not session.usable or now - session.last_used >= idle_s):
                    try:
                        await self.release(thread_id)
                    except Exception:  # noqa: BLE001 - the reaper must outlive any one thread
                        _log.exception("thread_release_failed", thread_id=thread_id)
