"""`topics ensure` on the real broker: creates, is a no-op the second time, reports drift."""

from __future__ import annotations

import dataclasses

import pytest
from aiokafka.admin import NewTopic

from agentledger.bus.admin import TopicState, delete_topics, ensure_topics, kafka_admin
from agentledger.events.topics import RUN_ROLES, topic_specs
from agentledger.settings import CommonSettings

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def _fresh(settings: CommonSettings, tag: str) -> CommonSettings:
    """Settings with a topic prefix no other test (or the fixture) has used."""
    return settings.model_copy(update={"topic_prefix": f"{settings.topic_prefix}{tag}."})


async def test_ensure_creates_every_topic_with_its_spec(ledger_settings: CommonSettings) -> None:
    """A first ensure creates each topic with its partitions, retention and cleanup policy."""
    settings = _fresh(ledger_settings, "create")
    specs = topic_specs(settings)
    try:
        first = await ensure_topics(settings, specs)
        assert [t.state for t in first.topics] == [TopicState.CREATED] * len(specs)
        second = await ensure_topics(settings, specs)
        assert [t.state for t in second.topics] == [TopicState.UNCHANGED] * len(specs)
        assert not second.has_drift
    finally:
        await delete_topics(settings, [s.name for s in specs])


async def test_run_topics_are_co_partitioned(ledger_settings: CommonSettings) -> None:
    """Every run topic the fixture ensured has the same partition count on the broker."""
    names = [s.name for s in topic_specs(ledger_settings) if s.role in RUN_ROLES]
    assert ledger_settings.kafka_bootstrap is not None
    async with kafka_admin(ledger_settings.kafka_bootstrap) as admin:
        described = await admin.describe_topics(names)
    counts = {len(t["partitions"]) for t in described}
    assert counts == {ledger_settings.run_partitions}


async def test_partition_drift_is_reported_not_fixed(ledger_settings: CommonSettings) -> None:
    """A pre-existing topic with another partition count is reported as drift and left alone."""
    settings = _fresh(ledger_settings, "drift")
    specs = topic_specs(settings)
    steps = next(s for s in specs if s.role == "steps")
    assert settings.kafka_bootstrap is not None
    try:
        async with kafka_admin(settings.kafka_bootstrap) as admin:
            await admin.create_topics(
                [NewTopic(steps.name, steps.partitions + 1, settings.replication_factor or 1)]
            )
        report = await ensure_topics(settings, specs)
        outcome = next(t for t in report.topics if t.name == steps.name)
        assert report.has_drift
        assert outcome.state is TopicState.DRIFTED
        drifted = {d.property: (d.expected, d.actual) for d in outcome.drift}
        assert drifted["partitions"] == (str(steps.partitions), str(steps.partitions + 1))
        assert "retention.ms" in drifted  # created without our configs
        others = [t for t in report.topics if t.name != steps.name]
        assert {t.state for t in others} == {TopicState.CREATED}
    finally:
        await delete_topics(settings, [s.name for s in specs])


async def test_config_drift_is_reported(ledger_settings: CommonSettings) -> None:
    """A spec whose retention differs from the existing topic's is reported as drift."""
    specs = topic_specs(ledger_settings)
    changed = [dataclasses.replace(s, retention_ms=s.retention_ms + 1) for s in specs]
    report = await ensure_topics(ledger_settings, changed)
    assert {t.state for t in report.topics} == {TopicState.DRIFTED}
    for outcome in report.topics:
        assert [d.property for d in outcome.drift] == ["retention.ms"]
