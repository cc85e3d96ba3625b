"""A rebuild worker forked from the command's process: one coroutine folded in a child.

The child is the parent as it is at the fork, everything imported, so it starts at once (a
child started by exec imports for about 1 s of CPU first). It leaves what it inherited alone:
the parent's event loop is never run (its running-loop mark is cleared, its signal wakeup fd
dropped, SIGINT and SIGTERM back to their defaults) and the parent's sockets are never read or
written (they are closed only by the child's exit, which closes its copies, not the parent's
connections); it opens its own loop and connections. It never returns into the parent's stack:
it ends with ``os._exit``. It tells the parent its progress, then its counts or its error, one
JSON line each on a pipe, and exits at once when its lifeline pipe reaches its end (the parent
is gone, or gave up on it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import asdict
from typing import Any, NoReturn

from agentledger._core.gc_tuning import tune_collector
from agentledger.errors import RebuildWorkerError
from agentledger.projector.bulk import BulkCounts

#: Exit code of a child whose parent went away (its lifeline closed before it finished).
ORPHANED = 3

#: What a child folds: a coroutine function told its progress (records folded so far).
Fold = Callable[[Callable[[int], None]], Coroutine[Any, Any, BulkCounts]]


async def fork_child(fold: Fold, heard: Callable[[int], None], name: str) -> BulkCounts:
    """Fork a child that runs ``fold``, pass its progress to ``heard``, return its counts (its
    ``cpu_s`` its own CPU since the fork); raise RebuildWorkerError, naming ``name``, if it
    fails; kill it if this task is cancelled (another worker failed, or the rebuild stopped)."""
    down_r, down_w = os.pipe()  # the child's lifeline
    up_r, up_w = os.pipe()  # the child's lines
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os.close(down_w)
        os.close(up_r)
        _child(fold, down_r, up_w)
    os.close(down_r)
    os.close(up_w)
    lines = asyncio.StreamReader()
    transport, _ = await asyncio.get_running_loop().connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(lines), os.fdopen(up_r, "rb", buffering=0)
    )
    exited = False
    try:
        result: BulkCounts | None = None
        error = "it said nothing"
        async for line in lines:
            said = json.loads(line)
            if "records" in said:
                heard(int(said["records"]))
            elif "done" in said:
                result = BulkCounts(**said["done"])
            elif "error" in said:
                error = str(said["error"])
        # its end of the pipe closed: it has exited, or is exiting
        _, status = await asyncio.to_thread(os.waitpid, pid, 0)
        exited = True
        code = os.waitstatus_to_exitcode(status)
    finally:
        transport.close()
        os.close(down_w)
        if not exited:
            _kill(pid)
    if code != 0 or result is None:
        msg = f"{name} failed (exit {code}): {error}"
        raise RebuildWorkerError(msg)
    return result


def _kill(pid: int) -> None:
    """SIGKILL a forked child and reap it (at once: a killed process runs nothing more)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def _child(fold: Fold, lifeline: int, out: int) -> NoReturn:
    """The forked child (see the module): run ``fold`` in a loop of its own, say the counts or
    the error on ``out``, exit."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        asyncio.events._set_running_loop(None)  # the parent's loop, which this child never runs
        writer = os.fdopen(out, "w", encoding="utf-8")

        def say(message: dict[str, Any]) -> None:
            writer.write(json.dumps(message) + "\n")
            writer.flush()

        threading.Thread(target=_exit_when_closed, args=(lifeline,), daemon=True).start()
        # the share's runs stay in memory until written (see tune_collector); what was
        # inherited is frozen out of the collections, which also keeps its pages shared
        tune_collector()
        try:
            counts = asyncio.run(fold(lambda n: say({"records": n})))
        except Exception as e:  # noqa: BLE001 - the child's outermost loop: one line to the parent
            with contextlib.suppress(OSError):
                say({"error": f"{type(e).__name__}: {e}"})
        else:
            counts.cpu_s = time.process_time()  # since the fork: this child's CPU alone
            say({"done": asdict(counts)})
            code = 0
    finally:
        os._exit(code)


def _exit_when_closed(fd: int) -> None:
    """Exit at once when ``fd`` reaches its end: the parent is gone (or gave up on this child)."""
    while os.read(fd, 4096):
        pass
    os._exit(ORPHANED)
