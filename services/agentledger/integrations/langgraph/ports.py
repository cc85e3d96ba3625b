"""The real ports of a saver: a worker's ports (Kafka log fenced by Redis leases, Redis views)
plus the run index, with the topics made sure of on start."""

from __future__ import annotations

from agentledger._core.ports import WorkerPorts
from agentledger.bus.admin import ensure_topics
from agentledger.events.topics import topic_specs
from agentledger.integrations.langgraph.runindex import RedisRunIndex
from agentledger.integrations.langgraph.settings import SaverSettings
from agentledger.outage import ride_out


class SaverPorts(WorkerPorts):
    """Opens and closes what a saver talks to; ``settings`` must carry resolved endpoints.

    Leases, views and the run index share the worker ports' one Redis client, whose pool waits
    for a free connection (every held thread renews its lease on its own schedule).
    """

    def __init__(self, settings: SaverSettings) -> None:
        super().__init__(settings)
        self.run_index = RedisRunIndex(
            self.redis,
            key_prefix=settings.key_prefix,
            endpoint=self.endpoint,
            outage_budget_s=settings.outage_budget_s,
        )

    async def start(self) -> None:
        """Make sure the topics exist, then connect the producer."""
        if not self._started:
            bootstrap = self.settings.kafka_bootstrap or ""
            await ride_out(
                lambda: ensure_topics(self.settings, topic_specs(self.settings)),
                dependency="Kafka",
                endpoint=bootstrap,
                budget_s=self.settings.outage_budget_s,
            )
        await super().start()
