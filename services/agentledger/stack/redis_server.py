"""The embedded Redis: find or install redis-server, write its config, start it, wait for PING."""

from __future__ import annotations

import asyncio
import os
import re
import shutil

import structlog
from redis.asyncio import Redis
from redis.exceptions import RedisError

from agentledger.errors import StackError
from agentledger.redisclient import redis_options
from agentledger.stack.config import StackPaths, redis_command, render_redis_conf
from agentledger.stack.ports import accepts
from agentledger.stack.procs import is_alive, log_tail, run_to_end, spawn_detached

log = structlog.get_logger(__name__)

INSTALL_TIMEOUT_S = 600.0
READY_TIMEOUT_S = 30.0
INSTALL_HINT = "apt-get update && apt-get install -y redis-server"
_VERSION = re.compile(rb"v=(\d+\.\d+\.\d+)")


async def run_short(*argv: str, limit_s: float) -> tuple[int, str]:
    """Run a short command, returning its exit code and combined output (-1 and a line saying
    so when it does not finish within ``limit_s``)."""
    try:
        return await run_to_end(argv, limit_s)
    except TimeoutError:
        return -1, f"{argv[0]} timed out after {limit_s:.0f}s"


async def find_redis_server() -> str:
    """Path of redis-server; installs Debian's package when missing and we are root."""
    found = shutil.which("redis-server")
    if found is not None:
        return found
    if os.geteuid() != 0:
        msg = f"redis-server is not installed; run: sudo sh -c '{INSTALL_HINT}'"
        raise StackError(msg)
    log.info("stack_redis_installing", command=INSTALL_HINT)
    for argv in (
        ("apt-get", "update"),
        ("env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "redis-server"),
    ):
        code, out = await run_short(*argv, limit_s=INSTALL_TIMEOUT_S)
        if code != 0:
            tail = "\n".join(out.splitlines()[-10:])
            msg = f"`{' '.join(argv)}` failed (exit {code}); run `{INSTALL_HINT}` by hand:\n{tail}"
            raise StackError(msg)
    found = shutil.which("redis-server")
    if found is None:
        msg = f"redis-server is still not on PATH after installing; run `{INSTALL_HINT}`"
        raise StackError(msg)
    return found


async def redis_version(redis_server: str) -> str:
    """The redis-server version string (e.g. ``7.0.15``)."""
    code, out = await run_short(redis_server, "--version", limit_s=30.0)
    match = _VERSION.search(out.encode())
    if code != 0 or match is None:
        msg = f"`{redis_server} --version` did not report a version: {out.strip()[:200]}"
        raise StackError(msg)
    return match.group(1).decode()


def redis_markers(paths: StackPaths, port: int) -> tuple[str, ...]:
    """What our redis-server's /proc/<pid>/cmdline shows: our config, or its title once running."""
    return (str(paths.redis_conf), f"redis-server 127.0.0.1:{port}")


def start_redis(paths: StackPaths, redis_server: str, port: int) -> tuple[int, int]:
    """Write our redis.conf and spawn redis-server detached; returns pid and start ticks."""
    paths.redis_data.mkdir(parents=True, exist_ok=True)
    paths.redis_conf.write_text(render_redis_conf(port, paths.redis_data))
    return spawn_detached(redis_command(redis_server, paths.redis_conf), paths.redis_log)


async def redis_answers(port: int, limit_s: float = 2.0) -> bool:
    """Whether our Redis answers PING."""
    return await answers_ping(
        Redis(host="127.0.0.1", port=port, socket_timeout=limit_s, **redis_options(None))
    )


async def answers_ping(client: Redis) -> bool:
    """Whether ``client``'s server answers PING; the client is closed either way."""
    try:
        return bool(await client.ping())
    except (RedisError, OSError):
        return False
    finally:
        await client.aclose()


async def wait_redis_ready(
    paths: StackPaths, pid: int, start_ticks: int, port: int, limit_s: float = READY_TIMEOUT_S
) -> None:
    """Wait until Redis answers PING; fail fast with its log if it exits."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit_s
    while loop.time() < deadline:
        if not is_alive(pid, start_ticks):
            msg = f"redis-server exited during start-up:\n{log_tail(paths.redis_log)}"
            raise StackError(msg)
        if await accepts(port) and await redis_answers(port):
            return
        await asyncio.sleep(0.05)
    msg = f"Redis did not answer PING on 127.0.0.1:{port} within {limit_s:.0f}s"
    raise StackError(msg)
