"""Rebuild views by replaying the run topics into a fresh namespace; verify the live views.

Rebuild: capture the end offsets E of every run-topic partition, replay [earliest, E) into a new
namespace (recording E as its progress), then flip the pointer in one write. Readers see the old
complete views until the flip and the new complete views after it, never a half-built one. The
live projector keeps serving throughout; at its next batch it sees the new namespace, anchors on
E and re-reads what it had applied after E into the new namespace, so nothing it wrote during
the rebuild is lost. After a grace period the old namespace is deleted.

Verify: the same replay into a scratch namespace, then a key-for-key comparison with the live
one (after waiting for the live projector to reach E); runs that received events after E are
reported as moved on, not as differences.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import structlog

from agentledger.events.codec import EventCodec
from agentledger.projector.bulk import InProcessReplayer, Progress, Replayer
from agentledger.projector.parking import DEFAULT_PARKED_MAX
from agentledger.projector.ports import LogReader
from agentledger.views.layout import same_value
from agentledger.views.store import SnapshotValue, TopicPartition, ViewStore

log = structlog.get_logger(__name__)


@dataclass
class Replay:
    """What a replay into one namespace did."""

    namespace: str
    ends: dict[TopicPartition, int]
    records: int
    applied: int
    seconds: float
    dead_letters: int
    #: CPU seconds (user + system) of the processes that folded
    cpu_s: float = 0.0

    @property
    def events_per_second(self) -> float:
        """Records replayed per second."""
        return self.records / self.seconds if self.seconds > 0 else 0.0


async def replay_into_new_namespace(
    store: ViewStore,
    reader: LogReader,
    run_topics: Sequence[str],
    *,
    partitions: int,
    chunk: int = 5000,
    codec: EventCodec | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    parked_max: int = DEFAULT_PARKED_MAX,
    replayer: Replayer | None = None,
) -> Replay:
    """Replay every run topic from its earliest offset to its current end into a new namespace
    (see :mod:`.bulk`; ``replayer`` folds, by default and below its ``min_records`` in this
    process through ``store`` and ``reader``); ``on_progress`` is told records, rate and ETA
    about once a second. The ends are recorded as the namespace's progress once every fold
    has stood; if any fails, the new namespace is deleted and the error raised."""
    tps = await reader.partitions(run_topics)
    # records off their key's partition are dead-lettered, as the live projector does; the
    # count the topics really have decides (``partitions`` if they have none yet)
    partitions = max((p + 1 for _, p in tps), default=partitions)
    ends = await reader.end_offsets(tps)
    begins = await reader.beginning_offsets(tps)
    ranges = {tp: (begins[tp], ends[tp]) for tp in tps}
    records = sum(max(0, end - begin) for begin, end in ranges.values())
    folder = (
        replayer
        if replayer is not None and records >= replayer.min_records
        else InProcessReplayer(store, reader, codec or EventCodec(), chunk=chunk)
    )
    namespace = await store.create_namespace()
    started = time.monotonic()
    try:
        counts = await folder.replay(
            namespace,
            ranges,
            partitions=partitions,
            parked_max=parked_max,
            on_progress=on_progress,
        )
        await store.record_progress(namespace, ends)
    except BaseException:
        # never live, never used: what it holds is only a part of the log
        with contextlib.suppress(Exception):
            await asyncio.shield(store.drop_namespace(namespace))
        raise
    seconds = time.monotonic() - started
    log.info("replayed", namespace=namespace, records=counts.records, seconds=round(seconds, 3))
    return Replay(
        namespace,
        ends,
        counts.records,
        counts.applied,
        seconds,
        counts.dead_letters,
        counts.cpu_s,
    )


async def swap_in(store: ViewStore, replay: Replay, *, grace_ms: int) -> str | None:
    """Point readers at the replayed namespace; delete the previous one after ``grace_ms``."""
    previous = await store.swap(replay.namespace)
    log.info("namespace_swapped", live=replay.namespace, previous=previous)
    if previous is not None and previous != replay.namespace:
        await asyncio.sleep(grace_ms / 1000)
        # a projector mid-batch at the flip may still write its batch into the old namespace
        await store.drop_namespace(previous)
    return previous


async def wait_for_progress(
    store: ViewStore, namespace: str, ends: dict[TopicPartition, int], timeout_s: float
) -> bool:
    """Whether the projector's progress in ``namespace`` reaches ``ends`` within the timeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        done = await store.read_progress(namespace)
        if all(done.get(tp, 0) >= end for tp, end in ends.items() if end > 0):
            return True
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.1)


@dataclass
class Comparison:
    """Differences between the live and the rebuilt namespace."""

    differences: list[str] = field(default_factory=list)
    moved_on: list[str] = field(default_factory=list)
    keys_compared: int = 0


def _run_tags(snap: dict[str, SnapshotValue]) -> dict[str, tuple[str, int]]:
    """tag -> (run_id, applied_seq) for every run hash in a snapshot."""
    found: dict[str, tuple[str, int]] = {}
    for key, (kind, content, _) in snap.items():
        if kind == "hash" and key.endswith("}:run") and isinstance(content, dict):
            run_id = content.get("run_id", b"").decode()
            found[key[: -len(":run")]] = (run_id, int(content.get("applied_seq", b"0")))
    return found


def _index_member_run(member: str) -> str:
    if member.startswith("["):
        return str(json.loads(member)[0])
    return member


def _strip(content: object, moved: set[str]) -> object:
    """An index's content without entries of runs that moved on."""
    if not isinstance(content, list):
        return content
    kept = []
    for item in content:
        member = item[0] if isinstance(item, tuple) else item
        if _index_member_run(str(member)) not in moved:
            kept.append(item)
    return kept


def _stripped(entry: SnapshotValue | None, moved: set[str]) -> SnapshotValue | None:
    """An entry with index members of moved-on runs removed; None if nothing is left."""
    if entry is None:
        return None
    kind, content, ttl = entry
    content = _strip(content, moved)
    if kind == "zset" and not content:
        return None
    return kind, content, ttl


def _show(value: object) -> str:
    text = value.decode(errors="replace") if isinstance(value, bytes) else repr(value)
    return text if len(text) <= 160 else text[:157] + "..."


def compare(live: dict[str, SnapshotValue], rebuilt: dict[str, SnapshotValue]) -> Comparison:
    """Key-for-key comparison; runs further along in the live namespace are skipped."""
    out = Comparison()
    live_runs, rebuilt_runs = _run_tags(live), _run_tags(rebuilt)
    moved_tags = {
        tag
        for tag, (_, seq) in live_runs.items()
        if tag in rebuilt_runs and seq > rebuilt_runs[tag][1]
    }
    moved_runs = {live_runs[t][0] for t in moved_tags}
    out.moved_on = sorted(moved_runs)
    for key in sorted(set(live) | set(rebuilt)):
        if key.startswith("{") and key.rsplit(":", 1)[0] in moved_tags:
            continue
        a_entry = _stripped(live.get(key), moved_runs)
        b_entry = _stripped(rebuilt.get(key), moved_runs)
        if a_entry is None and b_entry is None:
            continue  # an index that only held runs which moved on
        out.keys_compared += 1
        if a_entry is None:
            out.differences.append(f"missing in live: {key}")
            continue
        if b_entry is None:
            out.differences.append(f"only in live: {key}")
            continue
        (kind_a, a, ttl_a), (kind_b, b, ttl_b) = a_entry, b_entry
        if kind_a != kind_b:
            out.differences.append(f"{key}: live is a {kind_a}, rebuilt is a {kind_b}")
        elif isinstance(a, dict) and isinstance(b, dict):
            part = key.rsplit(":", 1)[-1]
            for name in sorted(set(a) | set(b)):
                if not same_value(part, a.get(name), b.get(name)):
                    out.differences.append(
                        f"{key} [{name}]: live={_show(a.get(name))} rebuilt={_show(b.get(name))}"
                    )
        elif a != b:
            out.differences.append(f"{key}: live={_show(a)} rebuilt={_show(b)}")
        if ttl_a != ttl_b:
            out.differences.append(f"{key}: live has TTL={ttl_a}, rebuilt has TTL={ttl_b}")
    return out
