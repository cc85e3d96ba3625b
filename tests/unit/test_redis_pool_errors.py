"""Every Redis call of the view store names an unreachable Redis as UnreachableError."""

from __future__ import annotations

import inspect
import socket
from collections.abc import Awaitable, Callable

import pytest
import redis.exceptions
from pydantic import ValidationError

from agentledger._core.settings import WorkerSettings
from agentledger.bus.port import Position
from agentledger.errors import UnreachableError
from agentledger.redisclient import pooled_client
from agentledger.views.model import RunView
from agentledger.views.redis_store import RedisViewStore
from agentledger.views.store import FreshRun, IndexUpdate, RunWrite

Call = Callable[[RedisViewStore], Awaitable[object]]

# Every public Redis-backed method of the store (ViewStore and ViewReader), with arguments
# that make it talk to Redis.
CALLS: dict[str, Call] = {
    "live_namespace": lambda s: s.live_namespace(create=True),
    "create_namespace": lambda s: s.create_namespace(),
    "swap": lambda s: s.swap("v1"),
    "drop_namespace": lambda s: s.drop_namespace("v1"),
    "namespaces": lambda s: s.namespaces(),
    "load": lambda s: s.load("r1"),
    "load_at": lambda s: s.load_at("r1", [("t", 0)]),
    "load_runs": lambda s: s.load_runs("v1", ["r1"]),
    "write_runs": lambda s: s.write_runs(
        "v1", [RunWrite(run_id="r1", expected=None, view=RunView(run_id="r1"))]
    ),
    "update_indexes": lambda s: s.update_indexes("v1", [IndexUpdate("r1", "running")]),
    "write_fresh": lambda s: s.write_fresh(
        "v1",
        [RunWrite(run_id="r1", expected=None, view=RunView(run_id="r1"))],
        {"r1": IndexUpdate("r1", "new")},
    ),
    "write_fresh_stored": lambda s: s.write_fresh_stored(
        "v1",
        [
            FreshRun(
                run_id="r1",
                fields={"status": b"new"},
                steps={},
                effects={},
                parked=[],
                status="new",
                ended_at=0,
                index=IndexUpdate("r1", "new"),
            )
        ],
    ),
    "record_progress": lambda s: s.record_progress("v1", {("t", 0): 1}),
    "commit": lambda s: s.commit("v1", [], [IndexUpdate("r1", "running")], {("t", 0): 1}),
    "read_progress": lambda s: s.read_progress("v1"),
    "overdue_parked": lambda s: s.overdue_parked("v1", 10),
    "count_parked": lambda s: s.count_parked("v1"),
    "drop_finished_before": lambda s: s.drop_finished_before("v1", 10),
    "prune": lambda s: s.prune("v1"),
    "snapshot": lambda s: s.snapshot("v1"),
    "progress": lambda s: s.progress([Position("t", 0, 5)]),
    "runs_by_status": lambda s: s.runs_by_status("running"),
    "open_intents": lambda s: s.open_intents(),
    "mark_namespace": lambda s: s.mark_namespace("v1"),
    "replace_live": lambda s: s.replace_live("v1", "v2"),
    "is_marked": lambda s: s.is_marked("v1"),
    "load_many": lambda s: s.load_many(["r1"]),
    "load_at_every": lambda s: s.load_at_every("r1"),
    "load_many_at": lambda s: s.load_many_at({"r1": [("t", 0)]}),
}


@pytest.fixture
def closed_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("name", sorted(CALLS))
async def test_every_view_store_call_on_a_closed_port_raises_unreachable(
    name: str, closed_port: int
) -> None:
    """With Redis down each store method raises UnreachableError naming host, not password."""
    url = f"redis://user:hunter2@127.0.0.1:{closed_port}/0"
    store = RedisViewStore.from_url(url, key_prefix="al")
    try:
        with pytest.raises(UnreachableError, match=f"127.0.0.1:{closed_port}") as caught:
            await CALLS[name](store)
    finally:
        await store.close()
    assert "hunter2" not in str(caught.value)
    assert isinstance(caught.value.__cause__, redis.exceptions.ConnectionError | OSError)


def test_the_call_list_covers_every_public_async_method() -> None:
    """A new public async method of the store must be added to CALLS (so it is checked above)."""
    public = {
        name
        for name in dir(RedisViewStore)
        if not name.startswith("_")
        and callable(getattr(RedisViewStore, name))
        and name not in {"close"}
        and inspect.iscoroutinefunction(getattr(RedisViewStore, name))
    }
    assert public == set(CALLS)


async def test_pooled_client_on_a_closed_port_fails_with_a_redis_connection_error(
    closed_port: int,
) -> None:
    """The shared pool raises a refused connection as the redis ConnectionError stores translate."""
    client = pooled_client(f"redis://127.0.0.1:{closed_port}/0", max_connections=1, wait_s=0.1)
    try:
        with pytest.raises(redis.exceptions.ConnectionError):
            await client.ping()
    finally:
        await client.aclose()


@pytest.mark.parametrize(
    "field", [{"redis_max_connections": 0}, {"redis_pool_wait_s": 0}, {"redis_pool_wait_s": -1}]
)
def test_worker_settings_reject_an_empty_pool_or_no_wait(field: dict[str, float]) -> None:
    """A pool of zero connections or a non-positive wait is refused when settings are built."""
    with pytest.raises(ValidationError):
        WorkerSettings(redis_url="redis://127.0.0.1:6379/0", **field)


def test_worker_settings_default_to_64_connections_and_a_30_s_wait() -> None:
    """Without configuration a worker pools 64 Redis connections and waits 30 s for one."""
    settings = WorkerSettings(redis_url="redis://127.0.0.1:6379/0")
    assert (settings.redis_max_connections, settings.redis_pool_wait_s) == (64, 30.0)
