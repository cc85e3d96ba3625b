"""Bounded waits that keep cancellation: the one way background tasks and closes are ended.

Python 3.11's ``asyncio.wait_for`` drops a cancellation that arrives as its inner awaitable
completes: the cancelled caller gets the result and runs on, so a shutdown that cancelled it
waits for it forever. ``asyncio.timeout`` keeps the cancellation; everything here uses it.

``asyncio.timeout`` alone still trusts the awaited code to honour the one cancellation it sends
at the deadline. Library code that catches ``CancelledError`` (aiokafka's consumer close, its
group coordinator's routines) turns that cancellation into a normal return and carries on
waiting, and the timeout never fires again. :func:`run_bounded` runs such calls in a task of
their own and waits with ``asyncio.wait``, which returns at the deadline whatever the call does.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Coroutine
from typing import Any, TypeVar

import structlog

_log = structlog.get_logger(__name__)
T = TypeVar("T")

#: How long a close or a cancelled background task may take before it is abandoned.
STOP_TIMEOUT_S = 10.0


async def within(awaitable: Awaitable[T], timeout_s: float) -> T:
    """``await awaitable`` for at most ``timeout_s`` (TimeoutError), keeping a cancellation."""
    async with asyncio.timeout(timeout_s):
        return await awaitable


async def run_bounded(
    work: Coroutine[Any, Any, T], timeout_s: float, *, name: str, grace_s: float = 1.0
) -> T:
    """Run ``work`` in its own task and return its result (or raise its error) within
    ``timeout_s``, also when ``work`` swallows cancellations.

    At the deadline the task is cancelled, given ``grace_s`` to end (else abandoned with a
    warning, see :func:`stop_task`), and TimeoutError is raised. A cancellation of the caller
    cancels the task the same way and propagates.
    """
    task = asyncio.get_running_loop().create_task(work, name=name)
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout_s)
    except asyncio.CancelledError:
        await stop_task(task, timeout_s=grace_s)
        raise
    if not done:
        await stop_task(task, timeout_s=grace_s)
        msg = f"{name} did not end within {timeout_s:g} s"
        raise TimeoutError(msg)
    return task.result()


async def stop_task(task: asyncio.Task[Any], *, timeout_s: float | None = None) -> None:
    """Cancel ``task`` and wait, at most ``timeout_s`` (default :data:`STOP_TIMEOUT_S`), for it
    to end; never raises its error.

    A task that swallows its cancellation and runs on is abandoned with a warning instead of
    holding the caller forever. The caller's own cancellation still propagates.
    """
    if task.done():  # its outcome was the awaiter's business: only mark it seen
        if not task.cancelled():
            task.exception()
        return
    limit_s = STOP_TIMEOUT_S if timeout_s is None else timeout_s
    task.cancel()
    try:
        async with asyncio.timeout(limit_s):
            await asyncio.wait({task})
    except TimeoutError:
        _log.warning("task_stop_timed_out", task=task.get_name(), timeout_s=limit_s)
        return
    _retrieve(task)


async def bounded_close(
    close: Awaitable[Any], what: str, *, timeout_s: float | None = None
) -> None:
    """Run a close (a client's ``aclose()``, a session's ``close()``) for at most ``timeout_s``
    (default :data:`STOP_TIMEOUT_S`); a close that fails or does not end is logged, never raised
    (the process must get out)."""
    try:
        async with asyncio.timeout(STOP_TIMEOUT_S if timeout_s is None else timeout_s):
            await close
    except (TimeoutError, OSError) as e:
        _log.warning("close_failed", what=what, error=f"{type(e).__name__}: {e}")


def _retrieve(task: asyncio.Task[Any]) -> None:
    """Mark the task's outcome seen; an error other than the cancellation is logged."""
    if task.cancelled():
        return
    with contextlib.suppress(asyncio.CancelledError):
        error = task.exception()
        if error is not None:
            _log.warning("task_failed_on_stop", task=task.get_name(), error=repr(error))
