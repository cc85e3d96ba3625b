"""Who uses a local stack right now: one file per live process inside a LocalStack context.

Several test sessions (or tools) may share one state directory; the stack that a context
started is stopped only when the last live holder leaves.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from agentledger.stack.procs import read_stat


def holder_name(pid: int, start_ticks: int) -> str:
    """A new holder's file name: pid and start time (to spot dead holders) plus a unique token."""
    return f"{pid}-{start_ticks}-{uuid.uuid4().hex[:8]}"


def parse_holder(name: str) -> tuple[int, int] | None:
    """pid and start ticks from a holder file name, or None for a foreign file."""
    parts = name.split("-")
    if len(parts) != 3 or not parts[0].isdigit() or not parts[1].isdigit():
        return None
    return int(parts[0]), int(parts[1])


def register(holders: Path) -> Path:
    """Record one holder in this process (a process may hold several times); returns its file."""
    stat = read_stat(os.getpid())
    if stat is None:  # /proc always describes the calling process
        msg = "cannot read /proc/self/stat"
        raise OSError(msg)
    holders.mkdir(parents=True, exist_ok=True)
    path = holders / holder_name(os.getpid(), stat.start_ticks)
    path.touch()
    return path


def live_holders(holders: Path) -> list[Path]:
    """Holder files of processes still running; files of dead holders are removed."""
    live: list[Path] = []
    if not holders.is_dir():
        return live
    for path in holders.iterdir():
        parsed = parse_holder(path.name)
        if parsed is None:
            continue
        pid, ticks = parsed
        stat = read_stat(pid)
        if stat is not None and stat.start_ticks == ticks:
            live.append(path)
        else:
            path.unlink(missing_ok=True)
    return live
