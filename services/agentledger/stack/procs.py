"""Detached processes we own: spawn, prove ownership through /proc, and stop them."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from agentledger.errors import StackError

log = structlog.get_logger(__name__)

_PROC = Path("/proc")


@dataclass(frozen=True)
class ProcStat:
    """The two fields of /proc/<pid>/stat we need."""

    state: str
    start_ticks: int


def parse_stat(text: str) -> ProcStat:
    """Parse /proc/<pid>/stat; the command name may contain spaces and parentheses."""
    rest = text[text.rindex(")") + 2 :].split()
    # rest[0] is field 3 (state); field 22 (starttime) is therefore rest[19].
    return ProcStat(state=rest[0], start_ticks=int(rest[19]))


def cmdline_matches(raw: bytes, markers: Sequence[str]) -> bool:
    """Whether a /proc/<pid>/cmdline (NUL-separated, maybe retitled) mentions any marker."""
    text = raw.replace(b"\0", b" ").decode(errors="replace")
    return any(marker in text for marker in markers)


def _reap(pid: int) -> None:
    """Collect the exit status if ``pid`` is our own dead child, so it stops being a zombie."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def read_stat(pid: int) -> ProcStat | None:
    """The stat of a live (non-zombie) process, or None when it is gone."""
    _reap(pid)
    try:
        stat = parse_stat((_PROC / str(pid) / "stat").read_text())
    except (OSError, ValueError, IndexError):
        return None
    if stat.state in {"Z", "X"} and not _threads_left(pid):
        return None
    return stat


def _threads_left(pid: int) -> bool:
    """Whether threads of the process still run although its first thread is a zombie: after
    SIGKILL a JVM's leader thread shows ``Z`` while its other threads are still exiting, and
    until the last one has, the process holds its descriptors (its listening ports)."""
    try:
        return len(os.listdir(_PROC / str(pid) / "task")) > 1
    except OSError:
        return False


def is_ours(pid: int, start_ticks: int, markers: Sequence[str]) -> bool:
    """Whether ``pid`` is still the very process we started (same start time, our command)."""
    stat = read_stat(pid)
    if stat is None or stat.start_ticks != start_ticks:
        return False
    try:
        raw = (_PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return False
    return cmdline_matches(raw, markers)


def spawn_detached(argv: list[str], log_file: Path) -> tuple[int, int]:
    """Start ``argv`` in its own session (it outlives us), output appended to ``log_file``.

    Returns the pid and its start time in clock ticks.
    """
    exe = shutil.which(argv[0])
    if exe is None:
        msg = f"{argv[0]} is not on PATH"
        raise StackError(msg)
    log_file.parent.mkdir(parents=True, exist_ok=True)
    actions: list[tuple[Any, ...]] = [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, str(log_file), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644),
        (os.POSIX_SPAWN_DUP2, 1, 2),
        *((os.POSIX_SPAWN_CLOSE, fd) for fd in _inherited_fds()),
    ]
    # The child inherits our environment unchanged: JAVA_HOME, PATH and locale matter to it.
    pid = os.posix_spawn(exe, argv, os.environ, file_actions=actions, setsid=True)
    _await_exec(pid)
    stat = read_stat(pid)
    if stat is None:
        msg = f"{argv[0]} exited immediately; see {log_file}"
        raise StackError(msg)
    return pid, stat.start_ticks


def _inherited_fds() -> list[int]:
    """Our descriptors past stderr that a child would inherit: those our own parent passed
    down (Python opens its own non-inheritable). A daemon must not keep them: ``flock LOCK
    cmd`` passes its lock's descriptor, and a stack started under it held the lock for as long
    as it ran."""
    found = []
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2:  # stdin, stdout and stderr are set up by the spawn itself
            with contextlib.suppress(OSError):  # the listing's own descriptor is gone by now
                if os.get_inheritable(fd):
                    found.append(fd)
    return found


def _await_exec(pid: int, limit_s: float = 2.0) -> None:
    """Wait (milliseconds) until the child's argv is readable: it is empty while exec runs."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline and read_stat(pid) is not None:
        try:
            if (_PROC / str(pid) / "cmdline").read_bytes():
                return
        except OSError:
            return
        time.sleep(0.002)


def is_alive(pid: int, start_ticks: int) -> bool:
    """Whether the process with this pid and start time still runs."""
    stat = read_stat(pid)
    return stat is not None and stat.start_ticks == start_ticks


async def wait_gone(pid: int, start_ticks: int, limit_s: float) -> bool:
    """Poll until the process is gone; False if it still runs after ``limit_s`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit_s
    while is_alive(pid, start_ticks):
        if loop.time() >= deadline:
            return False
        await asyncio.sleep(0.05)
    return True


async def terminate(pid: int, start_ticks: int, markers: Sequence[str], *, grace: float) -> bool:
    """SIGTERM our process, SIGKILL it after ``grace`` seconds; False if it was not ours/alive."""
    if not is_ours(pid, start_ticks, markers):
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    if await wait_gone(pid, start_ticks, grace):
        return True
    log.warning("stack_process_sigkill", pid=pid, grace_s=grace)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    if await wait_gone(pid, start_ticks, 10.0):
        return True
    msg = f"process {pid} survived SIGKILL"
    raise StackError(msg)


def kill_now(pid: int, start_ticks: int, markers: Sequence[str]) -> bool:
    """SIGKILL our process without waiting (chaos tests); False if it was not ours/alive."""
    if not is_ours(pid, start_ticks, markers):
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    return True


async def run_to_end(argv: Sequence[str], limit_s: float) -> tuple[int, str]:
    """Run a short command to its end: its exit code and combined output. Past ``limit_s`` the
    command is killed and TimeoutError raised."""
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        async with asyncio.timeout(limit_s):
            out, _ = await proc.communicate()
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    return proc.returncode or 0, out.decode(errors="replace")


def last_lines(text: str, lines: int = 15) -> str:
    """The last ``lines`` lines of a command's output."""
    return "\n".join(text.splitlines()[-lines:])


def log_tail(path: Path, lines: int = 15) -> str:
    """The last lines of a log file, for error messages."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return last_lines(text, lines)
