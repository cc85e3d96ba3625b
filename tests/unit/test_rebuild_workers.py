"""How a rebuild splits the partition numbers over its worker processes (projector/workers.py)."""

from __future__ import annotations

import gc
from typing import Any

import pytest

from agentledger.projector import workers
from agentledger.projector.settings import ProjectorSettings
from agentledger.projector.workers import child_env, shares, worker_count


def test_shares_keep_each_partition_number_whole_and_balance_records() -> None:
    """Every topic-partition of one partition number lands in the same share (a run's events
    are all on its number), and the shares' record counts are as even as whole numbers allow."""
    ranges = {
        (topic, number): (0, size)
        for topic in ("a", "b", "c")
        for number, size in ((0, 900), (1, 100), (2, 500), (3, 500))
    }
    found = shares(ranges, 2)
    assert len(found) == 2
    numbers = [{p for _, p in share} for share in found]
    assert numbers[0].isdisjoint(numbers[1])
    assert numbers[0] | numbers[1] == {0, 1, 2, 3}
    for share in found:
        for _, number in share:
            assert all((t, number) in share for t in ("a", "b", "c"))
    loads = sorted(sum(b - a for a, b in share.values()) for share in found)
    assert loads == [3000, 3000]
    assert sorted(tp for share in found for tp in share) == sorted(ranges)


def test_shares_never_outnumber_the_partition_numbers() -> None:
    """More workers than partition numbers: one share per number, none empty."""
    ranges = {("a", 0): (0, 5), ("a", 1): (3, 3)}
    assert shares(ranges, 8) == [{("a", 0): (0, 5)}, {("a", 1): (3, 3)}]


def test_worker_count_follows_the_setting_and_the_partitions() -> None:
    """AGENTLEDGER_REBUILD_WORKERS decides (0: the CPU count), never above the partitions."""
    assert worker_count(ProjectorSettings(rebuild_workers=3), 8) == 3
    assert worker_count(ProjectorSettings(rebuild_workers=3), 2) == 2
    assert worker_count(ProjectorSettings(rebuild_workers=1), 8) == 1
    assert 1 <= worker_count(ProjectorSettings(rebuild_workers=0), 1) == 1


def test_a_child_gets_the_resolved_settings_and_secrets_in_clear() -> None:
    """The child reads the parent's settings (endpoints resolved) from its environment, the
    hash key as itself rather than its mask."""
    settings = ProjectorSettings(
        kafka_bootstrap="127.0.0.1:9", redis_url="redis://127.0.0.1:1/0", key_prefix="kp"
    )
    env = child_env(settings)
    assert env["AGENTLEDGER_KAFKA_BOOTSTRAP"] == "127.0.0.1:9"
    assert env["AGENTLEDGER_REDIS_URL"] == "redis://127.0.0.1:1/0"
    assert env["AGENTLEDGER_KEY_PREFIX"] == "kp"
    assert env["AGENTLEDGER_HASH_KEY"] == settings.hash_key.get_secret_value()
    assert "*" not in env["AGENTLEDGER_HASH_KEY"]
    assert env["AGENTLEDGER_PROJECTOR_WEB_ENABLED"] == "true"


class _Port:
    """A store or reader that opens and closes (the fold itself is replaced)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    @classmethod
    def from_url(cls, *args: Any, **kwargs: Any) -> _Port:
        return cls()

    async def __aenter__(self) -> _Port:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None


async def test_a_share_folds_with_the_collector_off_and_leaves_it_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A worker's share folds with the cyclic collector off (its runs stay alive until written)
    and the collector is on again once the share is done."""
    seen: list[bool] = []

    async def fold(*args: Any, **kwargs: Any) -> None:
        seen.append(gc.isenabled())

    monkeypatch.setattr(workers, "fold_ranges", fold)
    monkeypatch.setattr(workers, "RedisViewStore", _Port)
    monkeypatch.setattr(workers, "KafkaLogReader", _Port)
    settings = ProjectorSettings(kafka_bootstrap="127.0.0.1:9", redis_url="redis://127.0.0.1:1/0")
    spec = {"namespace": "n", "ranges": [["t", 0, 0, 5]], "partitions": 1, "parked_max": 10}
    assert gc.isenabled()
    await workers._fold_share(settings, spec | {"chunk": 5}, lambda _: None)
    assert seen == [False]
    assert gc.isenabled()
