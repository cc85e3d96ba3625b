"""Reading, writing and locking a local stack's state file."""

from __future__ import annotations

import asyncio
import fcntl
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from pydantic import BaseModel

from agentledger.stack.config import StackPaths
from agentledger.stack.state import StackState, parse_state, render_state


def load_state(paths: StackPaths) -> StackState:
    """The state file, or an empty state when there is none."""
    try:
        text = paths.state_file.read_text()
    except FileNotFoundError:
        return StackState()
    return parse_state(text, paths.state_file)


def write_state(path: Path, state: BaseModel) -> None:
    """Write a state file atomically (a reader sees the old text or the new, never half)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(render_state(state))
    os.replace(tmp, path)


def save_state(paths: StackPaths, state: StackState) -> StackState:
    """Write the state file atomically; returns the state written."""
    write_state(paths.state_file, state)
    return state


@asynccontextmanager
async def locked(paths: StackPaths) -> AsyncIterator[None]:
    """Hold the state directory's lock (between processes too) while changing the stack."""
    paths.root.mkdir(parents=True, exist_ok=True)
    fd = os.open(paths.lock_file, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        await asyncio.to_thread(fcntl.flock, fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the flock
