"""Topic drift: every difference between a spec and the broker's topic is named."""

from __future__ import annotations

import pytest

from agentledger.bus.admin import (
    Drift,
    EnsureReport,
    ObservedTopic,
    TopicOutcome,
    TopicState,
    check_specs,
    compare,
    default_replication,
    expected_configs,
    min_insync_replicas,
)
from agentledger.errors import ConfigurationError
from agentledger.events.topics import TopicSpec

SPEC = TopicSpec(
    name="p.runs.steps", partitions=4, retention_ms=1000, cleanup_policy="delete", role="steps"
)


def _observed(partitions: int = 4, rf: int = 1, **configs: str) -> ObservedTopic:
    base = {
        "retention.ms": "1000",
        "cleanup.policy": "delete",
        "min.insync.replicas": "1",
        "segment.bytes": "1",
    }
    base.update({k.replace("_", "."): v for k, v in configs.items()})
    return ObservedTopic("p.runs.steps", partitions, rf, base)


def test_a_matching_topic_has_no_drift() -> None:
    """Same partitions, replication and configs: nothing to report (other configs ignored)."""
    assert compare(SPEC, 1, _observed()) == ()


def test_partition_count_drift_is_reported() -> None:
    """A topic with another partition count is drift with both numbers."""
    assert compare(SPEC, 1, _observed(partitions=2)) == (Drift("partitions", "4", "2"),)


def test_replication_and_config_drift_are_reported() -> None:
    """Replication factor, min ISR, retention.ms and cleanup.policy differences are reported."""
    drift = compare(SPEC, 3, _observed(retention_ms="5", cleanup_policy="compact"))
    assert set(drift) == {
        Drift("replication_factor", "3", "1"),
        Drift("min.insync.replicas", "2", "1"),
        Drift("retention.ms", "1000", "5"),
        Drift("cleanup.policy", "delete", "compact"),
    }


def test_expected_configs_come_from_the_spec() -> None:
    """Each topic is created with its spec's retention.ms and cleanup.policy, min ISR 1 on RF 1."""
    assert expected_configs(SPEC, 1) == {
        "retention.ms": "1000",
        "cleanup.policy": "delete",
        "min.insync.replicas": "1",
    }


def test_three_replicas_need_two_in_sync() -> None:
    """From replication factor 3 on, a write must be on two replicas (one broker may die)."""
    assert [min_insync_replicas(rf) for rf in (1, 2, 3, 5)] == [1, 1, 2, 2]
    assert expected_configs(SPEC, 3)["min.insync.replicas"] == "2"


def test_unset_replication_follows_the_cluster() -> None:
    """Without a setting the replication factor is min(3, brokers): 1 on one node, 3 on three+."""
    assert [default_replication(n) for n in (0, 1, 2, 3, 5)] == [1, 1, 2, 3, 3]


def test_run_topics_with_different_partition_counts_are_refused() -> None:
    """Specs that would break co-partitioning of run topics are a configuration error."""
    effects = TopicSpec("p.runs.effects", 8, 1000, "delete", "effects")
    with pytest.raises(ConfigurationError, match="co-partitioned"):
        check_specs([SPEC, effects])


def test_repeated_topic_names_are_refused() -> None:
    """Two specs with one name are a configuration error."""
    with pytest.raises(ConfigurationError, match="repeat"):
        check_specs([SPEC, SPEC])


def test_report_flags_drift_and_renders_it() -> None:
    """A report with a drifted topic says so in its JSON form and its lines."""
    report = EnsureReport(
        (
            TopicOutcome("a", "steps", TopicState.CREATED),
            TopicOutcome("b", "effects", TopicState.DRIFTED, (Drift("partitions", "4", "2"),)),
        )
    )
    assert report.has_drift
    assert report.to_dict()["topics"][1]["drift"] == [
        {"property": "partitions", "expected": "4", "actual": "2"}
    ]
    assert "partitions: expected 4, found 2" in "\n".join(report.lines())
    assert not EnsureReport((TopicOutcome("a", "steps", TopicState.UNCHANGED),)).has_drift
