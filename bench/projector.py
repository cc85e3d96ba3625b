"""``python -m bench.projector``: projector and rebuild events/s, end-to-end lag, next to the floor.

On the real stack (local stack unless AGENTLEDGER_KAFKA_BOOTSTRAP/REDIS_URL are set) and fresh
topics, in one run:

- first, ``--broker-warmup-seconds`` of the measured run's broker paths on topics of their
  own: a projector process of its own folds a published backlog (large transactions) and then
  the lag floor's load (below) in 10 s rounds each reported; a broker started for the run
  JIT-compiles what it serves for tens of seconds, which a broker in service has done long
  before (DESIGN.md §16, "A broker started for the run", "The lag, session 20"). That
  projector is stopped before anything is measured: it warms the broker, not the measured
  process. ``--broker-warmup-plain`` runs session 18's warm-up instead (the floor's load
  alone: no projector, no backlog);
- a projector is started on the empty topics and stopped (the live namespace is born); then
  ``--events`` run events (runs of 8 events over the three topics, each run written in two
  transactions) are published; then ``--instances`` projector processes (faust workers, one
  consumer group) are started and the figure is events applied per second by all of them
  together, from the first applied batch to the last;
- the same topics are rebuilt into a fresh namespace as ``views rebuild`` does (in
  ``--rebuild-workers`` processes, 0 = one per core): rebuild events/s and the CPU time (user +
  system, of every process that folded) per record;
- under a steady load of ``--lag-rate`` runs/s (default 1,000: 8,000 events/s) for
  ``--lag-seconds`` while the projector runs, each run's end-to-end lag: its last transaction
  acknowledged -> its view complete in Redis (polled every 2 ms: the projector's progress, then
  the views of the runs it has passed), p50/p99, beside the rate the bench achieved, the CPU
  shares of the bench, the projector and Redis meanwhile, and the lag of the last tenth of the
  runs (growing when the projector lags);
- the floor measured in the same run: a raw read_committed aiokafka consume loop over the same
  records, a pipelined Redis write loop (one HSET of a small hash per event, 1000 a pipeline),
  faust's own per-event delivery rate (the same app and transport with an agent that only
  counts; the projector takes its records in bulk beneath that path, see projector/intake.py),
  and the lag floor: the same steady load with no projector, each run's last transaction
  acknowledged -> a plain read_committed consumer in another process has all its records.

JSON on stdout (or ``--json FILE``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Coroutine
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis
from aiokafka import AIOKafkaConsumer, TopicPartition

from agentledger.bus.kafka import KafkaEventLog
from agentledger.bus.partitioning import key_for
from agentledger.events.keying import partition_for, run_key
from agentledger.events.topics import topic_names
from agentledger.projector.commands import replayer_for
from agentledger.projector.kafka import KafkaLogReader
from agentledger.projector.rebuild import replay_into_new_namespace
from agentledger.projector.settings import ProjectorSettings
from agentledger.projector.testing import (
    ProjectorProcess,
    isolated_projector,
    sample_run,
    settings_env,
    until,
)
from agentledger.projector.workers import worker_count
from agentledger.settings import CommonSettings
from agentledger.stack.local import LocalStack
from agentledger.stack.resolve import resolve_settings
from agentledger.views.redis_store import RedisViewStore
from bench.cpu import cpu_seconds, redis_cpu_seconds
from bench.output import print_report

EVENTS_PER_RUN = 8  # sample_run(steps=1)
#: Seconds of the lag floor's load that warm the broker up before anything is measured, by
#: default, in rounds of ``BROKER_WARMUP_ROUND_S`` (DESIGN.md §16, "A broker started for the
#: run").
BROKER_WARMUP_S = 120.0
BROKER_WARMUP_ROUND_S = 10.0
#: Runs (8 events each, two transactions a run, 128 in flight) the broker warm-up publishes
#: first, as the throughput phase does, for its projector to fold (DESIGN.md §16, "The lag,
#: session 20").
BROKER_WARMUP_PUBLISH_RUNS = 5_000


async def _publish(settings: ProjectorSettings, runs: int) -> tuple[int, float]:
    """Publish ``runs`` sample runs (made as they go), each in two transactions, 128 in flight;
    return (events, events/s)."""
    started = time.perf_counter()
    events = 0
    async with KafkaEventLog(settings, transactional_id=f"bench-{uuid.uuid4().hex[:6]}") as log:
        pending: list[Any] = []
        for n in range(runs):
            run = sample_run(f"b{n:07d}", steps=1)
            events += len(run)
            pending.append(log.publish(run[:4]))
            pending.append(log.publish(run[4:]))
            if len(pending) >= 128:
                await asyncio.gather(*pending)
                pending = []
        await asyncio.gather(*pending)
    return events, events / (time.perf_counter() - started)


async def _projector_rate(procs: list[ProjectorProcess], total: int) -> dict[str, float]:
    """Events/s of all ``procs`` together, from their first applied batch to the last, as
    their metrics show."""

    async def applied() -> list[dict[str, Any]]:
        return list(await asyncio.gather(*(p.metrics() for p in procs)))

    def count(ms: list[dict[str, Any]]) -> int:
        return sum(int(m["events_applied"]) for m in ms)

    first = await until(applied, lambda ms: count(ms) > 0, 600)
    started = time.perf_counter()
    base = count(first)
    last = await until(applied, lambda ms: count(ms) >= total, 3600)
    elapsed = time.perf_counter() - started
    batches = sum(int(m["batches"]) for m in last)
    return {
        "instances": len(procs),
        "events_applied_per_s": round((count(last) - base) / elapsed, 1) if elapsed > 0 else 0.0,
        "batches": batches,
        "mean_batch": round(total / max(1, batches), 1),
        # events that waited for a gap: parked in Redis (a run written again), or held in
        # memory until the next fetch filled it (absent before session 8)
        "events_parked": sum(int(m.get("events_parked", 0)) for m in last),
        "events_held": sum(int(m.get("events_held", 0)) for m in last),
    }


async def _warm_up(
    settings: ProjectorSettings, procs: list[ProjectorProcess], rate: float, seconds: float
) -> None:
    """The steady load for ``seconds``, unmeasured, and then until the projectors have folded
    every event of it (the measured phase starts with no backlog)."""

    async def applied() -> int:
        return sum(
            int(m["events_applied"]) for m in await asyncio.gather(*(p.metrics() for p in procs))
        )

    before = await applied()
    runs, _ = await _steady_load(settings, rate, seconds, lambda *_: None, prefix="warm")
    await until(applied, lambda n: n >= before + runs * EVENTS_PER_RUN, 600)


async def _born(settings: ProjectorSettings) -> None:
    """Start a projector on the empty topics and stop it: the live namespace exists (so the
    measured instances deliver from the group, not a wiped store's re-projection)."""
    async with ProjectorProcess(settings, name="bench-birth") as proc:
        await proc.wait_ready()
        await until(proc.metrics, lambda m: m.get("namespace") is not None, 60)


async def _kafka_floor(settings: ProjectorSettings, total: int) -> float:
    """A bare read_committed aiokafka loop over the run topics: records/s."""
    assert settings.kafka_bootstrap is not None
    consumer = AIOKafkaConsumer(
        *topic_names(settings).run_topics,
        bootstrap_servers=settings.kafka_bootstrap,
        group_id=None,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
        enable_auto_commit=False,
        max_partition_fetch_bytes=4 * 1024 * 1024,
    )
    await consumer.start()
    try:
        seen = 0
        started = time.perf_counter()
        while seen < total:
            batch = await consumer.getmany(timeout_ms=1000, max_records=10_000)
            seen += sum(len(m) for m in batch.values())
        return seen / (time.perf_counter() - started)
    finally:
        await consumer.stop()


async def _redis_floor(url: str, prefix: str, total: int) -> float:
    """Pipelined HSET of one small hash per event, 1000 a round trip: writes/s."""
    client = aioredis.Redis.from_url(url)
    try:
        started = time.perf_counter()
        for i in range(0, total, 1000):
            pipe = client.pipeline(transaction=False)
            for j in range(i, min(total, i + 1000)):
                pipe.hset(f"{prefix}:floor:{{r{j // 8}}}:run", mapping={"seq": j, "status": "x"})
            await pipe.execute()
        rate = total / (time.perf_counter() - started)
        keys = [k async for k in client.scan_iter(match=f"{prefix}:floor:*", count=1000)]
        for i in range(0, len(keys), 1000):
            await client.delete(*keys[i : i + 1000])
        return rate
    finally:
        await client.aclose()


async def _steady_load(
    settings: ProjectorSettings,
    rate: float,
    seconds: float,
    on_ack: Callable[[str, float, int, dict[tuple[str, int], int]], None],
    *,
    prefix: str = "lag",
) -> tuple[int, float]:
    """``rate`` runs/s of 8 events for ``seconds``, each run in two publishes (group-committed
    transactions, as a worker writes); ``on_ack(run_id, acked at, last seq, ends)`` once a run's
    last publish returns, ``ends`` being where the run's records end in each partition it
    wrote. Returns the runs offered and the seconds from the start to the last acknowledgement.
    Run ids are ``prefix`` and the run's number: two loads on the same topics and projector
    (the warm-up, then the measured one) must differ in ``prefix``, or the second re-writes
    the first's finished runs (every event a duplicate of one applied: nothing to write, so
    each run is read from the store and folded again, not the path a new run takes).

    Runs are started on a fixed schedule (run ``n`` at ``n / rate`` s, every run already due
    at each wake-up), whatever the earlier ones are doing, so neither a slow publish nor a late
    timer lowers the offered rate."""
    started = time.perf_counter()
    last_ack = [started]
    async with KafkaEventLog(settings, transactional_id=f"lag-{uuid.uuid4().hex[:6]}") as log:

        async def one(n: int) -> None:
            events = sample_run(f"{prefix}{n:06d}", steps=1)
            await log.publish(events[:4])
            await log.publish(events[4:])
            at = time.perf_counter()
            last_ack[0] = max(last_ack[0], at)
            number = partition_for(key_for(events[0]), settings.run_partitions)
            ends = {
                (topic, number): log.committed_end(topic, number)
                for topic in {log.topics.for_event(e) for e in events}
            }
            on_ack(events[0].run_id, at, len(events), ends)

        tasks = []
        n = 0
        total = int(rate * seconds)
        while n < total:
            # every run due by now (a late wake-up on a busy machine starts several)
            due = min(total, int((time.perf_counter() - started) * rate) + 1)
            while n < due:
                tasks.append(asyncio.ensure_future(one(n)))
                n += 1
            await asyncio.sleep(max(0.0, started + n / rate - time.perf_counter()))
        await asyncio.gather(*tasks)
    return n, last_ack[0] - started


async def _lag_floor(
    settings: ProjectorSettings, rate: float, seconds: float, *, prefix: str = "lag"
) -> dict[str, float]:
    """The same steady load with no projector: lag from a run's last acknowledgement until a
    plain read_committed aiokafka consumer in another process has all its records (the
    delivery that any projector's lag includes). Clocks: ``time.perf_counter`` is the
    machine's monotonic clock in both processes. ``prefix`` names the runs (rounds on the same
    topics that a projector folds must differ in it: :func:`_steady_load`)."""
    acked: dict[str, float] = {}
    total = int(rate * seconds)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.projector",
        "--lag-floor-child",
        settings.kafka_bootstrap or "",
        ",".join(topic_names(settings).run_topics),
        str(settings.run_partitions),
        str(total),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        assert proc.stdout is not None
        ready = await asyncio.wait_for(proc.stdout.readline(), timeout=120)
        if ready.strip() != b"ready":
            msg = f"the lag floor's consumer did not start: {ready!r}"
            raise RuntimeError(msg)

        def on_ack(run_id: str, at: float, seq: int, ends: dict[tuple[str, int], int]) -> None:
            acked[run_key(run_id).hex()] = at

        await _steady_load(settings, rate, seconds, on_ack, prefix=prefix)
        out = await asyncio.wait_for(proc.stdout.read(), timeout=120)
        await proc.wait()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    seen: dict[str, float] = json.loads(out.decode().strip().splitlines()[-1])
    ms = sorted((seen[k] - at) * 1000 for k, at in acked.items() if k in seen)
    if not ms:
        return {"runs": 0}
    return {
        "runs": len(ms),
        "lag_p50_ms": round(statistics.median(ms), 2),
        "lag_p99_ms": round(ms[min(len(ms) - 1, int(len(ms) * 0.99))], 2),
        "lag_max_ms": round(ms[-1], 2),
    }


async def _broker_warm_up(
    base: CommonSettings,
    rate: float,
    seconds: float,
    broker_pid: int | None,
    round_s: float = BROKER_WARMUP_ROUND_S,
    *,
    projector: bool = True,
    publish_runs: int = BROKER_WARMUP_PUBLISH_RUNS,
) -> list[dict[str, float]]:
    """The measured run's broker paths, on topics of their own, for about ``seconds`` before
    anything is measured: a broker started for the run JIT-compiles what it serves for tens of
    seconds, up to half a core beside the projector on this machine, which a broker in service
    has long done (DESIGN.md §16, "A broker started for the run", "The lag, session 20").

    With ``projector`` (the default) a projector process of its own (its own consumer group:
    joins, heartbeats, offset commits, faust's fetches) folds these topics, first
    ``publish_runs`` runs published as the throughput phase publishes them (large
    transactions, 128 in flight), then the lag floor's load (:func:`_lag_floor`: the writer's
    transactions, a read_committed consumer) in rounds of ``round_s``, each round's runs named
    apart. That process is stopped before the measured one starts: it warms the broker (and
    Redis's memory), not the measured projector's process, cache or connections. Each round's
    floor, the local broker's CPU share in it (``broker_pid``) and the warm-up projector's
    show how cold the broker was."""
    assert base.kafka_bootstrap is not None
    assert base.redis_url is not None
    rounds: list[dict[str, float]] = []
    async with (
        isolated_projector(base.kafka_bootstrap, base.redis_url, log_level="WARNING") as settings,
        AsyncExitStack() as stack,
    ):
        pids: list[int] = []
        if projector:
            proc = await stack.enter_async_context(
                ProjectorProcess(settings, name="bench-broker-warmup")
            )
            await proc.wait_ready()
            pids = [proc.pid] if proc.pid is not None else []
        if publish_runs > 0:
            await _publish(settings, publish_runs)
        for n in range(max(1, round(seconds / round_s))):
            cpu0 = cpu_seconds(broker_pid) if broker_pid is not None else 0.0
            proj0 = sum(cpu_seconds(pid) for pid in pids)
            started = time.perf_counter()
            floor = await _lag_floor(settings, rate, round_s, prefix=f"warm{n:03d}x")
            wall = max(1e-9, time.perf_counter() - started)
            if broker_pid is not None:
                floor["broker_cpu_share"] = round((cpu_seconds(broker_pid) - cpu0) / wall, 2)
            if pids:
                floor["projector_cpu_share"] = round(
                    (sum(cpu_seconds(pid) for pid in pids) - proj0) / wall, 2
                )
            rounds.append(floor)
    return rounds


async def _lag_floor_child(bootstrap: str, topics: list[str], partitions: int, runs: int) -> None:
    """Consume every run topic's partitions from their end (read_committed); once ``runs`` runs
    have all their records (or nothing came for 30 s), print when each was complete."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, isolation_level="read_committed", enable_auto_commit=False
    )
    await consumer.start()
    try:
        tps = [TopicPartition(t, p) for t in topics for p in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_end(*tps)
        for tp in tps:
            await consumer.position(tp)
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        counts: dict[bytes, int] = {}
        complete: dict[str, float] = {}
        quiet_since = time.perf_counter()
        while len(complete) < runs and time.perf_counter() - quiet_since < 30:
            fetched = await consumer.getmany(timeout_ms=1000)
            now = time.perf_counter()
            for records in fetched.values():
                quiet_since = now
                for r in records:
                    key = r.key or b""
                    counts[key] = counts.get(key, 0) + 1
                    if counts[key] == EVENTS_PER_RUN:
                        complete[key.hex()] = now
    finally:
        await consumer.stop()
    sys.stdout.write(json.dumps(complete) + "\n")
    sys.stdout.flush()


async def _lag(
    settings: ProjectorSettings, store: RedisViewStore, rate: float, seconds: float
) -> dict[str, float]:
    """Steady load of ``rate`` runs/s (:func:`_steady_load`); lag from the last commit of a run
    to its complete view. What was achieved is reported beside it: runs acknowledged per
    second of the writing phase, and this process's CPU share (near 1.0 means the bench itself
    was the limit). The lag of the last
    tenth of the runs shows whether the projector kept up (it grows when it does not)."""
    lags: list[tuple[float, float]] = []  # (acked at, lag s)
    # run -> (acked at, its last seq, where its records end in each partition it wrote)
    acked: dict[str, tuple[float, int, dict[tuple[str, int], int]]] = {}
    done = asyncio.Event()

    async def poll() -> None:
        """Every 2 ms the projector's progress (one small hash per partition number); a run
        whose records it has passed has its view read, and counts once that view has its last
        seq. Progress is written with the views in one atomic step, so this sees a view complete
        when the per-run poll would, at a fraction of the bench's CPU (a per-run poll read every
        pending view every 2 ms: ~30,000 reads/s at this rate, which took CPU from the projector
        it measured). A run passed by progress whose view lacks an event (parked in the store
        for a gap) is read again on each poll until it has it."""
        namespace: str | None = None
        while not (done.is_set() and not acked):
            if namespace is None:
                namespace = await store.live_namespace()
            if namespace is not None and acked:
                progress = await store.read_progress(namespace)
                passed = [
                    run
                    for run, (_, _, ends) in acked.items()
                    if all(progress.get(tp, 0) >= end for tp, end in ends.items())
                ]
                if passed:
                    pipe = store.client.pipeline(transaction=False)
                    for run in passed:
                        pipe.hget(store.keys.space(namespace).run(run), "applied_seq")
                    values = await pipe.execute()
                    now = time.perf_counter()
                    for run, value in zip(passed, values, strict=True):
                        at, seq, _ = acked[run]
                        if value is not None and int(value) >= seq:
                            lags.append((at, now - at))
                            del acked[run]
            await asyncio.sleep(0.002)

    def on_ack(run_id: str, at: float, seq: int, ends: dict[tuple[str, int], int]) -> None:
        acked[run_id] = (at, seq, ends)

    async def write() -> tuple[int, float]:
        try:
            return await _steady_load(settings, rate, seconds, on_ack)
        finally:
            done.set()

    cpu0 = time.process_time()
    started = time.perf_counter()
    poller = asyncio.ensure_future(poll())
    offered, writing_s = await write()
    cpu_share = (time.process_time() - cpu0) / max(1e-9, time.perf_counter() - started)
    await asyncio.wait_for(poller, timeout=120)
    ms = sorted(lag * 1000 for _, lag in lags)
    tail = sorted(lag * 1000 for _, lag in sorted(lags)[-max(1, len(lags) // 10) :])
    return {
        "runs": len(ms),
        "rate_runs_per_s": rate,
        "achieved_runs_per_s": round(offered / writing_s, 1) if writing_s > 0 else 0.0,
        "events_per_s": round(offered * EVENTS_PER_RUN / writing_s, 1) if writing_s > 0 else 0.0,
        "bench_cpu_share": round(cpu_share, 2),
        "lag_p50_ms": round(statistics.median(ms), 2),
        "lag_p99_ms": round(ms[min(len(ms) - 1, int(len(ms) * 0.99))], 2),
        "lag_max_ms": round(ms[-1], 2),
        "last_tenth_lag_p50_ms": round(statistics.median(tail), 2),
    }


def _local_broker_pid(common: CommonSettings) -> int | None:
    """The pid of the local stack's broker, when the bench runs on it (None on a given
    bootstrap, whose broker may be on another machine)."""
    if common.kafka_bootstrap is not None:
        return None
    record = LocalStack(common.state_dir).load().kafka
    return record.pid if record is not None else None


async def _with_cpu_shares(
    measuring: Coroutine[Any, Any, dict[str, float]],
    procs: list[ProjectorProcess],
    store: RedisViewStore,
    broker_pid: int | None = None,
) -> dict[str, float]:
    """``measuring``'s report, plus the share of a core the projector processes, redis-server
    and the local broker (``broker_pid``) used while it ran (CPU seconds over wall seconds: on
    2 cores the bench, the projector, the broker and Redis together can use 2.0), and when it
    ran (Unix time, to line it up with a sampler's or the broker's logs)."""
    pids = [p.pid for p in procs if p.pid is not None]
    projector0 = sum(cpu_seconds(pid) for pid in pids)
    redis0 = await redis_cpu_seconds(store)
    broker0 = cpu_seconds(broker_pid) if broker_pid is not None else 0.0
    started, started_unix = time.perf_counter(), time.time()
    report = await measuring
    wall = max(1e-9, time.perf_counter() - started)
    projector1 = sum(cpu_seconds(pid) for pid in pids)
    redis1 = await redis_cpu_seconds(store)
    broker1 = cpu_seconds(broker_pid) if broker_pid is not None else 0.0
    shares = {
        **report,
        "projector_cpu_share": round((projector1 - projector0) / wall, 2),
        "redis_cpu_share": round((redis1 - redis0) / wall, 2),
        "started_unix": round(started_unix, 3),
        "ended_unix": round(started_unix + wall, 3),
    }
    if broker_pid is not None:
        shares["broker_cpu_share"] = round((broker1 - broker0) / wall, 2)
    return shares


async def bench(
    events: int,
    lag_rate: float,
    lag_seconds: float,
    *,
    rebuild_only: bool = False,
    instances: int = 1,
    rebuild_workers: int = 0,
    warmup_seconds: float = 0.0,
    broker_warmup_seconds: float = 0.0,
    broker_warmup_plain: bool = False,
) -> dict[str, Any]:
    """Everything on fresh topics; returns the report (``rebuild_only``: no projector process,
    no lag, no faust floor — for rebuilds of millions of events). ``warmup_seconds`` of the
    steady load run unmeasured before the measured one, once the projector has folded the
    throughput phase (the lag depends on the state of the stack: DESIGN.md §16, "The lag on a
    stack in use"). ``broker_warmup_seconds`` of the lag floor's load warm the broker up
    first (:func:`_broker_warm_up`; ``broker_warmup_plain``: without its projector and
    backlog)."""
    common = CommonSettings()
    base = await resolve_settings(common)
    broker_pid = _local_broker_pid(common)
    assert base.kafka_bootstrap is not None
    assert base.redis_url is not None
    runs_n = max(1, events // EVENTS_PER_RUN)
    broker_warm_up: list[dict[str, float]] = []
    if broker_warmup_seconds > 0 and not rebuild_only:
        broker_warm_up = await _broker_warm_up(
            base,
            lag_rate,
            broker_warmup_seconds,
            broker_pid,
            projector=not broker_warmup_plain,
            publish_runs=0 if broker_warmup_plain else BROKER_WARMUP_PUBLISH_RUNS,
        )
    async with isolated_projector(
        base.kafka_bootstrap, base.redis_url, log_level="WARNING"
    ) as settings:
        if not rebuild_only:
            await _born(settings)
        total, publish_rate = await _publish(settings, runs_n)
        projector: dict[str, float] = {}
        lag: dict[str, float] = {}
        if not rebuild_only:
            async with AsyncExitStack() as stack:
                store = await stack.enter_async_context(
                    RedisViewStore.from_url(
                        base.redis_url,
                        key_prefix=settings.key_prefix,
                        retention_ms=settings.retention,
                    )
                )
                procs = [
                    await stack.enter_async_context(ProjectorProcess(settings, name=f"bench{i}"))
                    for i in range(instances)
                ]
                await asyncio.gather(*(p.wait_ready() for p in procs))
                projector = await _projector_rate(procs, total)
                if warmup_seconds > 0:
                    await _warm_up(settings, procs, lag_rate, warmup_seconds)
                lag = await _with_cpu_shares(
                    _lag(settings, store, lag_rate, lag_seconds), procs, store, broker_pid
                )
                lag["warmup_seconds"] = warmup_seconds
        async with (
            RedisViewStore.from_url(
                base.redis_url, key_prefix=settings.key_prefix, retention_ms=settings.retention
            ) as store,
            KafkaLogReader(base.kafka_bootstrap) as reader,
        ):
            rebuilding = settings.model_copy(update={"rebuild_workers": rebuild_workers})
            replay = await replay_into_new_namespace(
                store,
                reader,
                topic_names(settings).run_topics,
                partitions=settings.run_partitions,
                on_progress=lambda p: print(p.line(), file=sys.stderr),
                replayer=replayer_for(rebuilding),
            )
            rebuild_load = os.getloadavg()[0]
            await store.drop_namespace(replay.namespace)
        kafka_floor = await _kafka_floor(settings, total)
        redis_floor = await _redis_floor(base.redis_url, settings.key_prefix, total)
        faust_floor = 0.0 if rebuild_only else await _faust_floor(settings, total)
        lag_floor = {} if rebuild_only else await _lag_floor(settings, lag_rate, lag_seconds)
    applied = projector.get("events_applied_per_s", 0.0)
    return {
        "bench": "projector",
        "events": total,
        "partitions": settings.run_partitions,
        "publish_events_per_s": round(publish_rate, 1),
        "projector": projector,
        "rebuild": {
            "records": replay.records,
            "seconds": round(replay.seconds, 3),
            "events_per_s": round(replay.events_per_second, 1),
            "workers": worker_count(rebuilding, settings.run_partitions),
            # user + system CPU of the processes that folded (the parent's included), per record
            "cpu_us_per_record": round(replay.cpu_s / max(1, replay.records) * 1e6, 1),
            "load_avg_1m_at_end": round(rebuild_load, 2),
        },
        "end_to_end": lag,
        "floor": {
            "kafka_consume_records_per_s": round(kafka_floor, 1),
            "redis_pipelined_writes_per_s": round(redis_floor, 1),
            "faust_delivery_records_per_s": round(faust_floor, 1),
            # the same steady load, no projector: a plain read_committed consumer's lag
            "kafka_delivery_lag": lag_floor,
            # the same, on topics of its own, in rounds before anything else: the broker's
            # warm-up (the first round is the floor on the broker as the run found it; with
            # its own projector folding those topics unless plain)
            "broker_warmup": broker_warm_up,
            "broker_warmup_kind": "plain" if broker_warmup_plain else "with projector",
        },
        "ratio_projector_to_faust_floor": round(applied / faust_floor, 4) if faust_floor else None,
        "ratio_projector_to_kafka_floor": round(applied / kafka_floor, 4),
        "ratio_projector_to_redis_floor": round(applied / redis_floor, 4),
        "ratio_rebuild_to_kafka_floor": round(replay.events_per_second / kafka_floor, 4),
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "load_avg_1m": round(os.getloadavg()[0], 2),
        },
    }


async def _faust_floor(settings: ProjectorSettings, total: int) -> float:
    """A faust worker (same app, transport and settings) whose agent only counts: records/s."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLEDGER_")}
    env.update(settings_env(settings))
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.projector",
        "--faust-floor-child",
        str(total),
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), timeout=3600)
    for line in out.decode().splitlines():
        if "{" in line:  # faust's terminal codes may precede it
            return float(json.loads(line[line.index("{") :])["records_per_s"])
    msg = f"the faust floor child printed no rate (exit {proc.returncode})"
    raise RuntimeError(msg)


def _faust_floor_child(total: int) -> None:
    """Run in the child: count ``total`` records through faust, print the rate, exit."""
    import faust  # noqa: PLC0415 - only the child needs faust

    from agentledger.projector.app import ProjectorApp  # noqa: PLC0415

    settings = ProjectorSettings()
    assert settings.kafka_bootstrap is not None
    faust_dir = settings.state_dir / "faust"
    faust_dir.mkdir(parents=True, exist_ok=True)
    app = ProjectorApp(
        f"{settings.projector_group}-floor",
        broker=f"kafka://{settings.kafka_bootstrap}",
        store="memory://",
        datadir=str(faust_dir / "{conf.id}-data"),
        autodiscover=False,
        topic_allow_declare=False,
        topic_disable_leader=True,
        consumer_auto_offset_reset="earliest",
        table_standby_replicas=1,
        web_enabled=False,
    )
    channel = app.topic(
        *topic_names(settings).run_topics, key_serializer="raw", value_serializer="raw"
    )
    seen = {"n": 0, "t0": 0.0}

    async def count(stream: Any) -> None:
        async for _ in stream.events():
            if seen["n"] == 0:
                seen["t0"] = time.perf_counter()
            seen["n"] += 1
            if seen["n"] >= total:
                rate = (total - 1) / (time.perf_counter() - seen["t0"])
                sys.stdout.write(json.dumps({"records_per_s": rate}) + "\n")
                sys.stdout.flush()
                os._exit(0)

    app.agent(channel)(count)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    worker = faust.Worker(app, loop=loop, loglevel="warning", quiet=True, redirect_stdouts=False)
    worker.execute_from_commandline()


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, run, print JSON."""
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["--faust-floor-child"]:
        _faust_floor_child(int(argv[1]))
        return
    if argv[:1] == ["--lag-floor-child"]:
        asyncio.run(_lag_floor_child(argv[1], argv[2].split(","), int(argv[3]), int(argv[4])))
        return
    p = argparse.ArgumentParser(prog="python -m bench.projector", description=__doc__)
    p.add_argument("--events", type=int, default=100_000, help="events published, then folded")
    p.add_argument(
        "--lag-rate", type=float, default=1000.0, help="runs/s of the steady load (8 events each)"
    )
    p.add_argument("--lag-seconds", type=float, default=10.0, help="how long the steady load")
    p.add_argument(
        "--warmup-seconds",
        type=float,
        default=0.0,
        help="the steady load run this long, unmeasured, before the measured one (the projector "
        "folds it first; DESIGN.md §16, 'The lag on a stack in use')",
    )
    p.add_argument(
        "--broker-warmup-seconds",
        type=float,
        default=BROKER_WARMUP_S,
        help="the measured run's broker paths (a projector of its own folding a published "
        "backlog, then the lag floor's load) run this long on topics of their own before "
        f"anything is measured, in {BROKER_WARMUP_ROUND_S:.0f} s rounds each reported: a "
        "broker started for the run JIT-compiles them meanwhile (DESIGN.md §16, 'A broker "
        "started for the run', 'The lag, session 20'); 0 = none",
    )
    p.add_argument(
        "--broker-warmup-plain",
        action="store_true",
        help="the broker warm-up without its projector and backlog (the lag floor's load "
        "alone, as before session 20)",
    )
    p.add_argument(
        "--rebuild-only", action="store_true", help="publish and rebuild only (e.g. 1,000,000)"
    )
    p.add_argument("--instances", type=int, default=1, help="projector processes in the group")
    p.add_argument(
        "--rebuild-workers",
        type=int,
        default=0,
        help="processes the rebuild folds in (AGENTLEDGER_REBUILD_WORKERS; 0 = one per core)",
    )
    p.add_argument("--json", type=Path, help="also write the report to this file")
    a = p.parse_args(argv)
    print_report(
        lambda: bench(
            a.events,
            a.lag_rate,
            a.lag_seconds,
            rebuild_only=a.rebuild_only,
            instances=a.instances,
            rebuild_workers=a.rebuild_workers,
            warmup_seconds=a.warmup_seconds,
            broker_warmup_seconds=a.broker_warmup_seconds,
            broker_warmup_plain=a.broker_warmup_plain,
        ),
        a.json,
    )


if __name__ == "__main__":
    main()
