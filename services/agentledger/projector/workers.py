"""Rebuild's worker processes: the partition numbers folded in parallel, one process per share.

A rebuild is CPU-bound (decode, fold, encode) and the runs of one partition number never touch
another's, so :class:`ProcessReplayer` splits the partition numbers into shares, folds the first
share itself and forks one child process per other share, each with its own event loop, Kafka
consumer and Redis connection, folding its share as :func:`.bulk.fold_ranges` does into the same
fresh namespace. A forked child has everything imported already (a child started as ``python -m
agentledger.projector.workers``, where the OS cannot fork, spends about 1 s of CPU importing
before its first record); it leaves what it inherited alone (DESIGN.md §10, session 11). The
parent sums its own and the children's progress for the operator and returns once every share is
folded; the caller then records the namespace's progress and flips the pointer. If any share
fails, the others are stopped and the error is raised as a RebuildWorkerError: the namespace is
never swapped in. A child exits when its lifeline (its stdin, when started by exec) closes, so a
parent that dies takes its children with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict
from typing import Any

import structlog

from agentledger._core.gc_tuning import collector_paused, tune_collector
from agentledger.errors import ConfigurationError, RebuildWorkerError
from agentledger.events.codec import EventCodec
from agentledger.logdefaults import configure_logging
from agentledger.projector.bulk import BulkCounts, Progress, Replayer, Teller, fold_ranges
from agentledger.projector.forking import fork_child
from agentledger.projector.kafka import KafkaLogReader
from agentledger.projector.settings import ProjectorSettings
from agentledger.settings import environment_of
from agentledger.views.redis_store import RedisViewStore
from agentledger.views.store import TopicPartition

log = structlog.get_logger(__name__)

#: How often a child says how many records it has folded.
_REPORT_EVERY_S = 0.5
#: Exit code of a child whose parent went away (its stdin closed before it finished).
_ORPHANED = 3


#: Records below which a rebuild with AGENTLEDGER_REBUILD_WORKERS=0 (one per core) folds in its
#: own process: a child started by exec first spends about 1 s of CPU importing, which two
#: children folding at ~90 µs a record in parallel win back only past ~22,000 records (measured
#: before children were forked; a forked child skips the imports, not yet measured again).
AUTO_MIN_RECORDS = 30_000


def worker_count(settings: ProjectorSettings, numbers: int) -> int:
    """Processes a rebuild of ``numbers`` partition numbers folds in: AGENTLEDGER_REBUILD_WORKERS,
    or one per CPU core (0), never more than there are partition numbers."""
    wanted = settings.rebuild_workers or (os.cpu_count() or 1)
    return max(1, min(wanted, numbers))


def shares(
    ranges: Mapping[TopicPartition, tuple[int, int]], workers: int
) -> list[dict[TopicPartition, tuple[int, int]]]:
    """``ranges`` split by partition number into at most ``workers`` shares of about equal
    record counts (the largest partition number first onto the lightest share)."""
    by_number: dict[int, dict[TopicPartition, tuple[int, int]]] = {}
    for tp, span in ranges.items():
        by_number.setdefault(tp[1], {})[tp] = span

    def size(number: int) -> int:
        return sum(max(0, end - start) for start, end in by_number[number].values())

    out: list[dict[TopicPartition, tuple[int, int]]] = [{} for _ in range(workers)]
    loads = [0] * workers
    for number in sorted(by_number, key=lambda n: (-size(n), n)):
        lightest = loads.index(min(loads))
        out[lightest].update(by_number[number])
        loads[lightest] += size(number)
    return [share for share in out if share]


def child_env(settings: ProjectorSettings) -> dict[str, str]:
    """The environment of a child: this one without AGENTLEDGER_*, then ``settings`` as the
    AGENTLEDGER_* variables (resolved endpoints included, secrets in clear)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLEDGER_")}
    return env | environment_of(settings)


class ProcessReplayer(Replayer):
    """Folds in child processes, one per share of the partition numbers (see the module)."""

    def __init__(
        self, settings: ProjectorSettings, *, workers: int | None = None, min_records: int = 0
    ) -> None:
        self._settings = settings
        self._workers = workers
        self.min_records = min_records
        #: fork the children from this process (everything imported) where the OS can; else
        #: start ``python -m agentledger.projector.workers``, which imports for about 1 s
        self.fork = hasattr(os, "fork")

    async def replay(
        self,
        namespace: str,
        ranges: Mapping[TopicPartition, tuple[int, int]],
        *,
        partitions: int | None,
        parked_max: int,
        on_progress: Callable[[Progress], None] | None = None,
    ) -> BulkCounts:
        """See :meth:`Replayer.replay`; raises RebuildWorkerError if a child fails."""
        numbers = len({p for _, p in ranges})
        workers = self._workers or worker_count(self._settings, numbers)
        parts = shares(ranges, workers)
        teller = Teller(sum(max(0, end - start) for start, end in ranges.values()), on_progress)
        done = [0] * len(parts)
        counts = BulkCounts()
        cpu = time.process_time()
        env = child_env(self._settings)

        def heard(index: int, records: int) -> None:
            done[index] = records
            teller.tell(sum(done))

        specs = [
            {
                "namespace": namespace,
                "ranges": [[t, p, a, b] for (t, p), (a, b) in sorted(share.items())],
                "partitions": partitions,
                "parked_max": parked_max,
                "chunk": self._settings.rebuild_chunk,
            }
            for share in parts
        ]
        log.info("rebuild_workers", workers=len(specs), namespace=namespace)
        try:
            async with asyncio.TaskGroup() as tg:
                tasks = [tg.create_task(self._fold_here(specs[0], functools.partial(heard, 0)))]
                tasks += [
                    tg.create_task(
                        fork_child(
                            functools.partial(_fold_share, self._settings, spec),
                            functools.partial(heard, i),
                            f"rebuild worker of partitions {_numbers(spec)}",
                        )
                        if self.fork
                        else _run_child(env, spec, functools.partial(heard, i))
                    )
                    for i, spec in enumerate(specs)
                    if i > 0
                ]
        except ExceptionGroup as group:
            # the first share's failure is the rebuild's; the rest were stopped because of it
            raise _first(group) from None
        for task in tasks[1:]:
            counts.add(task.result())
        counts.add(tasks[0].result())  # its cpu_s is 0: this process's CPU is counted below
        counts.cpu_s += time.process_time() - cpu
        teller.tell(counts.records, final=True)
        return counts

    async def _fold_here(self, spec: dict[str, Any], heard: Callable[[int], None]) -> BulkCounts:
        """Fold one share in this process, as a child would (its failure is a worker's)."""
        try:
            return await _fold_share(self._settings, spec, heard)
        except Exception as e:
            msg = f"rebuild worker of partitions {_numbers(spec)} failed: {type(e).__name__}: {e}"
            raise RebuildWorkerError(msg) from e


def _first(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first exception in ``group`` that is not itself a group."""
    found = group.exceptions[0]
    return _first(found) if isinstance(found, BaseExceptionGroup) else found


def _numbers(spec: dict[str, Any]) -> list[int]:
    return sorted({int(p) for _, p, _, _ in spec["ranges"]})


async def _run_child(
    env: dict[str, str], spec: dict[str, Any], heard: Callable[[int], None]
) -> BulkCounts:
    """Start one child with ``spec``, pass its progress to ``heard``, return its counts; kill it
    if this task is cancelled (another child failed, or the rebuild was interrupted)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "agentledger.projector.workers",
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    if proc.stdin is None or proc.stdout is None:  # both pipes were asked for just above
        msg = "a rebuild worker started without its pipes"
        raise RebuildWorkerError(msg)
    try:
        proc.stdin.write(json.dumps(spec).encode() + b"\n")
        await proc.stdin.drain()
        result: BulkCounts | None = None
        error = "it printed nothing"
        async for line in proc.stdout:
            said = json.loads(line)
            if "records" in said:
                heard(int(said["records"]))
            elif "done" in said:
                result = BulkCounts(**said["done"])
            elif "error" in said:
                error = str(said["error"])
        code = await proc.wait()
    except BaseException:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        raise
    finally:
        proc.stdin.close()
    if code != 0 or result is None:
        msg = f"rebuild worker of partitions {_numbers(spec)} failed (exit {code}): {error}"
        raise RebuildWorkerError(msg)
    return result


def _say(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def _exit_when_orphaned() -> None:
    """Exit at once when stdin closes: the parent is gone (or gave up on this child)."""
    sys.stdin.read()
    os._exit(_ORPHANED)


async def _fold_share(
    settings: ProjectorSettings, spec: dict[str, Any], heard: Callable[[int], None]
) -> BulkCounts:
    """Fold one share (``spec``); ``heard`` is told the records folded about every 0.5 s."""
    if settings.redis_url is None or settings.kafka_bootstrap is None:
        msg = "a rebuild worker needs AGENTLEDGER_REDIS_URL and AGENTLEDGER_KAFKA_BOOTSTRAP"
        raise ConfigurationError(msg)
    ranges = {(str(t), int(p)): (int(a), int(b)) for t, p, a, b in spec["ranges"]}
    counts = BulkCounts()
    said = time.monotonic()

    def report() -> None:
        nonlocal said
        now = time.monotonic()
        if now - said >= _REPORT_EVERY_S:
            said = now
            heard(counts.records)

    codec = EventCodec()
    # the share's runs stay in memory until written: no collector passes over them (its fold
    # makes no cycles to speak of; see collector_paused)
    with collector_paused():
        async with (
            RedisViewStore.from_url(
                settings.redis_url,
                key_prefix=settings.key_prefix,
                codec=codec,
                retention_ms=settings.retention,
                settings=settings,
            ) as store,
            KafkaLogReader(
                settings.kafka_bootstrap,
                connect_timeout_ms=settings.kafka_connect_timeout_ms,
                settings=settings,
            ) as reader,
        ):
            await fold_ranges(
                store,
                reader,
                str(spec["namespace"]),
                ranges,
                chunk=int(spec["chunk"]),
                codec=codec,
                counts=counts,
                on_records=report,
                partitions=spec["partitions"],
                parked_max=int(spec["parked_max"]),
            )
    return counts


def main() -> None:
    """The child: read the spec from stdin, fold the share, say the counts (or the error)."""
    spec = json.loads(sys.stdin.readline())
    threading.Thread(target=_exit_when_orphaned, daemon=True).start()
    settings = ProjectorSettings()
    configure_logging(settings.log_level)
    # a share's runs stay in memory until written: the default collector would traverse them
    # again and again (see tune_collector)
    tune_collector()
    try:
        counts = asyncio.run(_fold_share(settings, spec, lambda n: _say({"records": n})))
    except Exception as e:  # noqa: BLE001 - the child's outermost loop: one line to the parent
        with contextlib.suppress(OSError):
            _say({"error": f"{type(e).__name__}: {e}"})
        sys.exit(1)
    counts.cpu_s = time.process_time()  # since the child started: its imports count too
    _say({"done": asdict(counts)})


if __name__ == "__main__":
    main()
