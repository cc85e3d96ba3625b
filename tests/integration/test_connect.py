"""``agentledger.connect`` on a Kafka whose topics nobody created: it ensures them and runs."""

from __future__ import annotations

import uuid

import pytest

import agentledger
from agentledger.bus.admin import delete_topics, require_topics
from agentledger.events.topics import topic_specs
from agentledger.providers.memory import MemoryProvider
from agentledger.settings import CommonSettings
from agentledger.worker import WorkerSettings

pytestmark = pytest.mark.integration


@agentledger.effect(provider="payments")
def refund(order: str) -> agentledger.EffectRequest:
    """A refund of ``order``."""
    return agentledger.EffectRequest(kind="refunds", identity={"order": order})


@agentledger.agent
async def refund_agent(order: str) -> str | None:
    """One effect, its reference as the result."""
    return (await refund(order)).external_ref


async def test_connect_ensures_the_topics_of_a_fresh_prefix_then_runs(
    ledger_settings: CommonSettings,
) -> None:
    """On a topic prefix without topics, connect() creates them (no `topics ensure` first, no
    hang) and the run commits to them; a second connect finds them and the recorded result."""
    fresh = f"fresh-{uuid.uuid4().hex[:8]}."
    settings = WorkerSettings(**{**ledger_settings.model_dump(), "topic_prefix": fresh})
    names = [spec.name for spec in topic_specs(settings)]
    provider = MemoryProvider()
    try:
        async with agentledger.connect(providers={"payments": provider}, settings=settings) as al:
            first = await al.run("o-1", refund_agent, "o-1")
        await require_topics(settings, names)  # raises ConfigurationError when one is missing
        async with agentledger.connect(providers={"payments": provider}, settings=settings) as al:
            again = await al.run("o-1", refund_agent, "o-1")
    finally:
        await delete_topics(settings, names)
    assert first == again == provider.effects[0].id
    assert len(provider.effects) == 1
