"""Before pytest-timeout fails a hung test, print every asyncio task's stack.

pytest-timeout shows the threads' stacks, and a hung async test shows only its event loop in
``select``: which await never ended is lost. A timer started with each test fires a little
before the test's timeout and, on every running event loop, prints each task's stack to the
test's captured stderr (shown in the failure report). The print runs on the loop itself
(``call_soon_threadsafe``), so the tasks are read where they are safe to read.
"""

from __future__ import annotations

import asyncio
import gc
import io
import sys
import threading

#: How long before the test's timeout the stacks are printed.
LEAD_S = 20.0


def running_loops() -> list[asyncio.AbstractEventLoop]:
    """Every event loop of the process that is running now."""
    return [
        o for o in gc.get_objects() if isinstance(o, asyncio.AbstractEventLoop) and o.is_running()
    ]


def tasks_report(loop: asyncio.AbstractEventLoop) -> str:
    """The stack of every unfinished task of ``loop`` (call it on the loop's thread)."""
    out = io.StringIO()
    tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
    out.write(f"+++ {len(tasks)} asyncio tasks still running +++\n")
    for task in tasks:
        out.write(f"--- {task.get_name()}: {task.get_coro()!r}\n")
        task.print_stack(file=out)
    return out.getvalue()


def _print_on_loops(nodeid: str) -> None:
    for loop in running_loops():

        def report(loop: asyncio.AbstractEventLoop = loop) -> None:
            print(f"hang report for {nodeid}\n{tasks_report(loop)}", file=sys.stderr, flush=True)

        loop.call_soon_threadsafe(report)


def start_watch(nodeid: str, timeout_s: float) -> threading.Timer | None:
    """A daemon timer printing the tasks' stacks ``LEAD_S`` before ``timeout_s``; None for none."""
    if timeout_s <= 0:
        return None
    timer = threading.Timer(max(timeout_s - LEAD_S, timeout_s * 0.8), _print_on_loops, (nodeid,))
    timer.daemon = True
    timer.start()
    return timer


def item_timeout(item: object) -> float:
    """The pytest-timeout of ``item``: its ``timeout`` mark, else ``--timeout``, else the ini."""
    marker = item.get_closest_marker("timeout")  # type: ignore[attr-defined]
    if marker is not None and marker.args:
        return float(marker.args[0])
    config = item.config  # type: ignore[attr-defined]
    value = config.getoption("timeout", None)
    if value is None:
        value = config.getini("timeout") or 0
    return float(value)
