"""The reconciler service end to end on the in-memory ports: log, leases, views, provider."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

from agentledger.alerts.book import AlertBook
from agentledger.alerts.store import MemoryAlertStore
from agentledger.bus.memory import MemoryEventLog
from agentledger.bus.port import Position
from agentledger.events.models import (
    Alert,
    EffectCompensated,
    EffectIntended,
    EffectReconciled,
    EffectRecorded,
    Event,
    ResumeRequested,
    RunEvent,
    RunFinished,
    RunPaused,
    RunStarted,
    StepRejected,
    StepStarted,
)
from agentledger.leasing.memory import MemoryLeaseStore
from agentledger.providers.faults import FaultRule
from agentledger.providers.memory import MemoryProvider
from agentledger.providers.protocol import EffectRequest
from agentledger.reconciler.providers import ProviderPool
from agentledger.reconciler.service import Reconciler
from agentledger.reconciler.settings import ProviderPolicy, ReconcilerSettings
from agentledger.views import RunView, fold
from agentledger.views.store import OpenIntent, TopicPartition, ViewAt, ViewReader

T0 = 1_700_000_000_000
REQUEST = EffectRequest(kind="payments", identity={"amount": 500, "currency": "EUR"})


class FoldingViews(ViewReader):
    """Views folded on demand from a memory log: always caught up with it."""

    def __init__(self, log: MemoryEventLog) -> None:
        self._log = log

    def _run_ids(self) -> list[str]:
        keys = {r.key for t in self._log.topics.run_topics for r in self._log.records(t)}
        return sorted(k.decode() for k in keys if k is not None)

    async def load(self, run_id: str) -> RunView | None:
        """The fold of the run's committed events."""
        events = await self._log.read_run(run_id)
        return fold(RunView(run_id=run_id), events).view if events else None

    async def progress(self, positions: list[Position]) -> bool:
        """Always caught up."""
        return True

    async def load_at(self, run_id: str, partitions: Sequence[TopicPartition]) -> ViewAt | None:
        """The fold, complete up to the end of every partition."""
        ends = {(p.topic, p.partition): p.offset for p in await self._log.run_end_positions(run_id)}
        return ViewAt(await self.load(run_id), {tp: ends[tp] for tp in partitions}, parked=[])

    async def runs_by_status(self, status: str, limit: int = 1000) -> list[str]:
        """Runs whose folded status is ``status``."""
        views = [await self.load(r) for r in self._run_ids()]
        return [v.run_id for v in views if v is not None and v.status == status][:limit]

    async def open_intents(
        self, older_than: int | None = None, limit: int = 1000
    ) -> list[OpenIntent]:
        """Open intents, oldest first."""
        found = []
        for run_id in self._run_ids():
            view = await self.load(run_id)
            assert view is not None
            for e in view.open_effects():
                if older_than is None or e.intended_at <= older_than:
                    found.append(OpenIntent(run_id, e.idempotency_key, e.intended_at))
        return sorted(found, key=lambda i: i.intended_at)[:limit]


@dataclass
class World:
    """A clock, the shared in-memory ports, and a provider."""

    now: list[int] = field(default_factory=lambda: [T0])
    provider: MemoryProvider = field(default_factory=lambda: MemoryProvider(name="sandbox"))
    leases: MemoryLeaseStore = field(init=False)
    log: MemoryEventLog = field(init=False)
    alerts: MemoryAlertStore = field(default_factory=MemoryAlertStore)

    def __post_init__(self) -> None:
        self.leases = MemoryLeaseStore(clock=self.clock)
        self.log = MemoryEventLog(guard=self.leases, clock=self.clock)

    def clock(self) -> int:
        """The test's time."""
        return self.now[0]

    def reconciler(
        self, name: str = "rec-1", views: ViewReader | None = None, **overrides: object
    ) -> Reconciler:
        """A reconciler instance on this world's ports (views folded from the log by default)."""
        fields: dict[str, object] = {
            "reconciler_id": name,
            "reconciler_intent_grace_ms": 1_000,
            "reconciler_orphan_grace_ms": 30_000,
            "reconciler_barrier_timeout_s": 0.1,
            "reconciler_default_provider": ProviderPolicy(
                attempts=2, timeout_s=1, backoff_base_ms=1
            ),
            **overrides,
        }
        settings = ReconcilerSettings(**fields)  # type: ignore[arg-type]
        pool = ProviderPool(
            {"sandbox": self.provider}, policy=settings.policy, clock=self.clock, jitter=lambda: 0
        )
        return Reconciler(
            settings,
            log=self.log,
            views=views or FoldingViews(self.log),
            leases=self.leases,
            providers=pool,
            book=AlertBook(self.alerts, source=name, clock=self.clock),
            clock=self.clock,
        )

    async def start_run(self, run_id: str, *keys: str, worker: str = "w1") -> None:
        """A run whose worker wrote intents for ``keys`` and died (its lease expired)."""
        lease = await self.leases.acquire(run_id, worker, 10_000)
        env = {
            "run_id": run_id,
            "fence": lease.fence,
            "worker_id": worker,
            "occurred_at": self.clock(),
        }
        events: list[RunEvent] = [
            RunStarted(**env, seq=1, agent="a", plan=["pay"]),
            StepStarted(**env, seq=2, step=0, step_name="pay", attempt=1),
        ]
        for n, key in enumerate(keys):
            events.append(
                EffectIntended(
                    **env,
                    seq=3 + n,
                    step=0,
                    ordinal=n,
                    effect=f"charge{n}",
                    provider="sandbox",
                    kind="payments",
                    idempotency_key=key,
                    identity_hash=REQUEST.identity_hash,
                    payload_hash=REQUEST.payload_hash,
                )
            )
        await self.log.publish(events)
        await self.leases.release(lease)
        self.now[0] += 5_000

    async def append(self, run_id: str, make: type[RunEvent], **fields: object) -> None:
        """Append one event to the run as a fresh lease holder."""
        view = await FoldingViews(self.log).load(run_id)
        assert view is not None
        lease = await self.leases.acquire(run_id, "w9", 10_000, floor=view.fence)
        await self.log.publish(
            [
                make(
                    run_id=run_id,
                    seq=view.applied_seq + 1,
                    fence=lease.fence,
                    worker_id="w9",
                    **fields,
                )
            ]
        )
        await self.leases.release(lease)

    def published(self, kind: type[Event]) -> list[Event]:
        """Every committed event of a type, across topics."""
        roles = ("effects", "steps", "requests", "alerts")
        return [
            e
            for r in roles
            for e in self.log.events(self.log.topics.for_role(r))
            if isinstance(e, kind)
        ]

    async def view(self, run_id: str) -> RunView:
        """The run's current view."""
        view = await FoldingViews(self.log).load(run_id)
        assert view is not None
        return view


async def test_landed_effect_is_recorded_and_the_run_requeued() -> None:
    """A key the provider performed is recorded LANDED with its id, and the run is re-queued."""
    w = World()
    performed = await w.provider.perform(REQUEST, "k1")
    await w.start_run("r1", "k1")
    report = await w.reconciler().run_once()
    assert (report.landed, report.resumes) == (1, 1)
    view = await w.view("r1")
    assert view.effects["k1"].state == "landed"
    assert view.effects["k1"].external_ref == performed.external_ref
    assert [e.run_id for e in w.published(ResumeRequested) if isinstance(e, ResumeRequested)] == [
        "r1"
    ]
    assert w.provider.lookups["k1"] == 1
    assert len(w.provider.effects) == 1


async def test_missing_effect_is_not_landed_and_nothing_is_sent() -> None:
    """A key the provider never saw is NOT_LANDED; the reconciler itself sends nothing."""
    w = World()
    await w.start_run("r1", "k1")
    report = await w.reconciler().run_once()
    assert report.not_landed == 1
    assert (await w.view("r1")).effects["k1"].state == "not_landed"
    assert w.provider.effects == []


async def test_unknown_pauses_alerts_once_and_closes_when_the_provider_answers() -> None:
    """Provider down: UNKNOWN, paused, one alert over many polls; back up: LANDED, alert closed."""
    w = World()
    await w.provider.perform(REQUEST, "k1")
    w.provider.set_faults(FaultRule(mode="down"))
    await w.start_run("r1", "k1")
    rec = w.reconciler()
    for _ in range(3):
        report = await rec.run_once()
        w.now[0] += 60_000  # past any provider backoff
    view = await w.view("r1")
    assert view.status == "paused"
    assert view.pause is not None
    assert view.pause.reason == "effect_unknown"
    assert view.effects["k1"].state == "unknown"
    assert len(w.published(RunPaused)) == 1
    opened = [a for a in w.published(Alert) if isinstance(a, Alert)]
    assert [(a.code, a.state) for a in opened] == [("effect.unknown", "open")]
    assert report.unknown == 1
    assert not w.published(ResumeRequested)
    w.provider.clear_faults()
    report = await rec.run_once()
    assert report.landed == 1
    assert report.resumes == 1
    alerts = [a for a in w.published(Alert) if isinstance(a, Alert)]
    assert [(a.state, a.count) for a in alerts] == [("open", 1), ("closed", 3)]
    assert alerts[0].alert_id == alerts[1].alert_id
    assert (await w.view("r1")).effects["k1"].state == "landed"


async def test_a_live_writer_is_left_alone() -> None:
    """While a worker holds the run's lease its intents are not looked up or written to."""
    w = World()
    await w.start_run("r1", "k1")
    await w.leases.acquire("r1", "w2", 60_000, floor=5)
    report = await w.reconciler().run_once()
    assert report.held == 1
    assert report.looked_up == 0
    assert w.provider.lookups["k1"] == 0
    assert not w.published(EffectReconciled)


async def test_two_instances_look_each_intent_up_once() -> None:
    """Two reconcilers running passes at the same time look each of 40 intents up exactly once."""
    w = World()
    w.provider.set_faults(FaultRule(latency_ms=2))
    for n in range(20):
        await w.start_run(f"r{n}", f"k{n}a", f"k{n}b")
    reports = await asyncio.gather(w.reconciler("a").run_once(), w.reconciler("b").run_once())
    assert sum(r.looked_up for r in reports) == 40
    assert set(w.provider.lookups.values()) == {1}
    assert len(w.provider.lookups) == 40
    again = await asyncio.gather(w.reconciler("a").run_once(), w.reconciler("b").run_once())
    assert sum(r.looked_up for r in again) == 0
    assert len(w.published(EffectReconciled)) == 40


async def test_orphan_is_requeued_once_per_grace_and_closed_when_picked_up() -> None:
    """An idle running run without lease is re-queued with an alert; a worker's lease closes it."""
    w = World()
    await w.start_run("r1")
    w.now[0] += 30_000
    rec = w.reconciler()
    first = await rec.run_once()
    assert first.orphans == 1
    w.now[0] += 10_000
    assert (await rec.run_once()).orphans == 0
    w.now[0] += 25_000
    assert (await rec.run_once()).orphans == 1
    assert len(w.published(ResumeRequested)) == 2
    await w.leases.acquire("r1", "w2", 60_000)
    closing = await rec.run_once()
    assert closing.alerts_closed == 1
    alerts = [a for a in w.published(Alert) if isinstance(a, Alert)]
    assert [(a.code, a.state) for a in alerts] == [
        ("run.orphaned", "open"),
        ("run.orphaned", "closed"),
    ]


async def test_failed_run_compensates_its_rejected_step_once() -> None:
    """A failed run's performed effect in a rejected step is undone once, under its own key."""
    w = World()
    performed = await w.provider.perform(REQUEST, "k1")
    await w.start_run("r1", "k1")
    await w.append(
        "r1",
        EffectRecorded,
        step=0,
        effect="charge0",
        idempotency_key="k1",
        outcome="succeeded",
        external_ref=performed.external_ref,
    )
    await w.append("r1", StepRejected, step=0, step_name="pay", attempt=1, reason="check failed")
    await w.append("r1", RunFinished, status="failed")
    rec = w.reconciler()
    assert (await rec.run_once()).compensated == 1
    assert (await rec.run_once()).compensated == 0
    [comp] = [e for e in w.published(EffectCompensated) if isinstance(e, EffectCompensated)]
    assert comp.compensation_key == "k1:compensate"
    assert comp.outcome == "succeeded"
    assert [e.kind for e in w.provider.effects] == ["payments", "payments.compensation"]
    assert (await w.view("r1")).effects["k1"].state == "compensated"


async def test_effect_without_compensation_raises_an_alert() -> None:
    """An effect with no external reference is not guessed at: an alert asks a person to undo it."""
    w = World()
    await w.start_run("r1", "k1")
    await w.append(
        "r1",
        EffectRecorded,
        step=0,
        effect="charge0",
        idempotency_key="k1",
        outcome="succeeded",
        external_ref=None,
    )
    await w.append("r1", StepRejected, step=0, step_name="pay", attempt=1, reason="bad")
    await w.append("r1", RunFinished, status="rejected")
    rec = w.reconciler()
    await rec.run_once()
    await rec.run_once()
    alerts = [a for a in w.published(Alert) if isinstance(a, Alert)]
    assert [a.code for a in alerts] == ["effect.not_compensable"]
    assert w.provider.effects == []
    assert not w.published(EffectCompensated)


async def test_expired_pause_raises_an_alert() -> None:
    """A run paused past its expiry raises run.pause_expired once."""
    w = World()
    await w.start_run("r1")
    await w.append("r1", RunPaused, reason="approval", expires_at=w.clock() + 1_000)
    rec = w.reconciler()
    assert (await rec.run_once()).alerts_opened == 0
    w.now[0] += 2_000
    assert (await rec.run_once()).alerts_opened == 1
    assert (await rec.run_once()).alerts_opened == 0


async def test_identity_mismatch_pauses_once_and_is_not_looked_up_again() -> None:
    """A key the provider holds for other identity fields: paused, one critical alert, no retry."""
    w = World()
    other = EffectRequest(kind="payments", identity={"amount": 999, "currency": "EUR"})
    await w.provider.perform(other, "k1")
    await w.start_run("r1", "k1")
    rec = w.reconciler()
    first = await rec.run_once()
    assert first.unknown == 1
    view = await w.view("r1")
    assert view.pause is not None
    assert view.pause.reason == "effect_identity_mismatch"
    assert view.effects["k1"].state == "unknown"
    w.now[0] += 60_000
    again = await rec.run_once()
    assert again.looked_up == 0
    assert w.provider.lookups["k1"] == 1
    alerts = [a for a in w.published(Alert) if isinstance(a, Alert)]
    assert [(a.code, a.severity) for a in alerts] == [("effect.identity_mismatch", "critical")]
