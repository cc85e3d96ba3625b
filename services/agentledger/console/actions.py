"""The console's changes of state, each through the function its CLI command calls."""

from __future__ import annotations

from dataclasses import dataclass

from agentledger.alerts.ack import ack_alert
from agentledger.events.models import Decision
from agentledger.fleet import decide_as_operator
from agentledger.reconciler import ReconcilerSettings, open_settler, verdict

from .settings import ConsoleSettings


@dataclass(frozen=True)
class ConsoleActions:
    """``runs approve|reject``, ``effects resolve`` and ``alerts ack`` for the console."""

    settings: ConsoleSettings
    reconciler: ReconcilerSettings

    async def decide(self, run_id: str, decision: Decision, *, approver: str, note: str) -> str:
        """Approve or reject what ``run_id`` waits for and re-queue it; a line for the page."""
        event = await decide_as_operator(
            self.settings, run_id, decision, approver=approver, note=note
        )
        return f"{decision} by {approver} (intent {event.intent_hash}); resume requested"

    async def settle(
        self, run_id: str, key: str, *, landed: bool, ref: str, note: str, by: str
    ) -> str:
        """Record an operator's LANDED / NOT_LANDED for an open effect; a line for the page."""
        v = verdict(run_id, key, landed=landed, external_ref=ref or None, note=note, by=by)
        async with open_settler(self.reconciler) as settler:
            settled = await settler.settle(run_id, key, v)
        return settled.summary()

    async def ack(self, alert_id: str, by: str) -> str | None:
        """Acknowledge an open alert; None when there is none with that id."""
        event = await ack_alert(self.settings, alert_id, by)
        return None if event is None else f"acknowledged {event.alert_id} ({event.code})"
