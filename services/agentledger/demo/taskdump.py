"""A hung demo worker says where it hangs: every asyncio task's await chain, on a signal."""

from __future__ import annotations

import asyncio
import faulthandler
import signal
import sys
from typing import Any, TextIO

#: The signal a soak sends a worker that outlived its timeout, just before the SIGKILL.
DUMP_SIGNAL = signal.SIGUSR1


def dump_tasks_on_signal(loop: asyncio.AbstractEventLoop, signum: int = DUMP_SIGNAL) -> None:
    """On ``signum``, write every task's await chain and every thread's stack to stderr."""
    loop.add_signal_handler(signum, dump_tasks, sys.stderr)


def dump_tasks(out: TextIO) -> None:
    """Write each pending task's await chain (file:line of every frame, innermost last, then
    what it awaits), then every thread's Python stack."""
    tasks = asyncio.all_tasks()
    out.write(f"--- {len(tasks)} pending asyncio task(s) ---\n")
    for task in tasks:
        out.write(f"task {task.get_name()}:\n")
        for line in await_chain(task.get_coro()):
            out.write(f"    {line}\n")
        # the future the task is parked on (private to asyncio: absent on other loops)
        out.write(f"    waits on {getattr(task, '_fut_waiter', None)!r}"[:400] + "\n")
    out.flush()
    faulthandler.dump_traceback(file=out, all_threads=True)
    out.flush()


def await_chain(coro: Any) -> list[str]:
    """The frames a suspended coroutine is stopped in, outermost first, then what it awaits."""
    lines: list[str] = []
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is None:
            lines.append(f"awaiting {coro!r}"[:300])
            break
        lines.append(f"{frame.f_code.co_filename}:{frame.f_lineno} {frame.f_code.co_name}")
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return lines
