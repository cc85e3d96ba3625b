"""bench.projector's lag floor: the steady load's runs, each seen whole by a plain
read_committed consumer in another process, and nothing counted before its records exist."""

from __future__ import annotations

import asyncio
import os
from typing import Any
from unittest import mock

import pytest
from bench import projector as bench_projector
from bench.projector import EVENTS_PER_RUN, _broker_warm_up, _lag_floor, _steady_load, _warm_up

from agentledger.events.keying import run_key
from agentledger.events.topics import topic_names
from agentledger.projector.kafka import KafkaLogReader
from agentledger.projector.settings import ProjectorSettings
from agentledger.projector.testing import ProjectorProcess
from agentledger.settings import CommonSettings

pytestmark = pytest.mark.integration


async def test_every_run_of_the_steady_load_reaches_the_floor_consumer(
    ledger_settings: CommonSettings,
) -> None:
    """40 runs offered at 40 runs/s: the child consumer saw all 40 complete, so the floor has
    one lag per run (a child that missed a run's records would report fewer)."""
    floor = await _lag_floor(ledger_settings, 40.0, 1.0)  # type: ignore[arg-type]
    assert floor["runs"] == 40
    assert floor["lag_p50_ms"] <= floor["lag_p99_ms"] <= floor["lag_max_ms"]


async def test_the_ends_of_each_acknowledged_run_cover_its_records(
    ledger_settings: CommonSettings,
) -> None:
    """The ends the steady load reports for a run name exactly the partitions that hold its
    records, each past the run's last record there (what the lag poll waits for progress to
    reach)."""
    acked: dict[str, dict[tuple[str, int], int]] = {}

    def on_ack(run: str, _at: float, _seq: int, ends: dict[tuple[str, int], int]) -> None:
        acked[run] = ends

    offered, _ = await _steady_load(ledger_settings, 20.0, 0.5, on_ack)  # type: ignore[arg-type]
    assert offered == len(acked) == 10
    last: dict[bytes, dict[tuple[str, int], int]] = {}
    tps = [
        (topic, p)
        for topic in topic_names(ledger_settings).run_topics
        for p in range(ledger_settings.run_partitions)
    ]
    assert ledger_settings.kafka_bootstrap is not None
    async with KafkaLogReader(ledger_settings.kafka_bootstrap) as reader:
        ends = await reader.end_offsets(tps)
        async for records in reader.read({tp: (0, ends[tp]) for tp in tps}, chunk=1000):
            for r in records:
                last.setdefault(r.key or b"", {})[(r.topic, r.partition)] = r.offset
    for run, run_ends in acked.items():
        written = last[run_key(run)]
        assert set(written) == set(run_ends)
        for tp, offset in written.items():
            assert offset < run_ends[tp]


class _Projector:
    """A projector's metrics as the test sets them; counts how often they were read."""

    def __init__(self) -> None:
        self.applied = 0
        self.reads = 0
        self.polled = asyncio.Event()  # read again after the first read: the load is out

    async def metrics(self) -> dict[str, int]:
        self.reads += 1
        if self.reads >= 3:
            self.polled.set()
        return {"events_applied": self.applied}


async def test_the_warm_up_waits_until_the_projector_folded_all_of_it(
    ledger_settings: CommonSettings,
) -> None:
    """The unmeasured warm-up (10 runs of 8 events at 20 runs/s, published for real) does not
    return while the projector reports fewer of its 80 events applied, and returns once it
    reports them all: the measured lag phase starts with no backlog of it."""
    projector = _Projector()
    warm = asyncio.ensure_future(
        _warm_up(ledger_settings, [projector], 20.0, 0.5)  # type: ignore[arg-type, list-item]
    )
    polled = asyncio.ensure_future(projector.polled.wait())
    await asyncio.wait([warm, polled], return_when=asyncio.FIRST_COMPLETED)
    polled.cancel()
    projector.applied = 10 * EVENTS_PER_RUN - 1
    await asyncio.sleep(0.5)
    assert not warm.done()
    projector.applied = 10 * EVENTS_PER_RUN
    await asyncio.wait_for(warm, 30)


class _Caught:
    """A projector that has always folded everything: each read reports far more applied."""

    def __init__(self) -> None:
        self.reads = 0

    async def metrics(self) -> dict[str, int]:
        self.reads += 1
        return {"events_applied": self.reads * 1_000_000}


async def test_the_measured_load_writes_runs_the_warm_up_did_not(
    ledger_settings: CommonSettings,
) -> None:
    """A warm-up of 10 runs, then the measured load of 10 on the same topics: the log holds 20
    runs, none written twice (a measured run re-writing a warm-up run is all duplicates, which
    the projector reads back and refolds instead of folding a new run)."""
    await _warm_up(ledger_settings, [_Caught()], 20.0, 0.5)  # type: ignore[arg-type, list-item]
    measured: list[str] = []
    offered, _ = await _steady_load(
        ledger_settings,  # type: ignore[arg-type]
        20.0,
        0.5,
        lambda run, *_: measured.append(run),
    )
    assert offered == len(measured) == 10
    tps = [
        (topic, p)
        for topic in topic_names(ledger_settings).run_topics
        for p in range(ledger_settings.run_partitions)
    ]
    assert ledger_settings.kafka_bootstrap is not None
    records: dict[bytes, int] = {}
    async with KafkaLogReader(ledger_settings.kafka_bootstrap) as reader:
        ends = await reader.end_offsets(tps)
        async for chunk in reader.read({tp: (0, ends[tp]) for tp in tps}, chunk=1000):
            for r in chunk:
                records[r.key or b""] = records.get(r.key or b"", 0) + 1
    assert len(records) == 20
    assert set(records.values()) == {EVENTS_PER_RUN}


async def test_the_broker_warm_up_reports_each_round_on_topics_it_removes(
    ledger_settings: CommonSettings,
) -> None:
    """Plain (no projector, no backlog), two rounds of 20 runs at 40 runs/s: each round's floor
    saw all 20 runs and carries the given process's CPU share, and its topics are gone
    afterwards."""
    before = await _topic_names(ledger_settings)
    rounds = await _broker_warm_up(
        ledger_settings, 40.0, 1.0, os.getpid(), round_s=0.5, projector=False, publish_runs=0
    )
    assert [r["runs"] for r in rounds] == [20, 20]
    assert all(r["broker_cpu_share"] >= 0 for r in rounds)
    assert all("projector_cpu_share" not in r for r in rounds)
    assert await _topic_names(ledger_settings) == before


async def test_the_broker_warm_up_with_its_projector_folds_every_round_and_the_backlog(
    ledger_settings: CommonSettings,
) -> None:
    """With its own projector, a backlog of 10 runs and two rounds of 20 runs at 40 runs/s:
    each round's floor saw all 20 runs, the projector's CPU share is reported, the rounds
    name their runs apart (a round re-writing another's runs would hand the projector
    duplicates, a path the measured run does not take), and the topics and the projector's
    process are gone afterwards."""
    before = await _topic_names(ledger_settings)
    seen: list[str] = []
    real = bench_projector._lag_floor

    async def lag_floor(settings: ProjectorSettings, *a: Any, **kw: Any) -> dict[str, float]:
        floor = await real(settings, *a, **kw)
        seen.append(str(kw["prefix"]))
        return floor

    pids: list[int] = []
    real_enter = ProjectorProcess.wait_ready

    async def wait_ready(self: ProjectorProcess, timeout_s: float = 60.0) -> None:
        await real_enter(self, timeout_s)
        assert self.pid is not None
        pids.append(self.pid)

    with (
        mock.patch.object(bench_projector, "_lag_floor", lag_floor),
        mock.patch.object(ProjectorProcess, "wait_ready", wait_ready),
    ):
        rounds = await _broker_warm_up(
            ledger_settings, 40.0, 1.0, os.getpid(), round_s=0.5, publish_runs=10
        )
    assert [r["runs"] for r in rounds] == [20, 20]
    assert all(r["projector_cpu_share"] >= 0 for r in rounds)
    assert len(set(seen)) == 2
    assert len(pids) == 1
    with pytest.raises(ProcessLookupError):
        os.kill(pids[0], 0)  # stopped (and reaped) before the warm-up returned
    assert await _topic_names(ledger_settings) == before


async def _topic_names(settings: CommonSettings) -> set[str]:
    from aiokafka.admin import AIOKafkaAdminClient  # noqa: PLC0415

    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap)
    await admin.start()
    try:
        return set(await admin.list_topics())
    finally:
        await admin.close()
