"""Every Lua script call and multi-key command of the Redis stores touches one hash slot."""

from __future__ import annotations

from typing import cast

from redis.asyncio import Redis
from redis.crc import key_slot

from agentledger.alerts.redis_store import alerts_tag
from agentledger.events.keying import partition_for, run_key
from agentledger.leasing.redis_store import lease_key
from agentledger.leasing.run_index import RedisRunIndex
from agentledger.views.keys import STATUSES, Keys, partitions_of, sharded_name
from agentledger.views.model import EffectView, RunView
from agentledger.views.redis_store import RedisViewStore
from agentledger.views.store import IndexUpdate, RunWrite

RUNS = [f"run-{n}" for n in range(40)] + ["odd{id}", "{", ""]


def store(*, sharded: bool) -> RedisViewStore:
    """A store whose calls are only planned here (the client is never used)."""
    return RedisViewStore(
        cast("Redis", object()), key_prefix="al", partitions=4, sharded=sharded, clock=lambda: 1
    )


def batch() -> tuple[list[RunWrite], list[IndexUpdate], dict[tuple[str, int], int]]:
    """A projector batch over every run, with an open intent each and progress everywhere."""
    writes, updates = [], []
    for run in RUNS:
        view = RunView(run_id=run, status="running", applied_seq=3)
        view.effects[f"{run}:k"] = EffectView(
            idempotency_key=f"{run}:k",
            step=0,
            ordinal=0,
            effect="charge",
            provider="sandbox",
            kind="payments",
            identity_hash="i",
            payload_hash="p",
            intended_at=5,
        )
        writes.append(RunWrite(run_id=run, expected=None, view=view, effects={f"{run}:k"}))
        updates.append(
            IndexUpdate(run, "running", 7, drop_statuses=STATUSES, open_intents={f"{run}:k": 5})
        )
    progress = {(topic, p): 10 for topic in ("runs.steps", "runs.effects") for p in range(4)}
    return writes, updates, progress


def slots(keys: list[str]) -> set[int]:
    return {key_slot(k.encode()) for k in keys}


def test_a_sharded_batch_is_one_single_slot_commit_per_partition() -> None:
    """On Redis Cluster a batch is one COMMIT per partition, each with the keys of one slot:
    the partition's runs, indexes and progress."""
    writes, updates, progress = batch()
    space_name = sharded_name("vabc", 4)
    planned = store(sharded=True).commit_calls(space_name, writes, updates, progress)
    assert len(planned) == 4
    covered: set[str] = set()
    for (_, keys, _), group_writes, runs, _ in planned:
        assert len(slots(keys)) == 1, keys
        homes = {partition_for(run_key(w.run_id), 4) for w in group_writes}
        assert len(homes) == 1
        covered.update(runs)
    assert covered == set(RUNS)
    assert partitions_of(space_name) == 4


def test_a_plain_batch_is_one_script_call() -> None:
    """On a single Redis a batch is one COMMIT call (one round trip), whatever its runs."""
    writes, updates, progress = batch()
    planned = store(sharded=False).commit_calls("vabc", writes, updates, progress)
    assert len(planned) == 1


def test_the_keys_of_one_run_share_a_slot_in_either_layout() -> None:
    """LOAD_RUN and WRITE_RUN take a run's four keys: one slot, plain or sharded."""
    for namespace in ("vabc", sharded_name("vabc", 4), sharded_name("vabc", 64)):
        space = Keys("al").space(namespace)
        for run in RUNS:
            assert len(slots(space.run_keys(run))) == 1, (namespace, run)


def test_index_updates_of_a_sharded_namespace_are_one_slot_per_group() -> None:
    """UPDATE_INDEXES (rebuild, prune) is called with one group's indexes and progress."""
    space = Keys("al").space(sharded_name("vabc", 8))
    for group in space.groups:
        keys = [space.status_index(s, group) for s in STATUSES]
        keys += [space.intents_index(group), space.parked_index(group), space.progress(group)]
        assert len(slots(keys)) == 1
    partitions = {key_slot(space.progress(g).encode()) for g in space.groups}
    assert len(partitions) > 1  # not one hot slot for every index


def test_lease_run_index_and_alert_keys_are_single_slot() -> None:
    """The lease scripts take one key; the alert store's transactions share the alerts tag."""
    index = RedisRunIndex(cast("Redis", object()), key_prefix="al")
    for run in RUNS:
        assert len(slots([lease_key("al", run)])) == 1
        assert key_slot(index.key(run).encode()) == key_slot(lease_key("al", run).encode())
    tag = alerts_tag("al")
    assert len(slots([f"{tag}:rec:x", f"{tag}:keys", f"{tag}:ids", f"{tag}:undelivered"])) == 1
