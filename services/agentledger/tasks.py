"""Bounded waits that keep cancellation: the one way background tasks and closes are ended.

Python 3.11's ``asyncio.wait_for`` drops a cancellation that arrives as its inner awaitable
completes: the cancelled caller gets the result and runs on, so a shutdown that cancelled it
waits for it forever. ``asyncio.timeout`` keeps the cancellation; everything here uses it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
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
