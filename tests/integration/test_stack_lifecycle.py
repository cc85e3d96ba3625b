"""The local stack's lifecycle on real processes, each test in its own temporary state dir."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import ExitStack
from pathlib import Path

import pytest
import pytest_asyncio

from agentledger.stack import Health, LocalStack, StackPaths
from agentledger.stack.kafka import broker_answers
from agentledger.stack.procs import (
    is_alive,
    kill_now,
    read_stat,
    spawn_detached,
    wait_gone,
)
from agentledger.stack.redis_server import redis_answers

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


@pytest.fixture
def state_dir(tmp_path: Path, kafka_jar_cache: StackPaths) -> Path:
    """A fresh state dir holding a copy of the session's verified jar set (no Maven run)."""
    paths = StackPaths(tmp_path / "state")
    paths.kafka.mkdir(parents=True)
    shutil.copytree(kafka_jar_cache.jars, paths.jars)
    shutil.copy2(kafka_jar_cache.jar_manifest, paths.jar_manifest)
    return paths.root


@pytest_asyncio.fixture(loop_scope="session")
async def cleanup(state_dir: Path) -> AsyncIterator[None]:
    """Whatever a test leaves running in its state dir is stopped afterwards."""
    yield
    await LocalStack(state_dir).down()


def _cli(state_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the agentledger CLI with only this state dir configured."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLEDGER_")}
    env["AGENTLEDGER_STATE_DIR"] = str(state_dir)
    return subprocess.run(
        [sys.executable, "-m", "agentledger.cli", "--log-level", "WARNING", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


def _recorded(state_dir: Path) -> dict[str, tuple[int, int]]:
    """pid and start ticks of each recorded process."""
    state = json.loads((state_dir / "stack.json").read_text())
    return {
        name: (state[name]["pid"], state[name]["proc_start"])
        for name in ("kafka", "redis")
        if state.get(name) and state[name]["pid"] is not None
    }


@pytest.mark.usefixtures("cleanup")
def test_up_twice_then_down_leaves_no_process_of_ours(state_dir: Path) -> None:
    """`up` starts both, a second `up` reuses them, `status` tells the truth, `down` stops both."""
    first = _cli(state_dir, "stack", "up")
    assert first.returncode == 0, first.stderr
    lines = first.stdout.splitlines()
    assert all(line.startswith("export ") for line in lines)
    env = dict(line.removeprefix("export ").split("=", 1) for line in lines)
    assert env["AGENTLEDGER_KAFKA_BOOTSTRAP"].startswith("127.0.0.1:")
    assert env["AGENTLEDGER_REDIS_URL"].startswith("redis://127.0.0.1:")
    pids = _recorded(state_dir)
    assert set(pids) == {"kafka", "redis"}
    assert all(is_alive(pid, start) for pid, start in pids.values())

    second = _cli(state_dir, "stack", "up")
    assert second.returncode == 0, second.stderr
    assert second.stdout == first.stdout
    assert _recorded(state_dir) == pids

    status = _cli(state_dir, "stack", "status", "--json")
    assert status.returncode == 0, status.stderr
    report = json.loads(status.stdout)
    assert report["running"] is True
    assert report["kafka"]["pid"] == pids["kafka"][0]
    assert report["kafka"]["endpoint"] == env["AGENTLEDGER_KAFKA_BOOTSTRAP"]
    assert report["redis"]["endpoint"] == env["AGENTLEDGER_REDIS_URL"]
    assert report["kafka"]["started_at"] is not None

    down = _cli(state_dir, "stack", "down")
    assert down.returncode == 0, down.stderr
    assert set(down.stdout.split()) >= {"stopped", "kafka", "redis"}
    for pid, _start in pids.values():
        assert read_stat(pid) is None, f"pid {pid} still runs after down"

    after = _cli(state_dir, "stack", "status", "--json")
    assert after.returncode == 1
    report = json.loads(after.stdout)
    assert (report["kafka"]["health"], report["redis"]["health"]) == ("stopped", "stopped")


@pytest.mark.usefixtures("cleanup")
async def test_status_reports_a_dead_process_and_up_restarts_only_it(state_dir: Path) -> None:
    """A killed Redis shows as dead, not running; the next `up` restarts just that half."""
    stack = LocalStack(state_dir, keep_running=True)
    await stack.up(("redis",))
    rec = stack.load().redis
    assert rec is not None
    assert rec.pid is not None
    assert rec.proc_start is not None
    assert kill_now(rec.pid, rec.proc_start, [str(stack.paths.redis_conf), "redis-server"])
    assert await wait_gone(rec.pid, rec.proc_start, 10.0)

    status = await stack.status()
    assert status.redis.health is Health.DEAD
    assert status.kafka.health is Health.STOPPED

    report = await stack.up(("redis",))
    assert report.started == ("redis",)
    again = stack.load().redis
    assert again is not None
    assert again.pid != rec.pid
    assert again.port == rec.port  # the port was free again, so clients keep their URL
    assert (await stack.status()).redis.health is Health.RUNNING


@pytest.mark.usefixtures("cleanup")
async def test_down_never_kills_a_process_that_is_not_ours(state_dir: Path) -> None:
    """If the recorded pid now belongs to another program, `down` leaves it alone."""
    stack = LocalStack(state_dir, keep_running=True)
    await stack.up(("redis",))
    await stack.down()
    marker = str(state_dir / "stranger")
    pid, start = spawn_detached(
        [sys.executable, "-c", "import time; time.sleep(120)", marker], state_dir / "stranger.log"
    )
    try:
        rec = stack.load().redis
        assert rec is not None
        forged = rec.model_copy(update={"pid": pid, "proc_start": start})
        stack.paths.state_file.write_text(
            stack.load().model_copy(update={"redis": forged}).model_dump_json()
        )
        report = await stack.down()
        assert report.already_gone == ("redis",)
        assert report.stopped == ()
        assert is_alive(pid, start)
    finally:
        kill_now(pid, start, [marker])


@pytest.mark.usefixtures("cleanup")
async def test_taken_ports_are_replaced_by_free_ones(state_dir: Path) -> None:
    """When another program listens on the stack's previous ports, `up` picks free ones."""
    stack = LocalStack(state_dir, keep_running=True)
    before = (await stack.up()).endpoints
    state = stack.load()
    assert state.kafka is not None
    assert state.redis is not None
    old_ports = (state.kafka.port, state.kafka.controller_port, state.redis.port)
    await stack.down()
    with ExitStack() as squatters:
        for port in old_ports:
            sock = squatters.enter_context(socket.socket())
            sock.bind(("127.0.0.1", port))
            sock.listen()
        after = (await stack.up()).endpoints
        state = stack.load()
        assert state.kafka is not None
        assert state.redis is not None
        new_ports = (state.kafka.port, state.kafka.controller_port, state.redis.port)
        assert not set(new_ports) & set(old_ports)
        assert after != before
        assert await broker_answers(after.kafka_bootstrap)
        assert state.redis is not None
        assert await redis_answers(state.redis.port)
        await stack.down()


@pytest.mark.usefixtures("cleanup")
async def test_the_last_context_out_stops_what_contexts_started(state_dir: Path) -> None:
    """Two sessions share a stack: the first to leave keeps it up, the last stops it."""
    first = LocalStack(state_dir, components=("redis",))
    second = LocalStack(state_dir, components=("redis",))
    async with first:
        rec = first.load().redis
        assert rec is not None
        assert rec.pid is not None
        assert rec.proc_start is not None
        await second.__aenter__()
    assert is_alive(rec.pid, rec.proc_start)  # the second session still uses it
    await second.stop()
    assert await wait_gone(rec.pid, rec.proc_start, 10.0)
    await second.stop()  # idempotent


@pytest.mark.usefixtures("cleanup")
async def test_a_context_never_stops_a_stack_it_found_running(state_dir: Path) -> None:
    """A stack brought up by `stack up` survives a test session that merely reused it."""
    await LocalStack(state_dir).up(("redis",))
    async with LocalStack(state_dir, components=("redis",)) as session:
        rec = session.load().redis
    assert rec is not None
    assert rec.pid is not None
    assert rec.proc_start is not None
    assert is_alive(rec.pid, rec.proc_start)
