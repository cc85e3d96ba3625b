"""Reading the alerts topic to its end into the alert store, as the reconciler's relay does.

Workers, the projector and the fleet publish their alerts straight to the topic. A command that
answers from the alert store (``alerts list``) or closes alerts there (``effects resolve``)
first takes in what is on the topic, so it never contradicts ``alerts tail`` when no reconciler
relays alerts.
"""

from __future__ import annotations

from agentledger.alerts.book import AlertBook
from agentledger.alerts.delivery import DeliveryLedger
from agentledger.alerts.relay import AlertRelay
from agentledger.bus.consumer import KafkaEventConsumer
from agentledger.events.topics import topic_names
from agentledger.settings import CommonSettings


async def take_in_alerts(settings: CommonSettings, book: AlertBook, ledger: DeliveryLedger) -> int:
    """Bring every alert event now on the topic into ``book``'s store; how many were read."""
    relay = AlertRelay([], ledger, book=book)
    async with KafkaEventConsumer(
        settings,
        [topic_names(settings).alerts],
        from_beginning=True,
        until_end=True,
        client_id="agentledger-alerts-intake",
    ) as consumer:
        return await relay.consume(consumer)
