"""LangGraph peers: a one-node loop graph checkpointed by SqliteSaver, PostgresSaver or the Redis
saver with ``durability="sync"``; the messages live in an ``operator.add`` channel (full state
per checkpoint) or, for the ``-delta`` variant, in LangGraph's beta DeltaChannel."""

from __future__ import annotations

import operator
import sqlite3
import time
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Annotated, Any, ClassVar, TypedDict

import redis.asyncio as aredis

from bench.peers.base import Peer, PeerUnavailableError, Probe
from bench.peers.pg import ensure_database, relation_bytes
from bench.workload import effect_key, external_ref, message

try:
    from langgraph.channels import DeltaChannel
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
    from langgraph.graph import END, START, StateGraph
    from psycopg import AsyncConnection
    from psycopg.rows import DictRow, dict_row
    from psycopg_pool import AsyncConnectionPool
except ImportError as e:  # pragma: no cover - depends on the bench extra
    msg = f"langgraph is not installed ({e}); pip install -e '.[bench]'"
    raise PeerUnavailableError(msg) from e


def _concat(state: list[Any], writes: Sequence[list[Any]]) -> list[Any]:
    """DeltaChannel reducer: append every batch of writes (batching-invariant)."""
    out = list(state)
    for w in writes:
        out.extend(w)
    return out


class FullState(TypedDict):
    """Run state with append-only lists: LangGraph stores the whole list at each checkpoint."""

    run_id: str
    step: int
    target: int
    messages: Annotated[list[dict[str, str]], operator.add]
    effects: Annotated[list[dict[str, str]], operator.add]


class DeltaState(TypedDict):
    """The same state with DeltaChannel lists: only writes, plus a snapshot every 100 updates."""

    run_id: str
    step: int
    target: int
    messages: Annotated[list[dict[str, str]], DeltaChannel(_concat)]
    effects: Annotated[list[dict[str, str]], DeltaChannel(_concat)]


class _Timer:
    """Per-run step boundaries recorded from inside the node."""

    def __init__(self, probe: Probe | None) -> None:
        self.probe = probe
        self.starts: list[float] = []
        self.ends: list[float] = []


class LangGraphPeer(Peer):
    """A loop graph ``step -> step -> … -> END``; each node appends one message and one effect."""

    delta: ClassVar[bool] = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._stack: AsyncExitStack | None = None
        self._graph: Any = None
        self._timers: dict[str, _Timer] = {}

    async def _open_saver(self, stack: AsyncExitStack) -> Any:
        """Open the checkpointer (subclasses)."""
        raise PeerUnavailableError(f"{self.name}: no checkpointer")

    async def start(self) -> None:
        """Open the saver and compile the graph."""
        self._stack = AsyncExitStack()
        try:
            saver = await self._open_saver(self._stack)
        except PeerUnavailableError:
            await self.stop()
            raise
        except Exception as e:
            await self.stop()
            raise PeerUnavailableError(
                f"{self.name} failed to start: {type(e).__name__}: {e}"
            ) from e
        self._graph = loop_graph(self._node, delta=self.delta, checkpointer=saver)

    async def stop(self) -> None:
        """Close the saver."""
        stack, self._stack = self._stack, None
        if stack is not None:
            await stack.aclose()

    async def _node(self, state: Mapping[str, Any]) -> dict[str, Any]:
        """One agent step: append the message and the effect's record to the run's state."""
        timer = self._timers.get(state["run_id"])
        k = state["step"] + 1
        if timer is not None:
            timer.ends.append(time.perf_counter())
            if timer.probe is not None:
                await timer.probe(k - 1)
            timer.starts.append(time.perf_counter())
        run_id = state["run_id"]
        key = effect_key(run_id, k)
        return {
            "step": k,
            "messages": [{"role": "assistant", "content": message(run_id, k)}],
            "effects": [{"key": key, "ref": external_ref(key)}],
        }

    def _config(self, run_id: str, steps: int) -> dict[str, Any]:
        return {"configurable": {"thread_id": run_id}, "recursion_limit": steps + 10}

    async def run(self, run_id: str, steps: int, probe: Probe | None = None) -> list[float]:
        """Invoke the graph for ``steps`` steps under a new thread id."""
        timer = self._timers[run_id] = _Timer(probe)
        initial = {"run_id": run_id, "step": 0, "target": steps, "messages": [], "effects": []}
        await self._graph.ainvoke(initial, self._config(run_id, steps), durability="sync")
        end = time.perf_counter()
        del self._timers[run_id]
        ends = [*timer.ends[1:], end]
        return [e - s for s, e in zip(timer.starts, ends, strict=True)]

    async def resume(self, run_id: str, steps_done: int, probe: Probe) -> None:
        """Continue the thread from its last checkpoint; the next node entry is "ready"."""
        self._timers[run_id] = _Timer(probe)
        await self._graph.ainvoke(None, self._config(run_id, steps_done + 1), durability="sync")

    def notes(self) -> list[str]:
        """Durability of LangGraph's side."""
        lists = "DeltaChannel (beta, snapshot every 100)" if self.delta else "operator.add lists"
        return [f"durability='sync', {lists}"]


def loop_graph(node: Any, *, delta: bool, checkpointer: Any) -> Any:
    """The compiled loop graph ``step -> step -> … -> END`` over FullState or DeltaState.

    The node and the router take the state as a plain Mapping: LangGraph reads a TypedDict
    annotation of their first parameter as one more state schema, and FullState's
    ``operator.add`` lists then collide with DeltaState's channels ("Channel 'messages' already
    exists with a different type")."""
    builder = StateGraph(DeltaState if delta else FullState)
    builder.add_node("step", node)
    builder.add_edge(START, "step")
    builder.add_conditional_edges("step", _next, ["step", END])
    return builder.compile(checkpointer=checkpointer)


def _next(state: Mapping[str, Any]) -> str:
    return "step" if state["step"] < state["target"] else END


def _remove_sqlite(path: Path) -> None:
    """Delete an SQLite database with its WAL and shared-memory files."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


class SqlitePeer(LangGraphPeer):
    """AsyncSqliteSaver on a file (WAL, LangGraph's own pragmas)."""

    name: ClassVar[str] = "langgraph-sqlite"

    @property
    def db_path(self) -> Path:
        """The SQLite file of this namespace."""
        return Path(self.env.work_dir) / f"{self.store_name}.sqlite"

    async def _open_saver(self, stack: AsyncExitStack) -> Any:
        if self.fresh:
            _remove_sqlite(self.db_path)
        saver = await stack.enter_async_context(
            AsyncSqliteSaver.from_conn_string(str(self.db_path))
        )
        await saver.setup()
        return saver

    async def stored_bytes(self) -> int:
        """Pages in use (WAL included) times the page size, read by a separate connection."""
        with sqlite3.connect(self.db_path) as c:
            pages = c.execute("PRAGMA page_count").fetchone()[0]
            free = c.execute("PRAGMA freelist_count").fetchone()[0]
            size = c.execute("PRAGMA page_size").fetchone()[0]
        return int((pages - free) * size)

    def notes(self) -> list[str]:
        """SQLite's sync mode as the saver leaves it."""
        with sqlite3.connect(self.db_path) as c:
            sync = c.execute("PRAGMA synchronous").fetchone()[0]
        return [*super().notes(), f"SQLite journal_mode=WAL, synchronous={sync} (2=FULL)"]


class SqliteDeltaPeer(SqlitePeer):
    """SqliteSaver with DeltaChannel lists."""

    name: ClassVar[str] = "langgraph-sqlite-delta"
    delta: ClassVar[bool] = True


LANGGRAPH_PG_TABLES = (
    "checkpoints",
    "checkpoint_blobs",
    "checkpoint_writes",
    "checkpoint_migrations",
)


class PostgresPeer(LangGraphPeer):
    """AsyncPostgresSaver over a psycopg pool (20 connections) on the bench's PostgreSQL."""

    name: ClassVar[str] = "langgraph-postgres"

    async def _open_saver(self, stack: AsyncExitStack) -> Any:
        dsn = await ensure_database(self.env, self.store_name, fresh=self.fresh)
        self._dsn = dsn
        pool = AsyncConnectionPool(
            dsn,
            connection_class=AsyncConnection[DictRow],  # the saver reads rows as dicts
            min_size=1,
            max_size=20,
            open=False,
            kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
        )
        await pool.open(wait=True)
        stack.push_async_callback(pool.close)
        saver = AsyncPostgresSaver(pool)
        await saver.setup()
        return saver

    async def stored_bytes(self) -> int:
        """pg_total_relation_size of LangGraph's checkpoint tables."""
        return await relation_bytes(self._dsn, LANGGRAPH_PG_TABLES)

    def notes(self) -> list[str]:
        """PostgreSQL durability."""
        return [*super().notes(), "PostgreSQL fsync=on synchronous_commit=on, pool of 20"]


class PostgresDeltaPeer(PostgresPeer):
    """PostgresSaver with DeltaChannel lists."""

    name: ClassVar[str] = "langgraph-postgres-delta"
    delta: ClassVar[bool] = True


class RedisPeer(LangGraphPeer):
    """langgraph-checkpoint-redis's AsyncRedisSaver (needs the RediSearch and RedisJSON modules)."""

    name: ClassVar[str] = "langgraph-redis"

    async def _open_saver(self, stack: AsyncExitStack) -> Any:
        try:
            # Imported here only: redisvl is heavy and the other LangGraph peers' resume
            # processes must not pay for it.
            from langgraph.checkpoint.redis.aio import AsyncRedisSaver  # noqa: PLC0415
        except ImportError as e:
            msg = f"langgraph-checkpoint-redis is not installed ({e})"
            raise PeerUnavailableError(msg) from e
        if self.env.fsync_redis_url is None:
            raise PeerUnavailableError("no Redis for the LangGraph Redis saver")
        try:
            saver = await stack.enter_async_context(
                AsyncRedisSaver(redis_url=self.env.fsync_redis_url)
            )
        except Exception as e:
            msg = (
                "AsyncRedisSaver.asetup() failed on Debian's redis-server "
                f"({type(e).__name__}: {str(e)[:160]}); the saver needs the RediSearch and "
                "RedisJSON modules (Redis Stack / Redis 8), which Debian's package lacks"
            )
            raise PeerUnavailableError(msg) from e
        self._redis_url = self.env.fsync_redis_url
        return saver

    async def stored_bytes(self) -> int:
        """used_memory of the Redis it writes to."""
        client = aredis.Redis.from_url(self._redis_url)
        try:
            info = await client.info("memory")
        finally:
            await client.aclose()
        return int(info["used_memory"])
