"""Owning processes: /proc parsing, spawning detached, proving ownership, stopping."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from pathlib import Path

from agentledger.stack.procs import (
    cmdline_matches,
    is_alive,
    is_ours,
    kill_now,
    parse_stat,
    read_stat,
    spawn_detached,
    terminate,
    wait_gone,
)

SLEEPER = [sys.executable, "-c", "import time; time.sleep(300)"]
STAT = "4242 (java (weird) name) S 1 4242 4242 0 -1 4194560 1 0 0 0 3 1 0 0 20 0 30 0 987654 1 2"


def test_stat_parsing_survives_parentheses_in_the_name() -> None:
    """State and start time are read after the last ')' of the command name."""
    stat = parse_stat(STAT)
    assert stat.state == "S"
    assert stat.start_ticks == 987654


def test_cmdline_matching_handles_nul_separators_and_retitles() -> None:
    """A marker matches NUL-separated argv and redis-server's rewritten title alike."""
    assert cmdline_matches(
        b"java\0-cp\0x\0kafka.Kafka\0/s/server.properties\0", ["/s/server.properties"]
    )
    assert cmdline_matches(b"redis-server 127.0.0.1:6390\0\0", ["redis-server 127.0.0.1:6390"])
    assert not cmdline_matches(b"redis-server 127.0.0.1:6391\0", ["redis-server 127.0.0.1:6390"])


def test_own_process_is_ours_until_stopped(tmp_path: Path) -> None:
    """A spawned process is ours (pid, start time, marker); after SIGTERM it is gone."""
    marker = str(tmp_path / "marker")
    pid, start = spawn_detached([*SLEEPER, marker], tmp_path / "out.log")
    try:
        assert is_ours(pid, start, [marker])
        assert not is_ours(pid, start + 1, [marker])  # a reused pid has another start time
        assert not is_ours(pid, start, ["something-else"])
        assert os.getsid(pid) == pid  # its own session: survives our terminal closing
    finally:
        kill_now(pid, start, [marker])


def _descriptor_targets(pid: int) -> set[str]:
    """What ``pid``'s open descriptors point at. A descriptor that closes between the listing
    and its readlink is skipped: the starting interpreter opens and closes files as it imports,
    and one of those vanishing made the test fail under load (FileNotFoundError); the lock and
    the log it asserts on stay open for the process's life."""
    targets = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(FileNotFoundError):
            targets.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
    return targets


def test_a_spawned_process_keeps_no_descriptor_we_inherited(tmp_path: Path) -> None:
    """A descriptor our parent passed down (``flock LOCK cmd``'s lock) is not the daemon's:
    it holds only what the spawn gave it, so the lock ends with the command."""
    marker = str(tmp_path / "marker")
    held = os.open(tmp_path / "lock", os.O_RDONLY | os.O_CREAT)
    os.set_inheritable(held, True)
    try:
        pid, start = spawn_detached([*SLEEPER, marker], tmp_path / "out.log")
    finally:
        os.close(held)
    try:
        targets = _descriptor_targets(pid)
        assert str(tmp_path / "lock") not in targets
        assert str(tmp_path / "out.log") in targets
    finally:
        kill_now(pid, start, [marker])


async def test_terminate_stops_only_our_process(tmp_path: Path) -> None:
    """terminate() refuses a pid whose marker differs, and stops ours."""
    marker = str(tmp_path / "marker")
    pid, start = spawn_detached([*SLEEPER, marker], tmp_path / "out.log")
    assert not await terminate(pid, start, ["not-ours"], grace=1.0)
    assert is_alive(pid, start)
    assert await terminate(pid, start, [marker], grace=5.0)
    assert not is_alive(pid, start)
    assert read_stat(pid) is None
    assert not await terminate(pid, start, [marker], grace=1.0)  # idempotent


async def test_terminate_kills_a_process_ignoring_sigterm(tmp_path: Path) -> None:
    """A process that ignores SIGTERM is SIGKILLed after the grace period."""
    script = tmp_path / "stubborn.sh"
    script.write_text("trap '' TERM\nwhile :; do sleep 0.1; done\n")
    pid, start = spawn_detached(["bash", str(script)], tmp_path / "out.log")
    assert await terminate(pid, start, [str(script)], grace=0.5)
    assert not is_alive(pid, start)


# The first thread ends on its own (pthread_exit) while a second one keeps the process going,
# as a SIGKILLed JVM's leader thread is a zombie while its other threads are still exiting.
LEADER_GONE_FIRST = [
    sys.executable,
    "-c",
    "import ctypes, threading, time\n"
    "threading.Thread(target=time.sleep, args=(300,)).start()\n"
    "ctypes.CDLL(None).pthread_exit(None)\n",
]


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return parse_stat(f.read()).state


async def test_a_process_whose_first_thread_is_a_zombie_is_alive_until_its_last_ends(
    tmp_path: Path,
) -> None:
    """Its descriptors (a broker's listening ports) are held until the last thread ends, so it
    is not gone while a thread runs; it is once the last one has ended."""
    marker = str(tmp_path / "marker")
    pid, start = spawn_detached([*LEADER_GONE_FIRST, marker], tmp_path / "out.log")
    try:
        for _ in range(200):  # until the first thread has exited (it shows Z)
            if _state(pid) == "Z":
                break
            await asyncio.sleep(0.05)
        assert _state(pid) == "Z"
        assert is_alive(pid, start)
        os.kill(pid, signal.SIGKILL)
        assert await wait_gone(pid, start, 10.0)
        assert not is_alive(pid, start)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
