"""Claim-ahead: batches claimed while others wait for the projector, and a stop mid-pass."""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from agentledger.bus.memory import MemoryEventLog
from agentledger.bus.port import Position
from agentledger.events.models import EffectReconciled
from agentledger.leases import Lease
from agentledger.leasing.memory import MemoryLeaseStore
from agentledger.providers.faults import FaultRule
from agentledger.providers.memory import MemoryProvider
from agentledger.providers.protocol import LookupResult
from agentledger.reconciler.service import Reconciler
from agentledger.reconciler.settings import ProviderPolicy
from agentledger.views.store import TopicPartition, ViewAt

from .test_reconciler_service import REQUEST, FoldingViews, World

RUNS = 12
BATCH = 4


class GatedLeases(MemoryLeaseStore):
    """Leases noting each batch acquisition in ``trail``; the ``open_at``-th opens ``gate``."""

    trail: list[str]
    gate: asyncio.Event
    open_at: int

    async def acquire_many(
        self, floors: Mapping[str, int], owner: str, ttl_ms: int
    ) -> dict[str, Lease | None]:
        """Acquire as the memory store does, then note it."""
        got = await super().acquire_many(floors, owner, ttl_ms)
        self.trail.append("leases")
        if self.trail.count("leases") >= self.open_at:
            self.gate.set()
        return got


class BehindViews(FoldingViews):
    """Views whose projector is behind until ``gate`` opens; each batch's view read is noted."""

    def __init__(self, log: MemoryEventLog, gate: asyncio.Event, trail: list[str]) -> None:
        super().__init__(log)
        self._gate = gate
        self._trail = trail

    async def progress(self, positions: list[Position]) -> bool:
        """Caught up only once the gate is open."""
        return self._gate.is_set()

    async def load_many_at(
        self,
        partitions: Mapping[str, Sequence[TopicPartition]],
        *,
        only: Collection[str] | None = None,
    ) -> dict[str, ViewAt] | None:
        """The folded views, noted in the trail."""
        self._trail.append("views")
        return await super().load_many_at(partitions, only=only)


@dataclass
class GatedWorld(World):
    """A world whose lease store notes acquisitions and opens the projector's gate."""

    gate: asyncio.Event = field(default_factory=asyncio.Event)
    trail: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        leases = GatedLeases(clock=self.clock)
        leases.trail, leases.gate, leases.open_at = self.trail, self.gate, RUNS // BATCH
        self.leases = leases
        self.log = MemoryEventLog(guard=self.leases, clock=self.clock)


async def test_batches_are_claimed_while_earlier_ones_wait_for_the_projector() -> None:
    """Every in-flight batch takes its leases while the first ones still wait at the resume
    barrier (the projector catches up only once all of them have), and each intent is looked
    up once with every lease released afterwards."""
    w = GatedWorld()
    for n in range(RUNS):
        await w.start_run(f"r{n:02d}", f"k{n:02d}")
    rec = w.reconciler(
        views=BehindViews(w.log, w.gate, w.trail),
        reconciler_batch_size=BATCH,
        reconciler_run_concurrency=RUNS,
        reconciler_barrier_timeout_s=5.0,
    )
    report = await rec.run_once(watch=False)
    assert w.trail.index("views") > max(i for i, x in enumerate(w.trail) if x == "leases")
    assert w.trail.count("leases") == RUNS // BATCH
    assert report.resolved == RUNS
    assert set(w.provider.lookups.values()) == {1}
    assert len(w.provider.lookups) == RUNS
    assert [await w.leases.current(f"r{n:02d}") for n in range(RUNS)] == [None] * RUNS


class StoppingProvider(MemoryProvider):
    """A provider that sets ``stopping`` while answering its ``at``-th lookup."""

    stopping: asyncio.Event
    at: int

    async def lookup(self, kind: str, key: str) -> LookupResult:
        """Answer as the memory provider does; at the ``at``-th lookup, stop the service."""
        answer = await super().lookup(kind, key)
        if sum(self.lookups.values()) == self.at:
            self.stopping.set()
        return answer


async def test_a_stop_mid_pass_leaves_unasked_intents_open_and_every_lease_released() -> None:
    """Stopped during its third lookup, the service writes the three findings, asks nothing
    more, releases every claimed run's lease, and a new instance settles the rest with one
    lookup per intent."""
    stop = asyncio.Event()
    provider = StoppingProvider(name="sandbox")
    provider.stopping, provider.at = stop, 3
    w = World(provider=provider)
    runs = [f"r{n:02d}" for n in range(20)]
    for n, run_id in enumerate(runs):
        await w.start_run(run_id, f"k{n:02d}")
    await w.provider.perform(REQUEST, "k00")
    # one lookup at a time, so the stop lands with exactly three asked
    policy = ProviderPolicy(concurrency=1, attempts=2, timeout_s=1, backoff_base_ms=1)

    def reconciler(name: str) -> Reconciler:
        return w.reconciler(
            name,
            reconciler_batch_size=BATCH,
            reconciler_run_concurrency=20,
            reconciler_default_provider=policy,
        )

    await asyncio.wait_for(reconciler("rec-1").run(stop), 30)
    assert sum(w.provider.lookups.values()) == 3
    written = [e for e in w.published(EffectReconciled) if isinstance(e, EffectReconciled)]
    assert len(written) == 3
    assert [await w.leases.current(r) for r in runs] == [None] * len(runs)
    still_open = [r for r in runs if (await w.view(r)).open_effects()]
    assert len(still_open) == len(runs) - 3
    report = await reconciler("rec-2").run_once(watch=False)
    assert report.looked_up == len(runs) - 3
    assert set(w.provider.lookups.values()) == {1}
    assert len(w.provider.lookups) == len(runs)
    assert not [r for r in runs if (await w.view(r)).open_effects()]


class CountingLeases(MemoryLeaseStore):
    """Leases that track how many the reconciler holds at once (``most``)."""

    held: set[str]
    most: int

    async def acquire_many(
        self, floors: Mapping[str, int], owner: str, ttl_ms: int
    ) -> dict[str, Lease | None]:
        """Acquire as the memory store does; count the reconciler's."""
        got = await super().acquire_many(floors, owner, ttl_ms)
        if owner.startswith("rec"):
            self.held |= {r for r, lease in got.items() if lease is not None}
            self.most = max(self.most, len(self.held))
        return got

    async def release_many(self, leases: Sequence[Lease]) -> None:
        """Release as the memory store does; count the reconciler's."""
        await super().release_many(leases)
        self.held -= {x.run_id for x in leases}


@dataclass
class CountingWorld(World):
    """A world whose lease store counts the reconciler's leases held at once."""

    def __post_init__(self) -> None:
        leases = CountingLeases(clock=self.clock)
        leases.held, leases.most = set(), 0
        self.leases = leases
        self.log = MemoryEventLog(guard=self.leases, clock=self.clock)


async def test_runs_in_flight_stay_within_run_concurrency_and_each_is_settled_once() -> None:
    """With 8 runs in flight allowed and batches of 4, two batches are held at once and never
    more, each of 20 intents is looked up once, and no lease is left held."""
    w = CountingWorld()
    w.provider.set_faults(FaultRule(latency_ms=1))
    runs = [f"r{n:02d}" for n in range(20)]
    for n, run_id in enumerate(runs):
        await w.start_run(run_id, f"k{n:02d}")
    rec = w.reconciler(reconciler_batch_size=BATCH, reconciler_run_concurrency=2 * BATCH)
    report = await rec.run_once(watch=False)
    assert isinstance(w.leases, CountingLeases)
    assert w.leases.most == 2 * BATCH
    assert report.resolved == len(runs)
    assert set(w.provider.lookups.values()) == {1}
    assert len(w.provider.lookups) == len(runs)
    assert w.leases.held == set()
    assert [await w.leases.current(r) for r in runs] == [None] * len(runs)
