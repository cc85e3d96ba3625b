"""agentledger's write path without the SDK: the events one step of the SDK writes, published
straight through KafkaEventLog (group-commit transactional producer) — the intent in one
transaction, then outcome + acceptance + checkpoint in a second. No Redis views."""

from __future__ import annotations

import json
import os
import time
from typing import Any, ClassVar

from agentledger.bus.admin import delete_topics, ensure_topics
from agentledger.bus.kafka import KafkaEventLog
from agentledger.events.models import (
    AcceptanceEvaluated,
    EffectIntended,
    EffectRecorded,
    RunEvent,
    RunStarted,
    StepCheckpointed,
    StepStarted,
)
from agentledger.events.topics import topic_names, topic_specs
from agentledger.settings import CommonSettings
from agentledger.views import RunView
from agentledger.views.fold import fold
from bench.peers.base import Peer, PeerUnavailableError, Probe
from bench.peers.kafka_size import topic_bytes
from bench.workload import effect_key, external_ref, message

WORKER = "bench-worker"
STEP_NAME = "agent-step"


def step_events(run_id: str, k: int, seq: int) -> tuple[list[RunEvent], list[RunEvent]]:
    """The two transactions of step ``k`` (the intent must be durable before the provider call)
    whose first event has sequence number ``seq``."""
    key = effect_key(run_id, k)
    env = {"run_id": run_id, "fence": 1, "worker_id": WORKER}
    idx = k - 1  # agentledger's step indexes start at 0
    intent: list[RunEvent] = [
        StepStarted(**env, seq=seq, step=idx, step_name=STEP_NAME, attempt=1),
        EffectIntended(
            **env,
            seq=seq + 1,
            step=idx,
            ordinal=0,
            effect="notify",
            provider="bench",
            kind="notify",
            idempotency_key=key,
            identity_hash=key,
            payload_hash=key,
        ),
    ]
    outcome: list[RunEvent] = [
        EffectRecorded(
            **env,
            seq=seq + 2,
            step=idx,
            effect="notify",
            idempotency_key=key,
            outcome="succeeded",
            external_ref=external_ref(key),
        ),
        AcceptanceEvaluated(
            **env, seq=seq + 3, step=idx, attempt=1, check="completed", passed=True
        ),
        StepCheckpointed(
            **env,
            seq=seq + 4,
            step=idx,
            step_name=STEP_NAME,
            attempt=1,
            result_json=json.dumps({"role": "assistant", "content": message(run_id, k)}),
        ),
    ]
    return intent, outcome


EVENTS_PER_STEP = 5


class LedgerRawPeer(Peer):
    """KafkaEventLog.publish per step: two group-committed transactions, no SDK, no views."""

    name: ClassVar[str] = "agentledger-raw"
    kind = "peer"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.env.kafka_bootstrap is None:
            raise PeerUnavailableError("no Kafka in this bench session")
        self.settings = CommonSettings(
            kafka_bootstrap=self.env.kafka_bootstrap,
            redis_url=self.env.redis_url,
            topic_prefix=f"bench.{self.store_name}.",
            key_prefix=f"bench:{self.store_name}",
        )
        self._log: KafkaEventLog | None = None

    async def start(self) -> None:
        """(Re)create the run topics when fresh and start the transactional producer."""
        specs = topic_specs(self.settings)
        if self.fresh:
            await delete_topics(self.settings, [s.name for s in specs])
        await ensure_topics(self.settings, specs)
        self._log = KafkaEventLog(
            self.settings, transactional_id=f"bench-{self.store_name}-{os.getpid()}"
        )
        await self._log.start()

    async def stop(self) -> None:
        """Stop the producer (idempotent)."""
        log, self._log = self._log, None
        if log is not None:
            await log.stop()

    @property
    def log(self) -> KafkaEventLog:
        """The running event log."""
        if self._log is None:
            raise PeerUnavailableError("the agentledger peer is not started")
        return self._log

    async def run(self, run_id: str, steps: int, probe: Probe | None = None) -> list[float]:
        """RunStarted, then per step: intent transaction, in-process provider, outcome one."""
        await self.log.publish(
            [
                RunStarted(
                    run_id=run_id,
                    seq=1,
                    fence=1,
                    worker_id=WORKER,
                    agent="bench",
                    plan=[STEP_NAME] * steps,
                )
            ]
        )
        out: list[float] = []
        seq = 2
        for k in range(1, steps + 1):
            if probe is not None:
                await probe(k - 1)
            start = time.perf_counter()
            intent, outcome = step_events(run_id, k, seq)
            await self.log.publish(intent)
            external_ref(effect_key(run_id, k))  # the provider call (in-process, instantaneous)
            await self.log.publish(outcome)
            out.append(time.perf_counter() - start)
            seq += EVENTS_PER_STEP
        return out

    async def resume(self, run_id: str, steps_done: int, probe: Probe) -> None:
        """Read the run's committed events back from Kafka and fold them into its view."""
        events = await self.log.read_run(run_id)
        view = fold(RunView(run_id=run_id), events, in_place=True).view
        if view.cursor < steps_done:
            msg = f"resumed view of {run_id} has cursor {view.cursor}, expected {steps_done}"
            raise PeerUnavailableError(msg)
        await probe(view.cursor)

    async def stored_bytes(self) -> int:
        """On-disk bytes of the run topics' segments."""
        return topic_bytes(self.env, topic_names(self.settings).run_topics)

    def notes(self) -> list[str]:
        """What this row measures."""
        return [
            "RAW KafkaEventLog.publish path (SDK not used): 2 transactions per step, "
            "acks=all, read_committed; no Redis views (bytes = Kafka segments only)"
        ]
